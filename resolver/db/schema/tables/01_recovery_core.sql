-- Dispatches, executions, recovery controls, resolutions and authorizations.
-- Today's definition, to read and to compare with: `resolver migrate` builds the tables with
-- the migrations (resolver/db/migrations/sql/), and the catalog-diff test
-- (tests/integration/schema/test_schema_files.py) proves a migrated database equals one built
-- from these files. A table change edits this file AND the release's migration
-- (resolver/db/README.md).
-- Digests and codes are checked as a length and a negated character class, never as a
-- bounded repetition ('^[0-9a-f]{64}$'): the same strings pass, and the check costs about a
-- tenth (PostgreSQL's regex engine unrolls the count).

-- Value shapes as domains: a domain's check is read and planned once per session, where a
-- table's CHECK constraint is read from its stored text and planned again by every statement
-- that writes the table (about 4 µs a constraint, more than the row's own write), and a
-- domain is checked only on the columns a statement assigns. Checks between columns stay
-- table constraints.
CREATE DOMAIN resolver_sha256_hex AS TEXT
    CONSTRAINT ck_resolver_sha256_hex CHECK (resolver_is_sha256_hex(VALUE));
CREATE DOMAIN resolver_signature_hex AS TEXT
    CONSTRAINT ck_resolver_signature_hex CHECK (resolver_is_signature_hex(VALUE));
CREATE DOMAIN resolver_signing_kid AS TEXT
    CONSTRAINT ck_resolver_signing_kid CHECK (resolver_is_signing_kid(VALUE));
CREATE DOMAIN resolver_id AS TEXT
    CONSTRAINT ck_resolver_id CHECK (resolver_is_id(VALUE));
CREATE DOMAIN resolver_code AS TEXT
    CONSTRAINT ck_resolver_code CHECK (resolver_is_code(VALUE));
CREATE DOMAIN resolver_scan_reason AS TEXT
    CONSTRAINT ck_resolver_scan_reason CHECK (length(VALUE) BETWEEN 1 AND 32 AND VALUE !~ '[^a-z0-9_]');
CREATE DOMAIN resolver_execution_state AS TEXT
    CONSTRAINT ck_resolver_execution_state CHECK (VALUE IN ('leased','executing') OR VALUE = ANY (resolver_terminal_states()));
CREATE DOMAIN resolver_terminal_state AS TEXT
    CONSTRAINT ck_resolver_terminal_state CHECK (VALUE = ANY (resolver_terminal_states()));
CREATE DOMAIN resolver_control_status AS TEXT
    CONSTRAINT ck_resolver_control_status CHECK (VALUE IN ('armed','manual','resolved'));
CREATE DOMAIN resolver_finding AS TEXT
    CONSTRAINT ck_resolver_finding CHECK (VALUE = ANY (resolver_finding_kinds()));
CREATE DOMAIN resolver_closed_by AS TEXT
    CONSTRAINT ck_resolver_closed_by CHECK (VALUE IN ('completion','automatic','manual'));
CREATE DOMAIN resolver_failure_class AS TEXT
    CONSTRAINT ck_resolver_failure_class CHECK (VALUE IN ('outage','timeout','configuration','error'));
CREATE DOMAIN resolver_resolution_source AS TEXT
    CONSTRAINT ck_resolver_resolution_source CHECK (VALUE IN ('automatic','manual'));
CREATE DOMAIN resolver_json_object AS JSONB
    CONSTRAINT ck_resolver_json_object CHECK (jsonb_typeof(VALUE) = 'object');

CREATE TABLE approved_action_dispatches (
    dispatch_id TEXT NOT NULL,
    approval_request_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    action_type TEXT NOT NULL,
    action_digest resolver_sha256_hex NOT NULL,
    idempotency_key TEXT NOT NULL,
    schema_version SMALLINT NOT NULL,
    supersedes_dispatch_id TEXT,
    created_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    action_summary JSONB,
    CONSTRAINT pk_approved_action_dispatches PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_approved_action_dispatches_schema_version_positive CHECK (schema_version >= 1),
    CONSTRAINT ck_approved_action_dispatches_bounded_ids CHECK (length(dispatch_id) <= 128 AND length(approval_request_id) <= 128 AND length(project_id) <= 128 AND length(idempotency_key) <= 128 AND length(action_type) <= 64),
    CONSTRAINT ck_approved_action_dispatches_no_self_supersede CHECK (supersedes_dispatch_id <> dispatch_id),
    CONSTRAINT fk_approved_action_dispatches_supersedes_dispatch_id FOREIGN KEY(supersedes_dispatch_id) REFERENCES approved_action_dispatches (dispatch_id),
    CONSTRAINT uq_approved_action_dispatches_idempotency_key UNIQUE (idempotency_key),
    CONSTRAINT ck_approved_action_dispatches_action_summary_shape CHECK (resolver_action_summary_problem(action_summary) IS NULL)
);

CREATE TABLE approved_action_executions (
    dispatch_id TEXT NOT NULL,
    state resolver_execution_state NOT NULL,
    owner TEXT NOT NULL,
    token UUID NOT NULL,
    version BIGINT NOT NULL,
    attempt INTEGER NOT NULL,
    lease_expires_at_ms BIGINT NOT NULL,
    started_at_ms BIGINT,
    finished_at_ms BIGINT,
    result_code resolver_code,
    completion_mutation_id TEXT,
    evidence_digest resolver_sha256_hex,
    CONSTRAINT pk_approved_action_executions PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_approved_action_executions_counters_positive CHECK (version >= 1 AND attempt >= 1),
    CONSTRAINT ck_approved_action_executions_started_after_barrier CHECK (state = 'leased' OR started_at_ms IS NOT NULL),
    CONSTRAINT ck_approved_action_executions_finished_iff_terminal CHECK ((state = ANY (resolver_terminal_states())) = (finished_at_ms IS NOT NULL)),
    CONSTRAINT fk_approved_action_executions_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id)
)
-- Room for HOT updates: start, renewals and the terminal update change no indexed column
--.
WITH (fillfactor = 85);

CREATE TABLE approved_action_recovery_controls (
    dispatch_id TEXT NOT NULL,
    status resolver_control_status NOT NULL,
    execution_version BIGINT NOT NULL,
    next_scan_at_ms BIGINT NOT NULL,
    recovery_owner TEXT,
    recovery_token UUID,
    recovery_version BIGINT DEFAULT 0 NOT NULL,
    recovery_lease_expires_at_ms BIGINT,
    last_finding resolver_finding,
    finding_count INTEGER DEFAULT 0 NOT NULL,
    armed_at_ms BIGINT NOT NULL,
    manual_at_ms BIGINT,
    closed_by resolver_closed_by,
    closed_at_ms BIGINT,
    completion_mutation_id TEXT,
    finding_counts resolver_json_object DEFAULT '{}'::jsonb NOT NULL,
    first_inspected_at_ms BIGINT,
    last_inspected_at_ms BIGINT,
    last_failure_class resolver_failure_class,
    last_evidence_digest resolver_sha256_hex,
    manual_reason resolver_code,
    last_reason resolver_scan_reason,
    reason_counts resolver_json_object DEFAULT '{}'::jsonb NOT NULL,
    -- When a waiting case goes to the manual queue if the evidence stays what it last was:
    -- the first inspection plus its action type's window for that finding, as the replica
    -- that inspected it last applied it (escalation happens at the first look from then on).
    -- NULL when that finding never escalates.
    escalates_at_ms BIGINT,
    CONSTRAINT pk_approved_action_recovery_controls PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_approved_action_recovery_controls_closed_iff_resolved CHECK ((status = 'resolved') = (closed_by IS NOT NULL AND closed_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_recovery_lease_whole CHECK ((recovery_token IS NULL) = (recovery_lease_expires_at_ms IS NULL) AND (recovery_token IS NULL) = (recovery_owner IS NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_lease_only_when_armed CHECK (status = 'armed' OR recovery_token IS NULL),
    CONSTRAINT fk_approved_action_recovery_controls_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_executions (dispatch_id)
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
    source resolver_resolution_source NOT NULL,
    outcome resolver_terminal_state NOT NULL,
    finding TEXT,
    evidence_digest resolver_sha256_hex,
    result_code resolver_code,
    expected_execution_version BIGINT NOT NULL,
    actor_user_id TEXT,
    reason_code resolver_code,
    resolved_at_ms BIGINT NOT NULL,
    CONSTRAINT pk_approved_action_recovery_resolutions PRIMARY KEY (resolution_id),
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
    signing_kid resolver_signing_kid,
    signature resolver_signature_hex,
    act TEXT,
    act_mutation_id TEXT,
    proposal_id BIGINT,
    verified_at_ms BIGINT,
    CONSTRAINT pk_recovery_authorizations PRIMARY KEY (authorization_id),
    CONSTRAINT ck_recovery_authorizations_permission_known CHECK (permission = 'approval.recover'),
    CONSTRAINT ck_recovery_authorizations_signed_whole CHECK ((signature IS NULL) = (signing_kid IS NULL) AND (signature IS NULL) = (issuer IS NULL) AND (signature IS NULL) = (token_kid IS NULL)),
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
