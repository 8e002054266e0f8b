-- Migration 0017_check_char_classes (up): the same CHECK constraints on the four core tables, spelled
-- so PostgreSQL evaluates them in a fraction of the time. A bounded repetition in a regular
-- expression ('^[0-9a-f]{64}$', '^[a-z0-9_.-]{1,64}$') made each evaluation cost 5 to 20 us
-- (the engine unrolls the count); a page commit evaluates five per resolution, a fifth of
-- the server's CPU. Each now reads: the length in characters, and no character outside the
-- class ('[^...]', one state). Exactly the strings the old patterns accepted are accepted
-- (tests/integration/schema/test_check_spelling.py). Same names; each table is scanned once
-- to validate (ACCESS EXCLUSIVE for that scan, as for any ADD CONSTRAINT CHECK).
-- Applied as it is by versions/0017_check_char_classes.py; never edited once released (the current
-- definitions live in resolver/db/schema/).

ALTER TABLE approved_action_dispatches
    DROP CONSTRAINT ck_approved_action_dispatches_action_digest_hex,
    ADD CONSTRAINT ck_approved_action_dispatches_action_digest_hex CHECK (length(action_digest) = 64 AND action_digest !~ '[^0-9a-f]');

ALTER TABLE approved_action_executions
    DROP CONSTRAINT ck_approved_action_executions_evidence_digest_hex,
    DROP CONSTRAINT ck_approved_action_executions_result_code_shape,
    ADD CONSTRAINT ck_approved_action_executions_evidence_digest_hex CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    ADD CONSTRAINT ck_approved_action_executions_result_code_shape CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]'));

ALTER TABLE approved_action_recovery_controls
    DROP CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex,
    DROP CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape,
    ADD CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex CHECK (last_evidence_digest IS NULL OR (length(last_evidence_digest) = 64 AND last_evidence_digest !~ '[^0-9a-f]')),
    ADD CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape CHECK (manual_reason IS NULL OR (length(manual_reason) BETWEEN 1 AND 64 AND manual_reason !~ '[^a-z0-9_.-]'));

ALTER TABLE approved_action_recovery_resolutions
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_evidence_digest_hex,
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_result_code_shape,
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_reason_code_shape,
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_evidence_digest_hex CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_result_code_shape CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_reason_code_shape CHECK (reason_code IS NULL OR (length(reason_code) BETWEEN 1 AND 64 AND reason_code !~ '[^a-z0-9_.-]'));
