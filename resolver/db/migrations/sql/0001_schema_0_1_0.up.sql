-- The tables of release 0.1.0, as its migrations left them: dispatches, executions, recovery
-- controls and resolutions, the built-in providers' evidence, the manual-decision policy, two
-- people, the audit chain, late evidence and retention. A database that release migrated is
-- stamped with this revision already (under the id that release used, 0018_late_expire_index)
-- and never runs this file; an empty database starts here.
--
-- Tables only: the functions and triggers live in resolver/db/schema/functions/ and are applied
-- by `resolver migrate` around the migrations (resolver/db/README.md).

CREATE TABLE action_receipts (
    dispatch_id text NOT NULL,
    receipt jsonb NOT NULL,
    written_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    CONSTRAINT ck_action_receipts_receipt_bounded CHECK (octet_length(receipt::text) <= 16384),
    CONSTRAINT ck_action_receipts_receipt_is_object CHECK (jsonb_typeof(receipt) = 'object'),
    CONSTRAINT pk_action_receipts PRIMARY KEY (dispatch_id)
);

CREATE TABLE approved_action_dispatches (
    dispatch_id text NOT NULL,
    approval_request_id text NOT NULL,
    project_id text NOT NULL,
    action_type text NOT NULL,
    action_digest text NOT NULL,
    idempotency_key text NOT NULL,
    schema_version smallint NOT NULL,
    supersedes_dispatch_id text,
    created_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    CONSTRAINT ck_approved_action_dispatches_action_digest_hex CHECK (length(action_digest) = 64 AND action_digest !~ '[^0-9a-f]'),
    CONSTRAINT ck_approved_action_dispatches_bounded_ids CHECK (length(dispatch_id) <= 128 AND length(approval_request_id) <= 128 AND length(project_id) <= 128 AND length(idempotency_key) <= 128 AND length(action_type) <= 64),
    CONSTRAINT ck_approved_action_dispatches_no_self_supersede CHECK (supersedes_dispatch_id <> dispatch_id),
    CONSTRAINT ck_approved_action_dispatches_schema_version_positive CHECK (schema_version >= 1),
    CONSTRAINT pk_approved_action_dispatches PRIMARY KEY (dispatch_id),
    CONSTRAINT uq_approved_action_dispatches_idempotency_key UNIQUE (idempotency_key),
    CONSTRAINT fk_approved_action_dispatches_supersedes_dispatch_id FOREIGN KEY (supersedes_dispatch_id) REFERENCES approved_action_dispatches(dispatch_id)
);

CREATE TABLE approved_action_executions (
    dispatch_id text NOT NULL,
    state text NOT NULL,
    owner text NOT NULL,
    token uuid NOT NULL,
    version bigint NOT NULL,
    attempt integer NOT NULL,
    lease_expires_at_ms bigint NOT NULL,
    started_at_ms bigint,
    finished_at_ms bigint,
    result_code text,
    completion_mutation_id text,
    evidence_digest text,
    CONSTRAINT ck_approved_action_executions_counters_positive CHECK (version >= 1 AND attempt >= 1),
    CONSTRAINT ck_approved_action_executions_evidence_digest_hex CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT ck_approved_action_executions_finished_iff_terminal CHECK ((state IN ('succeeded','failed','blocked')) = (finished_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_executions_result_code_shape CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_executions_started_after_barrier CHECK (state = 'leased' OR started_at_ms IS NOT NULL),
    CONSTRAINT ck_approved_action_executions_state_known CHECK (state IN ('leased','executing','succeeded','failed','blocked')),
    CONSTRAINT pk_approved_action_executions PRIMARY KEY (dispatch_id),
    CONSTRAINT fk_approved_action_executions_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_dispatches(dispatch_id)
)
WITH (fillfactor='85');

CREATE TABLE approved_action_recovery_controls (
    dispatch_id text NOT NULL,
    status text NOT NULL,
    execution_version bigint NOT NULL,
    next_scan_at_ms bigint NOT NULL,
    recovery_owner text,
    recovery_token uuid,
    recovery_version bigint DEFAULT 0 NOT NULL,
    recovery_lease_expires_at_ms bigint,
    last_finding text,
    finding_count integer DEFAULT 0 NOT NULL,
    armed_at_ms bigint NOT NULL,
    manual_at_ms bigint,
    closed_by text,
    closed_at_ms bigint,
    completion_mutation_id text,
    finding_counts jsonb DEFAULT '{}'::jsonb NOT NULL,
    first_inspected_at_ms bigint,
    last_inspected_at_ms bigint,
    last_failure_class text,
    last_evidence_digest text,
    manual_reason text,
    CONSTRAINT ck_approved_action_recovery_controls_closed_by_known CHECK (closed_by IS NULL OR closed_by IN ('completion','automatic','manual')),
    CONSTRAINT ck_approved_action_recovery_controls_closed_iff_resolved CHECK ((status = 'resolved') = (closed_by IS NOT NULL AND closed_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_failure_class_known CHECK (last_failure_class IS NULL
               OR last_failure_class IN ('outage','timeout','configuration','error')),
    CONSTRAINT ck_approved_action_recovery_controls_finding_counts_object CHECK (jsonb_typeof(finding_counts) = 'object'),
    CONSTRAINT ck_approved_action_recovery_controls_finding_known CHECK (last_finding IS NULL OR last_finding IN ('verified_succeeded','verified_failed','still_running','missing','conflict','unsupported','unavailable')),
    CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex CHECK (last_evidence_digest IS NULL OR (length(last_evidence_digest) = 64 AND last_evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT ck_approved_action_recovery_controls_lease_only_when_armed CHECK (status = 'armed' OR recovery_token IS NULL),
    CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape CHECK (manual_reason IS NULL OR (length(manual_reason) BETWEEN 1 AND 64 AND manual_reason !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_recovery_controls_recovery_lease_whole CHECK ((recovery_token IS NULL) = (recovery_lease_expires_at_ms IS NULL) AND (recovery_token IS NULL) = (recovery_owner IS NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_status_known CHECK (status IN ('armed','manual','resolved')),
    CONSTRAINT pk_approved_action_recovery_controls PRIMARY KEY (dispatch_id),
    CONSTRAINT fk_approved_action_recovery_controls_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_executions(dispatch_id)
)
WITH (fillfactor='90');

CREATE TABLE approved_action_recovery_resolutions (
    resolution_id bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    dispatch_id text NOT NULL,
    mutation_id text NOT NULL,
    source text NOT NULL,
    outcome text NOT NULL,
    finding text,
    evidence_digest text,
    result_code text,
    expected_execution_version bigint NOT NULL,
    actor_user_id text,
    reason_code text,
    resolved_at_ms bigint NOT NULL,
    CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified CHECK (source <> 'automatic' OR (finding IN ('verified_succeeded','verified_failed') AND evidence_digest IS NOT NULL AND result_code IS NOT NULL AND actor_user_id IS NULL AND outcome <> 'blocked')),
    CONSTRAINT ck_approved_action_recovery_resolutions_evidence_digest_hex CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_manual_has_actor CHECK (source <> 'manual' OR (actor_user_id IS NOT NULL AND reason_code IS NOT NULL)),
    CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known CHECK (outcome IN ('succeeded','failed','blocked')),
    CONSTRAINT ck_approved_action_recovery_resolutions_reason_code_shape CHECK (reason_code IS NULL OR (length(reason_code) BETWEEN 1 AND 64 AND reason_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_result_code_shape CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_source_known CHECK (source IN ('automatic','manual')),
    CONSTRAINT pk_approved_action_recovery_resolutions PRIMARY KEY (resolution_id),
    CONSTRAINT uq_approved_action_recovery_resolutions_dispatch_id UNIQUE (dispatch_id),
    CONSTRAINT uq_approved_action_recovery_resolutions_mutation_id UNIQUE (mutation_id),
    CONSTRAINT fk_approved_action_recovery_resolutions_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_dispatches(dispatch_id)
);

CREATE TABLE package_commit_markers (
    dispatch_id text NOT NULL,
    content_digest text NOT NULL,
    committed_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    CONSTRAINT ck_package_commit_markers_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT pk_package_commit_markers PRIMARY KEY (dispatch_id),
    CONSTRAINT fk_package_commit_markers_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_dispatches(dispatch_id)
);

CREATE TABLE package_install_records (
    dispatch_id text NOT NULL,
    idempotency_key text NOT NULL,
    action_digest text NOT NULL,
    attempt integer NOT NULL,
    target_version text NOT NULL,
    content_digest text NOT NULL,
    outcome text NOT NULL,
    result_code text NOT NULL,
    recorded_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    CONSTRAINT ck_package_install_records_action_digest_hex CHECK (action_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_package_install_records_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT ck_package_install_records_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_package_install_records_outcome_known CHECK (outcome IN ('succeeded','failed')),
    CONSTRAINT ck_package_install_records_result_code_shape CHECK (result_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT ck_package_install_records_target_version_shape CHECK (target_version ~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$'),
    CONSTRAINT pk_package_install_records PRIMARY KEY (dispatch_id),
    CONSTRAINT uq_package_install_records_idempotency_key UNIQUE (idempotency_key),
    CONSTRAINT fk_package_install_records_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_dispatches(dispatch_id)
);

CREATE TABLE package_install_targets (
    dispatch_id text NOT NULL,
    installed_version text NOT NULL,
    content_digest text NOT NULL,
    observed_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    CONSTRAINT ck_package_install_targets_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_package_install_targets_installed_version_shape CHECK (installed_version ~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$'),
    CONSTRAINT pk_package_install_targets PRIMARY KEY (dispatch_id),
    CONSTRAINT fk_package_install_targets_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_dispatches(dispatch_id)
);

CREATE TABLE recovery_audit_chain (
    seq bigint NOT NULL,
    mutation_id text NOT NULL,
    dispatch_id text NOT NULL,
    content text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    recorded_at_ms bigint NOT NULL,
    CONSTRAINT ck_recovery_audit_chain_content_bounded CHECK (octet_length(content) <= 8192),
    CONSTRAINT ck_recovery_audit_chain_hashes_hex CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_audit_chain_seq_positive CHECK (seq >= 1),
    CONSTRAINT pk_recovery_audit_chain PRIMARY KEY (seq),
    CONSTRAINT uq_recovery_audit_chain_mutation_id UNIQUE (mutation_id)
);

CREATE TABLE recovery_audit_head (
    id smallint NOT NULL,
    seq bigint NOT NULL,
    hash text NOT NULL,
    prev_hash text NOT NULL,
    CONSTRAINT ck_recovery_audit_head_hashes_hex CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_audit_head_one_row CHECK (id = 1),
    CONSTRAINT pk_recovery_audit_head PRIMARY KEY (id)
);

CREATE TABLE recovery_authorizations (
    authorization_id bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    mutation_id text NOT NULL,
    user_id text NOT NULL,
    permission text NOT NULL,
    project_id text NOT NULL,
    project_version bigint NOT NULL,
    role_binding_version bigint NOT NULL,
    auth_time_ms bigint NOT NULL,
    amr text[] NOT NULL,
    authorized_at_ms bigint NOT NULL,
    CONSTRAINT ck_recovery_authorizations_permission_known CHECK (permission = 'approval.recover'),
    CONSTRAINT pk_recovery_authorizations PRIMARY KEY (authorization_id),
    CONSTRAINT uq_recovery_authorizations_mutation_id_user_id UNIQUE (mutation_id, user_id),
    CONSTRAINT fk_recovery_authorizations_mutation_id FOREIGN KEY (mutation_id) REFERENCES approved_action_recovery_resolutions(mutation_id)
);

CREATE TABLE recovery_late_evidence (
    observation_id text NOT NULL,
    dispatch_id text NOT NULL,
    decision_mutation_id text NOT NULL,
    finding text NOT NULL,
    agrees boolean NOT NULL,
    evidence_digest text NOT NULL,
    result_code text NOT NULL,
    observer text NOT NULL,
    observed_at_ms bigint NOT NULL,
    CONSTRAINT ck_recovery_late_evidence_digest_hex CHECK (evidence_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_late_evidence_finding_verified CHECK (finding IN ('verified_succeeded', 'verified_failed')),
    CONSTRAINT ck_recovery_late_evidence_observation_id_shape CHECK (observation_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
    CONSTRAINT ck_recovery_late_evidence_result_code_shape CHECK (result_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT pk_recovery_late_evidence PRIMARY KEY (observation_id),
    CONSTRAINT uq_recovery_late_evidence_dispatch_id UNIQUE (dispatch_id),
    CONSTRAINT fk_recovery_late_evidence_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_recovery_resolutions(dispatch_id) ON DELETE CASCADE
);

CREATE TABLE recovery_late_watches (
    dispatch_id text NOT NULL,
    decision_mutation_id text NOT NULL,
    decided_outcome text NOT NULL,
    decided_at_ms bigint NOT NULL,
    next_scan_at_ms bigint NOT NULL,
    watch_owner text,
    watch_token uuid,
    observations bigint DEFAULT 0 NOT NULL,
    last_observed_at_ms bigint,
    closed_at_ms bigint,
    closed_reason text,
    CONSTRAINT ck_recovery_late_watches_closed_reason_known CHECK ((closed_at_ms IS NULL AND closed_reason IS NULL)
               OR (closed_at_ms IS NOT NULL
                   AND closed_reason IN ('observed', 'window_elapsed', 'unsupported'))),
    CONSTRAINT ck_recovery_late_watches_outcome_claimed CHECK (decided_outcome IN ('succeeded', 'failed')),
    CONSTRAINT pk_recovery_late_watches PRIMARY KEY (dispatch_id),
    CONSTRAINT fk_recovery_late_watches_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_recovery_resolutions(dispatch_id) ON DELETE CASCADE
);

CREATE TABLE recovery_projects (
    project_id text NOT NULL,
    version bigint NOT NULL,
    CONSTRAINT ck_recovery_projects_version_positive CHECK (version >= 1),
    CONSTRAINT pk_recovery_projects PRIMARY KEY (project_id)
);

CREATE TABLE recovery_proposals (
    proposal_id bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    dispatch_id text NOT NULL,
    mutation_id text NOT NULL,
    outcome text NOT NULL,
    expected_execution_version bigint NOT NULL,
    reason_code text NOT NULL,
    evidence_digest text,
    proposed_by text NOT NULL,
    project_id text NOT NULL,
    project_version bigint NOT NULL,
    role_binding_version bigint NOT NULL,
    auth_time_ms bigint NOT NULL,
    amr text[] NOT NULL,
    proposed_at_ms bigint NOT NULL,
    expires_at_ms bigint NOT NULL,
    closed_as text,
    closed_at_ms bigint,
    closed_by text,
    closed_mutation_id text,
    close_reason_code text,
    closed_auth_time_ms bigint,
    closed_amr text[],
    CONSTRAINT ck_recovery_proposals_close_reason_code_shape CHECK (close_reason_code IS NULL OR close_reason_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT ck_recovery_proposals_closed_as_known CHECK (closed_as IN ('confirmed', 'withdrawn', 'rejected', 'voided', 'expired')),
    CONSTRAINT ck_recovery_proposals_closed_at_with_closed_as CHECK ((closed_as IS NULL) = (closed_at_ms IS NULL)),
    CONSTRAINT ck_recovery_proposals_closed_by_person CHECK (closed_as NOT IN ('confirmed', 'withdrawn', 'rejected')
               OR (closed_by IS NOT NULL AND closed_mutation_id IS NOT NULL
                   AND close_reason_code IS NOT NULL)),
    CONSTRAINT ck_recovery_proposals_evidence_digest_hex CHECK (evidence_digest IS NULL OR evidence_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_proposals_expires_after_proposed CHECK (expires_at_ms > proposed_at_ms),
    CONSTRAINT ck_recovery_proposals_outcome_known CHECK (outcome IN ('succeeded', 'failed', 'blocked')),
    CONSTRAINT ck_recovery_proposals_reason_code_shape CHECK (reason_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT ck_recovery_proposals_second_person CHECK ((closed_as <> 'withdrawn' OR closed_by = proposed_by)
               AND (closed_as NOT IN ('confirmed', 'rejected') OR closed_by <> proposed_by)),
    CONSTRAINT pk_recovery_proposals PRIMARY KEY (proposal_id),
    CONSTRAINT uq_recovery_proposals_closed_mutation_id UNIQUE (closed_mutation_id),
    CONSTRAINT uq_recovery_proposals_mutation_id UNIQUE (mutation_id),
    CONSTRAINT fk_recovery_proposals_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_dispatches(dispatch_id) ON DELETE CASCADE
);

CREATE TABLE recovery_prune_runs (
    run_id bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    started_at_ms bigint NOT NULL,
    finished_at_ms bigint,
    last_batch_at_ms bigint,
    cutoff_ms bigint NOT NULL,
    include_audit boolean NOT NULL,
    export_digest text,
    batches bigint DEFAULT 0 NOT NULL,
    dispatches_pruned bigint DEFAULT 0 NOT NULL,
    audit_pruned bigint DEFAULT 0 NOT NULL,
    evidence_pruned bigint DEFAULT 0 NOT NULL,
    db_user text NOT NULL,
    actor text,
    CONSTRAINT ck_recovery_prune_runs_actor_bounded CHECK (length(actor) <= 128),
    CONSTRAINT ck_recovery_prune_runs_audit_needs_export CHECK (NOT include_audit OR export_digest IS NOT NULL),
    CONSTRAINT ck_recovery_prune_runs_export_digest_hex CHECK (export_digest IS NULL OR export_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT pk_recovery_prune_runs PRIMARY KEY (run_id)
);

CREATE TABLE recovery_role_bindings (
    project_id text NOT NULL,
    user_id text NOT NULL,
    permission text NOT NULL,
    version bigint NOT NULL,
    CONSTRAINT ck_recovery_role_bindings_version_positive CHECK (version >= 1),
    CONSTRAINT pk_recovery_role_bindings PRIMARY KEY (project_id, user_id, permission),
    CONSTRAINT fk_recovery_role_bindings_project_id FOREIGN KEY (project_id) REFERENCES recovery_projects(project_id)
);

CREATE TABLE recovery_two_person_rules (
    action_type_pattern text NOT NULL,
    decision text NOT NULL,
    CONSTRAINT ck_recovery_two_person_rules_decision_known CHECK (decision IN ('confirm_succeeded', 'confirm_failed', 'abandon_unknown')),
    CONSTRAINT ck_recovery_two_person_rules_pattern_shape CHECK (action_type_pattern ~ '^([a-z][a-z0-9_.-]{0,63}[*]?|[*])$'),
    CONSTRAINT pk_recovery_two_person_rules PRIMARY KEY (action_type_pattern, decision)
);

CREATE TABLE run_origin_facts (
    run_id text NOT NULL,
    dispatch_id text NOT NULL,
    idempotency_key text NOT NULL,
    project_id text NOT NULL,
    action_digest text NOT NULL,
    attempt integer NOT NULL,
    state text NOT NULL,
    result_code text,
    created_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    finished_at_ms bigint,
    CONSTRAINT ck_run_origin_facts_action_digest_hex CHECK (action_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_run_origin_facts_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT ck_run_origin_facts_result_code_shape CHECK (result_code IS NULL OR result_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT ck_run_origin_facts_run_id_bounded CHECK (length(run_id) <= 128),
    CONSTRAINT ck_run_origin_facts_settled_iff_finished CHECK ((state = 'running') = (result_code IS NULL) AND (state = 'running') = (finished_at_ms IS NULL)),
    CONSTRAINT ck_run_origin_facts_state_known CHECK (state IN ('running','succeeded','failed')),
    CONSTRAINT pk_run_origin_facts PRIMARY KEY (run_id),
    CONSTRAINT uq_run_origin_facts_dispatch_id UNIQUE (dispatch_id),
    CONSTRAINT uq_run_origin_facts_idempotency_key UNIQUE (idempotency_key),
    CONSTRAINT fk_run_origin_facts_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_dispatches(dispatch_id)
);

ALTER TABLE action_receipts ADD CONSTRAINT fk_action_receipts_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES approved_action_dispatches(dispatch_id);

CREATE INDEX ix_approved_action_dispatches_approval_request_id ON approved_action_dispatches USING btree (approval_request_id);

CREATE INDEX ix_approved_action_dispatches_supersedes_dispatch_id ON approved_action_dispatches USING btree (supersedes_dispatch_id) WHERE (supersedes_dispatch_id IS NOT NULL);

CREATE INDEX ix_recovery_controls_due ON approved_action_recovery_controls USING btree (next_scan_at_ms, dispatch_id) WHERE (status = 'armed'::text);

CREATE INDEX ix_recovery_controls_manual ON approved_action_recovery_controls USING btree (manual_at_ms, dispatch_id) WHERE (status = 'manual'::text);

CREATE INDEX ix_recovery_controls_settled ON approved_action_recovery_controls USING btree (closed_at_ms, dispatch_id) WHERE (status = 'resolved'::text);

CREATE INDEX ix_recovery_controls_waiting ON approved_action_recovery_controls USING btree (first_inspected_at_ms, dispatch_id) WHERE ((status = 'armed'::text) AND (first_inspected_at_ms IS NOT NULL));

CREATE INDEX ix_recovery_late_watches_open ON recovery_late_watches USING btree (next_scan_at_ms, dispatch_id) WHERE (closed_at_ms IS NULL);

CREATE INDEX ix_recovery_late_watches_open_decided ON recovery_late_watches USING btree (decided_at_ms, dispatch_id) WHERE (closed_at_ms IS NULL);

CREATE INDEX ix_recovery_proposals_dispatch_id ON recovery_proposals USING btree (dispatch_id);

CREATE UNIQUE INDEX ix_recovery_proposals_open ON recovery_proposals USING btree (dispatch_id) WHERE (closed_as IS NULL);

CREATE INDEX ix_recovery_resolutions_manual ON approved_action_recovery_resolutions USING btree (resolved_at_ms, resolution_id) WHERE (source = 'manual'::text);

-- The audit chain starts from a head of zeros.
INSERT INTO recovery_audit_head (id, seq, hash, prev_hash)
VALUES (1, 0, repeat('0', 64), repeat('0', 64));
