-- Undo 0008_human_decision. The 0006 page commit is created again by the migration script.
DROP FUNCTION IF EXISTS resolver_commit_page(json, bigint);
DROP TABLE IF EXISTS recovery_audit_head;
DROP TABLE IF EXISTS recovery_audit_chain;
DROP INDEX IF EXISTS ix_recovery_resolutions_manual;
DROP INDEX IF EXISTS ix_approved_action_dispatches_approval_request_id;
DROP INDEX IF EXISTS ix_recovery_controls_waiting;
ALTER TABLE approved_action_recovery_controls
    DROP COLUMN manual_reason,
    DROP COLUMN last_evidence_digest,
    DROP COLUMN last_failure_class,
    DROP COLUMN last_inspected_at_ms,
    DROP COLUMN first_inspected_at_ms,
    DROP COLUMN finding_counts;
