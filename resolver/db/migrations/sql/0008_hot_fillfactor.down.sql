-- Migration 0008_hot_fillfactor (down): undoes 0008_hot_fillfactor.up.sql: PostgreSQL's default fillfactor again.

ALTER TABLE approved_action_recovery_controls RESET (fillfactor);
ALTER TABLE approved_action_executions RESET (fillfactor);
