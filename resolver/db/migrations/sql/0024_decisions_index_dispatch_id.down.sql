-- Migration 0024_decisions_index_dispatch_id (down): the decisions index without the
-- dispatch id again.

DROP INDEX ix_recovery_resolutions_manual;
CREATE INDEX ix_recovery_resolutions_manual
    ON approved_action_recovery_resolutions (resolved_at_ms, resolution_id)
    WHERE source = 'manual';
