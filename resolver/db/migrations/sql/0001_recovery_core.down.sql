-- Migration 0001_recovery_core (down): undoes 0001_recovery_core.up.sql, newest object first.

DROP TRIGGER IF EXISTS recovery_authorizations_immutable ON recovery_authorizations;

DROP TRIGGER IF EXISTS approved_action_recovery_resolutions_immutable ON approved_action_recovery_resolutions;

DROP TRIGGER IF EXISTS approved_action_dispatches_immutable ON approved_action_dispatches;

DROP FUNCTION IF EXISTS resolver_reject_mutation();

DROP FUNCTION IF EXISTS resolver_now_ms(bigint);

DROP TABLE recovery_authorizations;

DROP TABLE approved_action_recovery_resolutions;

DROP INDEX ix_recovery_controls_manual;

DROP INDEX ix_recovery_controls_due;

DROP TABLE approved_action_recovery_controls;

DROP TABLE approved_action_executions;

DROP TABLE approved_action_dispatches;
