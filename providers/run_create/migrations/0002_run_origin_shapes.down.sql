-- The checks as 0001 spelled them.

ALTER TABLE run_origin_facts
    DROP CONSTRAINT ck_run_origin_facts_action_digest_hex,
    DROP CONSTRAINT ck_run_origin_facts_result_code_shape,
    ADD CONSTRAINT ck_run_origin_facts_action_digest_hex CHECK (action_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT ck_run_origin_facts_result_code_shape CHECK (result_code IS NULL OR result_code ~ '^[a-z0-9_.-]{1,64}$');
