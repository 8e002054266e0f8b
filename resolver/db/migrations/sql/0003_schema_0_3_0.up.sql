-- From the tables of release 0.2.0 to those of release 0.3.0, in one step. Tables, columns,
-- constraints, indexes and privileges only: `resolver migrate` has already replaced the
-- functions and adds the triggers after this file (resolver/db/README.md).

-- The sessions that LISTEN on the outcome feed's channel, each until its registration lapses:
-- a settling commit notifies only while one is registered (resolver_outcomes_notify).
CREATE TABLE recovery_outcome_listeners (
    pid integer NOT NULL,
    listening_until_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_outcome_listeners PRIMARY KEY (pid)
);

-- The value checks of the dispatches, executions, controls and resolutions become domains,
-- and so do the digest, code, signature and identifier checks of the decisions' tables, the
-- late evidence, the prune's records, the providers' migrations and the outcome feed
-- (resolver/db/schema/tables/01_recovery_core.sql says why). Each domain is created without its
-- check, the columns change to it (binary-compatible: no table rewrite; only the partial indexes
-- whose condition names such a column are built again), and then the check is added, which
-- reads every row once and rewrites none. Every row already passes: the checks are the table
-- constraints they replace.
CREATE DOMAIN resolver_sha256_hex AS text;
CREATE DOMAIN resolver_signature_hex AS text;
CREATE DOMAIN resolver_code AS text;
CREATE DOMAIN resolver_scan_reason AS text;
CREATE DOMAIN resolver_execution_state AS text;
CREATE DOMAIN resolver_terminal_state AS text;
CREATE DOMAIN resolver_control_status AS text;
CREATE DOMAIN resolver_finding AS text;
CREATE DOMAIN resolver_closed_by AS text;
CREATE DOMAIN resolver_failure_class AS text;
CREATE DOMAIN resolver_resolution_source AS text;
CREATE DOMAIN resolver_json_object AS jsonb;
CREATE DOMAIN resolver_signing_kid AS text;
CREATE DOMAIN resolver_id AS text;
CREATE DOMAIN resolver_outcome_kind AS text;
CREATE DOMAIN resolver_settled_by AS text;

ALTER TABLE approved_action_dispatches
    DROP CONSTRAINT ck_approved_action_dispatches_action_digest_hex,
    ALTER COLUMN action_digest TYPE resolver_sha256_hex;

ALTER TABLE approved_action_executions
    DROP CONSTRAINT ck_approved_action_executions_state_known,
    DROP CONSTRAINT ck_approved_action_executions_result_code_shape,
    DROP CONSTRAINT ck_approved_action_executions_evidence_digest_hex,
    ALTER COLUMN state TYPE resolver_execution_state,
    ALTER COLUMN result_code TYPE resolver_code,
    ALTER COLUMN evidence_digest TYPE resolver_sha256_hex;

ALTER TABLE approved_action_recovery_controls
    DROP CONSTRAINT ck_approved_action_recovery_controls_status_known,
    DROP CONSTRAINT ck_approved_action_recovery_controls_finding_known,
    DROP CONSTRAINT ck_approved_action_recovery_controls_closed_by_known,
    DROP CONSTRAINT ck_approved_action_recovery_controls_finding_counts_object,
    DROP CONSTRAINT ck_approved_action_recovery_controls_failure_class_known,
    DROP CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex,
    DROP CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape,
    DROP CONSTRAINT ck_approved_action_recovery_controls_last_reason_shape,
    DROP CONSTRAINT ck_approved_action_recovery_controls_reason_counts_object,
    ALTER COLUMN status TYPE resolver_control_status,
    ALTER COLUMN last_finding TYPE resolver_finding,
    ALTER COLUMN closed_by TYPE resolver_closed_by,
    ALTER COLUMN finding_counts TYPE resolver_json_object,
    ALTER COLUMN last_failure_class TYPE resolver_failure_class,
    ALTER COLUMN last_evidence_digest TYPE resolver_sha256_hex,
    ALTER COLUMN manual_reason TYPE resolver_code,
    ALTER COLUMN last_reason TYPE resolver_scan_reason,
    ALTER COLUMN reason_counts TYPE resolver_json_object;

ALTER TABLE approved_action_recovery_resolutions
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_source_known,
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known,
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_evidence_digest_hex,
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_result_code_shape,
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_reason_code_shape,
    ALTER COLUMN source TYPE resolver_resolution_source,
    ALTER COLUMN outcome TYPE resolver_terminal_state,
    ALTER COLUMN evidence_digest TYPE resolver_sha256_hex,
    ALTER COLUMN result_code TYPE resolver_code,
    ALTER COLUMN reason_code TYPE resolver_code;

-- The same shapes where the decisions, the late evidence, the prune and the providers'
-- migrations record them (a digest, a code, a signature).
ALTER TABLE recovery_authorizations
    DROP CONSTRAINT ck_recovery_authorizations_signature_hex,
    DROP CONSTRAINT ck_recovery_authorizations_signing_kid_shape,
    ALTER COLUMN signature TYPE resolver_signature_hex,
    ALTER COLUMN signing_kid TYPE resolver_signing_kid;

ALTER TABLE recovery_audit_chain
    DROP CONSTRAINT ck_recovery_audit_chain_hashes_hex,
    ALTER COLUMN prev_hash TYPE resolver_sha256_hex,
    ALTER COLUMN hash TYPE resolver_sha256_hex;

ALTER TABLE recovery_audit_head
    DROP CONSTRAINT ck_recovery_audit_head_hashes_hex,
    ALTER COLUMN hash TYPE resolver_sha256_hex,
    ALTER COLUMN prev_hash TYPE resolver_sha256_hex;

ALTER TABLE recovery_proposals
    DROP CONSTRAINT ck_recovery_proposals_reason_code_shape,
    DROP CONSTRAINT ck_recovery_proposals_evidence_digest_hex,
    DROP CONSTRAINT ck_recovery_proposals_close_reason_code_shape,
    DROP CONSTRAINT ck_recovery_proposals_signature_hex,
    DROP CONSTRAINT ck_recovery_proposals_closed_signature_hex,
    ALTER COLUMN reason_code TYPE resolver_code,
    ALTER COLUMN evidence_digest TYPE resolver_sha256_hex,
    ALTER COLUMN close_reason_code TYPE resolver_code,
    ALTER COLUMN signature TYPE resolver_signature_hex,
    ALTER COLUMN closed_signature TYPE resolver_signature_hex;

ALTER TABLE recovery_late_evidence
    DROP CONSTRAINT ck_recovery_late_evidence_digest_hex,
    DROP CONSTRAINT ck_recovery_late_evidence_result_code_shape,
    DROP CONSTRAINT ck_recovery_late_evidence_observation_id_shape,
    ALTER COLUMN evidence_digest TYPE resolver_sha256_hex,
    ALTER COLUMN result_code TYPE resolver_code,
    ALTER COLUMN observation_id TYPE resolver_id;

ALTER TABLE recovery_prune_runs
    DROP CONSTRAINT ck_recovery_prune_runs_export_digest_hex,
    ALTER COLUMN export_digest TYPE resolver_sha256_hex;

ALTER TABLE recovery_pruned_dispatches
    DROP CONSTRAINT ck_recovery_pruned_dispatches_key_sha256_hex,
    ALTER COLUMN idempotency_key_sha256 TYPE resolver_sha256_hex;

ALTER TABLE resolver_provider_migrations
    DROP CONSTRAINT ck_resolver_provider_migrations_checksum_hex,
    ALTER COLUMN checksum TYPE resolver_sha256_hex;

ALTER TABLE recovery_outcomes
    DROP CONSTRAINT ck_recovery_outcomes_kind_known,
    DROP CONSTRAINT ck_recovery_outcomes_settled_by_known,
    ALTER COLUMN kind TYPE resolver_outcome_kind,
    ALTER COLUMN settled_by TYPE resolver_settled_by;

ALTER TABLE recovery_outcome_consumers
    DROP CONSTRAINT ck_recovery_outcome_consumers_consumer_shape,
    ALTER COLUMN consumer TYPE resolver_id;

ALTER TABLE recovery_outcome_reader_scopes
    DROP CONSTRAINT ck_recovery_outcome_reader_scopes_project_id_shape,
    ALTER COLUMN project_id TYPE resolver_id;

ALTER DOMAIN resolver_sha256_hex
    ADD CONSTRAINT ck_resolver_sha256_hex CHECK (resolver_is_sha256_hex(VALUE));
ALTER DOMAIN resolver_code
    ADD CONSTRAINT ck_resolver_code CHECK (resolver_is_code(VALUE));
ALTER DOMAIN resolver_scan_reason
    ADD CONSTRAINT ck_resolver_scan_reason
    CHECK (length(VALUE) BETWEEN 1 AND 32 AND VALUE !~ '[^a-z0-9_]');
ALTER DOMAIN resolver_execution_state
    ADD CONSTRAINT ck_resolver_execution_state
    CHECK (VALUE IN ('leased','executing') OR VALUE = ANY (resolver_terminal_states()));
ALTER DOMAIN resolver_terminal_state
    ADD CONSTRAINT ck_resolver_terminal_state CHECK (VALUE = ANY (resolver_terminal_states()));
ALTER DOMAIN resolver_control_status
    ADD CONSTRAINT ck_resolver_control_status CHECK (VALUE IN ('armed','manual','resolved'));
ALTER DOMAIN resolver_finding
    ADD CONSTRAINT ck_resolver_finding CHECK (VALUE = ANY (resolver_finding_kinds()));
ALTER DOMAIN resolver_closed_by
    ADD CONSTRAINT ck_resolver_closed_by CHECK (VALUE IN ('completion','automatic','manual'));
ALTER DOMAIN resolver_failure_class
    ADD CONSTRAINT ck_resolver_failure_class
    CHECK (VALUE IN ('outage','timeout','configuration','error'));
ALTER DOMAIN resolver_resolution_source
    ADD CONSTRAINT ck_resolver_resolution_source CHECK (VALUE IN ('automatic','manual'));
ALTER DOMAIN resolver_json_object
    ADD CONSTRAINT ck_resolver_json_object CHECK (jsonb_typeof(VALUE) = 'object');
ALTER DOMAIN resolver_signature_hex
    ADD CONSTRAINT ck_resolver_signature_hex CHECK (resolver_is_signature_hex(VALUE));
ALTER DOMAIN resolver_signing_kid
    ADD CONSTRAINT ck_resolver_signing_kid CHECK (resolver_is_signing_kid(VALUE));
ALTER DOMAIN resolver_id
    ADD CONSTRAINT ck_resolver_id CHECK (resolver_is_id(VALUE));
ALTER DOMAIN resolver_outcome_kind
    ADD CONSTRAINT ck_resolver_outcome_kind
    CHECK (VALUE IN ('settled', 'contradicted', 'superseded'));
ALTER DOMAIN resolver_settled_by
    ADD CONSTRAINT ck_resolver_settled_by CHECK (VALUE IN ('executor', 'resolver', 'person'));
