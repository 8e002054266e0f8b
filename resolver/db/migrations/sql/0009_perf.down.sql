-- Migration 0009_perf (down): undoes 0009_perf.up.sql: PostgreSQL's default fillfactor again.

ALTER TABLE approved_action_recovery_controls RESET (fillfactor);
ALTER TABLE approved_action_executions RESET (fillfactor);
