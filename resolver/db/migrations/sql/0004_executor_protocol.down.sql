-- Migration 0004_executor_protocol (down): undoes 0004_executor_protocol.up.sql, newest object first.

DROP TRIGGER IF EXISTS approved_action_recovery_controls_in_step ON approved_action_recovery_controls;

DROP TRIGGER IF EXISTS approved_action_recovery_controls_armed_in_step ON approved_action_recovery_controls;

DROP TRIGGER IF EXISTS approved_action_executions_settled_closed ON approved_action_executions;

DROP TRIGGER IF EXISTS approved_action_executions_control_in_step ON approved_action_executions;

DROP TRIGGER IF EXISTS approved_action_recovery_controls_state_machine ON approved_action_recovery_controls;

DROP TRIGGER IF EXISTS approved_action_executions_state_machine ON approved_action_executions;

DROP FUNCTION IF EXISTS resolver_check_settled_closed();

DROP FUNCTION IF EXISTS resolver_check_control_in_step();

DROP FUNCTION IF EXISTS resolver_guard_control();

DROP FUNCTION IF EXISTS resolver_guard_execution();

DROP FUNCTION IF EXISTS resolver_receipt_write(text, text, uuid, bigint, jsonb);

DROP FUNCTION IF EXISTS resolver_receipt_identity(text, text, uuid, bigint, bigint);

DROP FUNCTION IF EXISTS resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint);

DROP FUNCTION IF EXISTS resolver_execution_renew(text, text, uuid, bigint, bigint, bigint);

DROP FUNCTION IF EXISTS resolver_execution_start(text, text, uuid, bigint, bigint, bigint);

DROP FUNCTION IF EXISTS resolver_execution_lease(text, text, bigint, bigint);

DROP FUNCTION IF EXISTS resolver_dispatch_create(text, text, text, text, text, text, integer, text);

DROP FUNCTION IF EXISTS resolver_protocol_refuse(text, text, text, uuid, bigint, bigint);

DROP FUNCTION IF EXISTS resolver_protocol_check_lease(text, bigint);

DROP FUNCTION IF EXISTS resolver_protocol_now_ms(bigint);
