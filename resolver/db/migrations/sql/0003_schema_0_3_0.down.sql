-- Back to the tables of release 0.2.0: the feed's listener registrations go (a 0.2.0 commit
-- notifies whether anyone listens or not).

DROP TABLE recovery_outcome_listeners;

-- The value checks go back from domains to the tables' constraints of release 0.2.0.
ALTER TABLE approved_action_dispatches
    ALTER COLUMN action_digest TYPE text,
    ADD CONSTRAINT ck_approved_action_dispatches_action_digest_hex
        CHECK (length(action_digest) = 64 AND action_digest !~ '[^0-9a-f]');

ALTER TABLE approved_action_executions
    ALTER COLUMN state TYPE text,
    ALTER COLUMN result_code TYPE text,
    ALTER COLUMN evidence_digest TYPE text,
    ADD CONSTRAINT ck_approved_action_executions_state_known
        CHECK (state IN ('leased','executing') OR state = ANY (resolver_terminal_states())),
    ADD CONSTRAINT ck_approved_action_executions_result_code_shape
        CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    ADD CONSTRAINT ck_approved_action_executions_evidence_digest_hex
        CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]'));

ALTER TABLE approved_action_recovery_controls
    ALTER COLUMN status TYPE text,
    ALTER COLUMN last_finding TYPE text,
    ALTER COLUMN closed_by TYPE text,
    ALTER COLUMN finding_counts TYPE jsonb,
    ALTER COLUMN last_failure_class TYPE text,
    ALTER COLUMN last_evidence_digest TYPE text,
    ALTER COLUMN manual_reason TYPE text,
    ALTER COLUMN last_reason TYPE text,
    ALTER COLUMN reason_counts TYPE jsonb,
    ADD CONSTRAINT ck_approved_action_recovery_controls_closed_by_known
        CHECK (closed_by IS NULL OR closed_by IN ('completion','automatic','manual')),
    ADD CONSTRAINT ck_approved_action_recovery_controls_failure_class_known
        CHECK (last_failure_class IS NULL OR last_failure_class IN ('outage','timeout','configuration','error')),
    ADD CONSTRAINT ck_approved_action_recovery_controls_finding_counts_object
        CHECK (jsonb_typeof(finding_counts) = 'object'),
    ADD CONSTRAINT ck_approved_action_recovery_controls_finding_known
        CHECK (last_finding IS NULL OR last_finding = ANY (resolver_finding_kinds())),
    ADD CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex
        CHECK (last_evidence_digest IS NULL OR (length(last_evidence_digest) = 64 AND last_evidence_digest !~ '[^0-9a-f]')),
    ADD CONSTRAINT ck_approved_action_recovery_controls_last_reason_shape
        CHECK (last_reason IS NULL OR (length(last_reason) BETWEEN 1 AND 32 AND last_reason !~ '[^a-z0-9_]')),
    ADD CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape
        CHECK (manual_reason IS NULL OR (length(manual_reason) BETWEEN 1 AND 64 AND manual_reason !~ '[^a-z0-9_.-]')),
    ADD CONSTRAINT ck_approved_action_recovery_controls_reason_counts_object
        CHECK (jsonb_typeof(reason_counts) = 'object'),
    ADD CONSTRAINT ck_approved_action_recovery_controls_status_known
        CHECK (status IN ('armed','manual','resolved'));

ALTER TABLE approved_action_recovery_resolutions
    ALTER COLUMN source TYPE text,
    ALTER COLUMN outcome TYPE text,
    ALTER COLUMN evidence_digest TYPE text,
    ALTER COLUMN result_code TYPE text,
    ALTER COLUMN reason_code TYPE text,
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_evidence_digest_hex
        CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known
        CHECK (outcome = ANY (resolver_terminal_states())),
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_reason_code_shape
        CHECK (reason_code IS NULL OR (length(reason_code) BETWEEN 1 AND 64 AND reason_code !~ '[^a-z0-9_.-]')),
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_result_code_shape
        CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_source_known
        CHECK (source IN ('automatic','manual'));

ALTER TABLE recovery_authorizations
    ALTER COLUMN signature TYPE text,
    ALTER COLUMN signing_kid TYPE text,
    ADD CONSTRAINT ck_recovery_authorizations_signature_hex
        CHECK (signature IS NULL OR signature ~ '^[0-9a-f]{128}$'),
    ADD CONSTRAINT ck_recovery_authorizations_signing_kid_shape
        CHECK (signing_kid IS NULL OR signing_kid ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$');

ALTER TABLE recovery_audit_chain
    ALTER COLUMN prev_hash TYPE text,
    ALTER COLUMN hash TYPE text,
    ADD CONSTRAINT ck_recovery_audit_chain_hashes_hex
        CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$');

ALTER TABLE recovery_audit_head
    ALTER COLUMN hash TYPE text,
    ALTER COLUMN prev_hash TYPE text,
    ADD CONSTRAINT ck_recovery_audit_head_hashes_hex
        CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$');

ALTER TABLE recovery_proposals
    ALTER COLUMN reason_code TYPE text,
    ALTER COLUMN evidence_digest TYPE text,
    ALTER COLUMN close_reason_code TYPE text,
    ALTER COLUMN signature TYPE text,
    ALTER COLUMN closed_signature TYPE text,
    ADD CONSTRAINT ck_recovery_proposals_reason_code_shape
        CHECK (reason_code ~ '^[a-z0-9_.-]{1,64}$'),
    ADD CONSTRAINT ck_recovery_proposals_evidence_digest_hex
        CHECK (evidence_digest IS NULL OR evidence_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT ck_recovery_proposals_close_reason_code_shape
        CHECK (close_reason_code IS NULL OR close_reason_code ~ '^[a-z0-9_.-]{1,64}$'),
    ADD CONSTRAINT ck_recovery_proposals_signature_hex
        CHECK (signature IS NULL OR signature ~ '^[0-9a-f]{128}$'),
    ADD CONSTRAINT ck_recovery_proposals_closed_signature_hex
        CHECK (closed_signature IS NULL OR closed_signature ~ '^[0-9a-f]{128}$');

ALTER TABLE recovery_late_evidence
    ALTER COLUMN evidence_digest TYPE text,
    ALTER COLUMN result_code TYPE text,
    ALTER COLUMN observation_id TYPE text,
    ADD CONSTRAINT ck_recovery_late_evidence_digest_hex
        CHECK (evidence_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT ck_recovery_late_evidence_result_code_shape
        CHECK (result_code ~ '^[a-z0-9_.-]{1,64}$'),
    ADD CONSTRAINT ck_recovery_late_evidence_observation_id_shape
        CHECK (observation_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$');

ALTER TABLE recovery_prune_runs
    ALTER COLUMN export_digest TYPE text,
    ADD CONSTRAINT ck_recovery_prune_runs_export_digest_hex
        CHECK (export_digest IS NULL OR export_digest ~ '^[0-9a-f]{64}$');

ALTER TABLE recovery_pruned_dispatches
    ALTER COLUMN idempotency_key_sha256 TYPE text,
    ADD CONSTRAINT ck_recovery_pruned_dispatches_key_sha256_hex
        CHECK (idempotency_key_sha256 ~ '^[0-9a-f]{64}$');

ALTER TABLE resolver_provider_migrations
    ALTER COLUMN checksum TYPE text,
    ADD CONSTRAINT ck_resolver_provider_migrations_checksum_hex
        CHECK (checksum ~ '^[0-9a-f]{64}$');

ALTER TABLE recovery_outcomes
    ALTER COLUMN kind TYPE text,
    ALTER COLUMN settled_by TYPE text,
    ADD CONSTRAINT ck_recovery_outcomes_kind_known
        CHECK (kind IN ('settled', 'contradicted', 'superseded')),
    ADD CONSTRAINT ck_recovery_outcomes_settled_by_known
        CHECK (settled_by IS NULL OR settled_by IN ('executor', 'resolver', 'person'));

ALTER TABLE recovery_outcome_consumers
    ALTER COLUMN consumer TYPE text,
    ADD CONSTRAINT ck_recovery_outcome_consumers_consumer_shape
        CHECK (consumer ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$');

ALTER TABLE recovery_outcome_reader_scopes
    ALTER COLUMN project_id TYPE text,
    ADD CONSTRAINT ck_recovery_outcome_reader_scopes_project_id_shape
        CHECK (project_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$');

DROP DOMAIN resolver_sha256_hex, resolver_signature_hex, resolver_code, resolver_scan_reason, resolver_execution_state,
    resolver_terminal_state, resolver_control_status, resolver_finding, resolver_closed_by,
    resolver_failure_class, resolver_resolution_source, resolver_json_object,
    resolver_signing_kid, resolver_id, resolver_outcome_kind, resolver_settled_by;
