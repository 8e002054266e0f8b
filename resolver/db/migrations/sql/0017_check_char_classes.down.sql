-- Migration 0017_check_char_classes (down): the constraints as the regular expressions with bounded
-- repetitions 0001 wrote (the same strings accepted, slower to evaluate).

ALTER TABLE approved_action_dispatches
    DROP CONSTRAINT ck_approved_action_dispatches_action_digest_hex,
    ADD CONSTRAINT ck_approved_action_dispatches_action_digest_hex CHECK (action_digest ~ '^[0-9a-f]{64}$');

ALTER TABLE approved_action_executions
    DROP CONSTRAINT ck_approved_action_executions_evidence_digest_hex,
    DROP CONSTRAINT ck_approved_action_executions_result_code_shape,
    ADD CONSTRAINT ck_approved_action_executions_evidence_digest_hex CHECK (evidence_digest IS NULL OR evidence_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT ck_approved_action_executions_result_code_shape CHECK (result_code IS NULL OR result_code ~ '^[a-z0-9_.-]{1,64}$');

ALTER TABLE approved_action_recovery_controls
    DROP CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex,
    DROP CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape,
    ADD CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex CHECK (last_evidence_digest IS NULL OR last_evidence_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape CHECK (manual_reason IS NULL OR manual_reason ~ '^[a-z0-9_.-]{1,64}$');

ALTER TABLE approved_action_recovery_resolutions
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_evidence_digest_hex,
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_result_code_shape,
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_reason_code_shape,
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_evidence_digest_hex CHECK (evidence_digest IS NULL OR evidence_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_result_code_shape CHECK (result_code IS NULL OR result_code ~ '^[a-z0-9_.-]{1,64}$'),
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_reason_code_shape CHECK (reason_code IS NULL OR reason_code ~ '^[a-z0-9_.-]{1,64}$');
