-- The run repository's origin fact per run, written in the transaction that creates the run;
-- its origin is immutable and its state settles once (definitions.sql). Release 0.1.0 of the
-- resolver created this table itself; on such a database this migration finds it and adopts
-- it as it is (IF NOT EXISTS), rows and all.

CREATE TABLE IF NOT EXISTS run_origin_facts (
    run_id TEXT NOT NULL,
    dispatch_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    project_id TEXT NOT NULL,
    action_digest TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,
    result_code TEXT,
    created_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    finished_at_ms BIGINT,
    CONSTRAINT pk_run_origin_facts PRIMARY KEY (run_id),
    CONSTRAINT ck_run_origin_facts_run_id_bounded CHECK (length(run_id) <= 128),
    CONSTRAINT ck_run_origin_facts_action_digest_hex CHECK (action_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_run_origin_facts_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT ck_run_origin_facts_state_known CHECK (state IN ('running','succeeded','failed')),
    CONSTRAINT ck_run_origin_facts_settled_iff_finished CHECK ((state = 'running') = (result_code IS NULL) AND (state = 'running') = (finished_at_ms IS NULL)),
    CONSTRAINT ck_run_origin_facts_result_code_shape CHECK (result_code IS NULL OR result_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT fk_run_origin_facts_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id),
    CONSTRAINT uq_run_origin_facts_dispatch_id UNIQUE (dispatch_id),
    CONSTRAINT uq_run_origin_facts_idempotency_key UNIQUE (idempotency_key)
);
