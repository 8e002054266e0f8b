-- Migration 0024_decisions_index_dispatch_id (up): the decisions index carries the dispatch
-- id, so the decisions list's total walks it newest first without reading the resolutions'
-- rows (an index-only scan, each decision one probe of its dispatch for the project scope).
-- Manual decisions are spread among the automatic resolutions of a long history: without it
-- the walk reads one resolution page per decision. Applied as it is by
-- versions/0024_decisions_index_dispatch_id.py; never edited once released (the current
-- definitions live in resolver/db/schema/).

DROP INDEX ix_recovery_resolutions_manual;
CREATE INDEX ix_recovery_resolutions_manual
    ON approved_action_recovery_resolutions (resolved_at_ms, resolution_id)
    INCLUDE (dispatch_id)
    WHERE source = 'manual';
