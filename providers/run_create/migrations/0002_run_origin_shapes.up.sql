-- The action digest and the result code are checked as a length and character classes, the
-- same strings passing as before: a bounded repetition (`{64}`, `{1,64}`) is unrolled by
-- PostgreSQL's regular-expression engine, about 20 µs a value against 1 to 2, paid by the run
-- repository's every create and settle. The checks stay the table's own (no function of the
-- resolver's schema), so this provider's table depends on nothing of it but the dispatches.

ALTER TABLE run_origin_facts
    DROP CONSTRAINT ck_run_origin_facts_action_digest_hex,
    DROP CONSTRAINT ck_run_origin_facts_result_code_shape,
    ADD CONSTRAINT ck_run_origin_facts_action_digest_hex
        CHECK (length(action_digest) = 64 AND action_digest !~ '[^0-9a-f]'),
    ADD CONSTRAINT ck_run_origin_facts_result_code_shape
        CHECK (result_code IS NULL
               OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]'));
