-- The built-in providers' evidence (internal receipts, run origin facts, package install
-- facts), insert-only.
-- Today's definition, to read and to compare with: `resolver migrate` builds the tables with
-- the migrations (resolver/db/migrations/sql/), and the catalog-diff test
-- (tests/integration/schema/test_schema_files.py) proves a migrated database equals one built
-- from these files. A table change edits this file AND the release's migration
-- (resolver/db/README.md).

CREATE TABLE action_receipts (
    dispatch_id TEXT NOT NULL,
    receipt JSONB NOT NULL,
    written_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    CONSTRAINT pk_action_receipts PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_action_receipts_receipt_is_object CHECK (jsonb_typeof(receipt) = 'object'),
    CONSTRAINT ck_action_receipts_receipt_bounded CHECK (octet_length(receipt::text) <= 16384),
    CONSTRAINT fk_action_receipts_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id)
);

CREATE TABLE run_origin_facts (
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

CREATE TABLE package_install_records (
    dispatch_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    action_digest TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    target_version TEXT NOT NULL,
    content_digest TEXT NOT NULL,
    outcome TEXT NOT NULL,
    result_code TEXT NOT NULL,
    recorded_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    CONSTRAINT pk_package_install_records PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_package_install_records_action_digest_hex CHECK (action_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_package_install_records_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_package_install_records_target_version_shape CHECK (target_version ~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$'),
    CONSTRAINT ck_package_install_records_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT ck_package_install_records_outcome_known CHECK (outcome IN ('succeeded','failed')),
    CONSTRAINT ck_package_install_records_result_code_shape CHECK (result_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT fk_package_install_records_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id),
    CONSTRAINT uq_package_install_records_idempotency_key UNIQUE (idempotency_key)
);

CREATE TABLE package_install_targets (
    dispatch_id TEXT NOT NULL,
    installed_version TEXT NOT NULL,
    content_digest TEXT NOT NULL,
    observed_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    CONSTRAINT pk_package_install_targets PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_package_install_targets_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_package_install_targets_installed_version_shape CHECK (installed_version ~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$'),
    CONSTRAINT fk_package_install_targets_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id)
);

CREATE TABLE package_commit_markers (
    dispatch_id TEXT NOT NULL,
    content_digest TEXT NOT NULL,
    committed_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    CONSTRAINT pk_package_commit_markers PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_package_commit_markers_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT fk_package_commit_markers_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id)
);
