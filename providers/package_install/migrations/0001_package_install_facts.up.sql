-- The installer's three facts, insert-only (definitions.sql), keyed by dispatch: the install
-- record, the verified target and the atomic commit marker. Release 0.1.0 of the resolver
-- created these tables itself; on such a database this migration finds them and adopts them
-- as they are (IF NOT EXISTS), rows and all.

CREATE TABLE IF NOT EXISTS package_install_records (
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

CREATE TABLE IF NOT EXISTS package_install_targets (
    dispatch_id TEXT NOT NULL,
    installed_version TEXT NOT NULL,
    content_digest TEXT NOT NULL,
    observed_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    CONSTRAINT pk_package_install_targets PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_package_install_targets_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_package_install_targets_installed_version_shape CHECK (installed_version ~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$'),
    CONSTRAINT fk_package_install_targets_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id)
);

CREATE TABLE IF NOT EXISTS package_commit_markers (
    dispatch_id TEXT NOT NULL,
    content_digest TEXT NOT NULL,
    committed_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    CONSTRAINT pk_package_commit_markers PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_package_commit_markers_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT fk_package_commit_markers_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id)
);
