-- Dispatches, executions, recovery controls, resolutions and authorizations.
-- Today's definition, to read and to compare with: `resolver migrate` builds the tables with
-- the migrations (resolver/db/migrations/sql/), and the catalog-diff test
-- (tests/integration/schema/test_schema_files.py) proves a migrated database equals one built
-- from these files. A table change edits this file AND the release's migration
-- (resolver/db/README.md).
-- Digests and codes are checked as a length and a negated character class, never as a
-- bounded repetition ('^[0-9a-f]{64}$'): the same strings pass, and the check costs about a
-- tenth (PostgreSQL's regex engine unrolls the count).

CREATE TABLE approved_action_dispatches (
    dispatch_id TEXT NOT NULL,
    approval_request_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    action_type TEXT NOT NULL,
    action_digest TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    schema_version SMALLINT NOT NULL,
    supersedes_dispatch_id TEXT,
    created_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    action_summary JSONB,
    CONSTRAINT pk_approved_action_dispatches PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_approved_action_dispatches_action_digest_hex CHECK (length(action_digest) = 64 AND action_digest !~ '[^0-9a-f]'),
    CONSTRAINT ck_approved_action_dispatches_schema_version_positive CHECK (schema_version >= 1),
    CONSTRAINT ck_approved_action_dispatches_bounded_ids CHECK (length(dispatch_id) <= 128 AND length(approval_request_id) <= 128 AND length(project_id) <= 128 AND length(idempotency_key) <= 128 AND length(action_type) <= 64),
    CONSTRAINT ck_approved_action_dispatches_no_self_supersede CHECK (supersedes_dispatch_id <> dispatch_id),
    CONSTRAINT fk_approved_action_dispatches_supersedes_dispatch_id FOREIGN KEY(supersedes_dispatch_id) REFERENCES approved_action_dispatches (dispatch_id),
    CONSTRAINT uq_approved_action_dispatches_idempotency_key UNIQUE (idempotency_key),
    CONSTRAINT ck_approved_action_dispatches_action_summary_shape CHECK (resolver_action_summary_problem(action_summary) IS NULL)
);

CREATE TABLE approved_action_executions (
    dispatch_id TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    token UUID NOT NULL,
    version BIGINT NOT NULL,
    attempt INTEGER NOT NULL,
    lease_expires_at_ms BIGINT NOT NULL,
    started_at_ms BIGINT,
    finished_at_ms BIGINT,
    result_code TEXT,
    completion_mutation_id TEXT,
    evidence_digest TEXT,
    CONSTRAINT pk_approved_action_executions PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_approved_action_executions_state_known CHECK (state IN ('leased','executing') OR state = ANY (resolver_terminal_states())),
    CONSTRAINT ck_approved_action_executions_counters_positive CHECK (version >= 1 AND attempt >= 1),
    CONSTRAINT ck_approved_action_executions_started_after_barrier CHECK (state = 'leased' OR started_at_ms IS NOT NULL),
    CONSTRAINT ck_approved_action_executions_finished_iff_terminal CHECK ((state = ANY (resolver_terminal_states())) = (finished_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_executions_result_code_shape CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_executions_evidence_digest_hex CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT fk_approved_action_executions_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id)
)
-- Room for HOT updates: start, renewals and the terminal update change no indexed column
--.
WITH (fillfactor = 85);

CREATE TABLE approved_action_recovery_controls (
    dispatch_id TEXT NOT NULL,
    status TEXT NOT NULL,
    execution_version BIGINT NOT NULL,
    next_scan_at_ms BIGINT NOT NULL,
    recovery_owner TEXT,
    recovery_token UUID,
    recovery_version BIGINT DEFAULT 0 NOT NULL,
    recovery_lease_expires_at_ms BIGINT,
    last_finding TEXT,
    finding_count INTEGER DEFAULT 0 NOT NULL,
    armed_at_ms BIGINT NOT NULL,
    manual_at_ms BIGINT,
    closed_by TEXT,
    closed_at_ms BIGINT,
    completion_mutation_id TEXT,
    finding_counts JSONB DEFAULT '{}'::jsonb NOT NULL,
    first_inspected_at_ms BIGINT,
    last_inspected_at_ms BIGINT,
    last_failure_class TEXT,
    last_evidence_digest TEXT,
    manual_reason TEXT,
    last_reason TEXT,
    reason_counts JSONB DEFAULT '{}'::jsonb NOT NULL,
    -- When a waiting case goes to the manual queue if the evidence stays what it last was:
    -- the first inspection plus its action type's window for that finding, as the replica
    -- that inspected it last applied it (escalation happens at the first look from then on).
    -- NULL when that finding never escalates.
    escalates_at_ms BIGINT,
    CONSTRAINT pk_approved_action_recovery_controls PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_approved_action_recovery_controls_status_known CHECK (status IN ('armed','manual','resolved')),
    CONSTRAINT ck_approved_action_recovery_controls_finding_known CHECK (last_finding IS NULL OR last_finding = ANY (resolver_finding_kinds())),
    CONSTRAINT ck_approved_action_recovery_controls_closed_by_known CHECK (closed_by IS NULL OR closed_by IN ('completion','automatic','manual')),
    CONSTRAINT ck_approved_action_recovery_controls_closed_iff_resolved CHECK ((status = 'resolved') = (closed_by IS NOT NULL AND closed_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_recovery_lease_whole CHECK ((recovery_token IS NULL) = (recovery_lease_expires_at_ms IS NULL) AND (recovery_token IS NULL) = (recovery_owner IS NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_lease_only_when_armed CHECK (status = 'armed' OR recovery_token IS NULL),
    CONSTRAINT ck_approved_action_recovery_controls_finding_counts_object CHECK (jsonb_typeof(finding_counts) = 'object'),
    CONSTRAINT ck_approved_action_recovery_controls_failure_class_known CHECK (last_failure_class IS NULL OR last_failure_class IN ('outage','timeout','configuration','error')),
    CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex CHECK (last_evidence_digest IS NULL OR (length(last_evidence_digest) = 64 AND last_evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape CHECK (manual_reason IS NULL OR (length(manual_reason) BETWEEN 1 AND 64 AND manual_reason !~ '[^a-z0-9_.-]')),
    CONSTRAINT fk_approved_action_recovery_controls_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_executions (dispatch_id),
    CONSTRAINT ck_approved_action_recovery_controls_last_reason_shape CHECK (last_reason IS NULL OR (length(last_reason) BETWEEN 1 AND 32 AND last_reason !~ '[^a-z0-9_]')),
    CONSTRAINT ck_approved_action_recovery_controls_reason_counts_object CHECK (jsonb_typeof(reason_counts) = 'object')
)
-- Room for a control's next version on its own page.
WITH (fillfactor = 90);

CREATE INDEX ix_recovery_controls_due ON approved_action_recovery_controls (next_scan_at_ms, dispatch_id) WHERE status = 'armed';

CREATE INDEX ix_recovery_controls_manual ON approved_action_recovery_controls (manual_at_ms, dispatch_id) WHERE status = 'manual';

-- The API's waiting list: armed controls inspected at least once.
CREATE INDEX ix_recovery_controls_waiting ON approved_action_recovery_controls (first_inspected_at_ms, dispatch_id) WHERE status = 'armed' AND first_inspected_at_ms IS NOT NULL;

CREATE TABLE approved_action_recovery_resolutions (
    resolution_id BIGINT GENERATED BY DEFAULT AS IDENTITY,
    dispatch_id TEXT NOT NULL,
    mutation_id TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    finding TEXT,
    evidence_digest TEXT,
    result_code TEXT,
    expected_execution_version BIGINT NOT NULL,
    actor_user_id TEXT,
    reason_code TEXT,
    resolved_at_ms BIGINT NOT NULL,
    CONSTRAINT pk_approved_action_recovery_resolutions PRIMARY KEY (resolution_id),
    CONSTRAINT ck_approved_action_recovery_resolutions_source_known CHECK (source IN ('automatic','manual')),
    CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known CHECK (outcome = ANY (resolver_terminal_states())),
    CONSTRAINT ck_approved_action_recovery_resolutions_evidence_digest_hex CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_result_code_shape CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_reason_code_shape CHECK (reason_code IS NULL OR (length(reason_code) BETWEEN 1 AND 64 AND reason_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified CHECK (source <> 'automatic' OR (resolver_finding_outcome(finding) IS NOT NULL AND evidence_digest IS NOT NULL AND result_code IS NOT NULL AND actor_user_id IS NULL AND outcome <> 'blocked')),
    CONSTRAINT ck_approved_action_recovery_resolutions_manual_has_actor CHECK (source <> 'manual' OR (actor_user_id IS NOT NULL AND reason_code IS NOT NULL)),
    CONSTRAINT fk_approved_action_recovery_resolutions_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id),
    CONSTRAINT uq_approved_action_recovery_resolutions_dispatch_id UNIQUE (dispatch_id),
    CONSTRAINT uq_approved_action_recovery_resolutions_mutation_id UNIQUE (mutation_id)
);

CREATE TABLE recovery_authorizations (
    authorization_id BIGINT GENERATED BY DEFAULT AS IDENTITY,
    mutation_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    permission TEXT NOT NULL,
    project_id TEXT NOT NULL,
    project_version BIGINT NOT NULL,
    role_binding_version BIGINT NOT NULL,
    auth_time_ms BIGINT NOT NULL,
    amr TEXT[] NOT NULL,
    authorized_at_ms BIGINT NOT NULL,
    issuer TEXT,
    token_kid TEXT,
    signing_kid TEXT,
    signature TEXT,
    act TEXT,
    act_mutation_id TEXT,
    proposal_id BIGINT,
    verified_at_ms BIGINT,
    CONSTRAINT pk_recovery_authorizations PRIMARY KEY (authorization_id),
    CONSTRAINT ck_recovery_authorizations_permission_known CHECK (permission = 'approval.recover'),
    CONSTRAINT ck_recovery_authorizations_signed_whole CHECK ((signature IS NULL) = (signing_kid IS NULL) AND (signature IS NULL) = (issuer IS NULL) AND (signature IS NULL) = (token_kid IS NULL)),
    CONSTRAINT ck_recovery_authorizations_signature_hex CHECK (signature IS NULL OR signature ~ '^[0-9a-f]{128}$'),
    CONSTRAINT ck_recovery_authorizations_signing_kid_shape CHECK (signing_kid IS NULL OR signing_kid ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'),
    CONSTRAINT ck_recovery_authorizations_issuer_printable CHECK (issuer IS NULL OR (length(issuer) BETWEEN 1 AND 512 AND issuer !~ '[[:cntrl:]]')),
    CONSTRAINT ck_recovery_authorizations_token_kid_printable CHECK (token_kid IS NULL OR (length(token_kid) BETWEEN 1 AND 256 AND token_kid !~ '[[:cntrl:]]')),
    CONSTRAINT fk_recovery_authorizations_mutation_id FOREIGN KEY(mutation_id) REFERENCES approved_action_recovery_resolutions (mutation_id),
    CONSTRAINT uq_recovery_authorizations_mutation_id_user_id UNIQUE (mutation_id, user_id),
    -- A fact that names its act (payload v2): the act, the mutation id it was signed for (the
    -- proposal's for a proposer's fact), the proposal it closes (a confirmation's) and when
    -- the API verified the token; signed, always. NULL on facts recorded before.
    CONSTRAINT ck_recovery_authorizations_act_known
        CHECK (act IS NULL OR act = ANY (resolver_fact_acts())),
    CONSTRAINT ck_recovery_authorizations_act_bound
        CHECK ((act IS NULL) = (act_mutation_id IS NULL) AND (act IS NULL) = (verified_at_ms IS NULL)
               AND (act IS NULL OR signature IS NOT NULL))
);

-- A signed fact is consumed once: its signature, and the mutation id of the act it names,
-- are recorded at most once.
CREATE UNIQUE INDEX uq_recovery_authorizations_signature ON recovery_authorizations (signature)
    WHERE signature IS NOT NULL;
CREATE UNIQUE INDEX uq_recovery_authorizations_act_mutation_id
    ON recovery_authorizations (act_mutation_id) WHERE act_mutation_id IS NOT NULL;
