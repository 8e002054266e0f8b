-- From the tables of release 0.1.0 to those of release 0.2.0, in one step. Tables, columns,
-- constraints, indexes and privileges only: `resolver migrate` has already replaced the
-- functions (so a check may call the domain's set functions) and adds the triggers after this
-- file (resolver/db/README.md).

-- Each domain set is spelled once, in a function of the schema, and every check reads it there.
ALTER TABLE approved_action_executions
    DROP CONSTRAINT ck_approved_action_executions_state_known,
    ADD CONSTRAINT ck_approved_action_executions_state_known
        CHECK (state IN ('leased','executing') OR state = ANY (resolver_terminal_states())),
    DROP CONSTRAINT ck_approved_action_executions_finished_iff_terminal,
    ADD CONSTRAINT ck_approved_action_executions_finished_iff_terminal
        CHECK ((state = ANY (resolver_terminal_states())) = (finished_at_ms IS NOT NULL));

ALTER TABLE approved_action_recovery_resolutions
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known,
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known
        CHECK (outcome = ANY (resolver_terminal_states())),
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified,
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified
        CHECK (source <> 'automatic' OR (resolver_finding_outcome(finding) IS NOT NULL
               AND evidence_digest IS NOT NULL AND result_code IS NOT NULL
               AND actor_user_id IS NULL AND outcome <> 'blocked'));

ALTER TABLE recovery_two_person_rules
    DROP CONSTRAINT ck_recovery_two_person_rules_decision_known,
    ADD CONSTRAINT ck_recovery_two_person_rules_decision_known
        CHECK (resolver_decision_settles(decision) IS NOT NULL);

ALTER TABLE recovery_late_evidence
    DROP CONSTRAINT ck_recovery_late_evidence_finding_verified,
    ADD CONSTRAINT ck_recovery_late_evidence_finding_verified
        CHECK (resolver_finding_outcome(finding) IS NOT NULL);

-- What was approved, for people: an optional bounded summary on the immutable dispatch.
ALTER TABLE approved_action_dispatches
    ADD COLUMN action_summary JSONB,
    ADD CONSTRAINT ck_approved_action_dispatches_action_summary_shape
        CHECK (resolver_action_summary_problem(action_summary) IS NULL);

-- Why evidence says what it says (the last reason code and a count per code), and when a
-- waiting case escalates.
ALTER TABLE approved_action_recovery_controls
    DROP CONSTRAINT ck_approved_action_recovery_controls_finding_known,
    ADD CONSTRAINT ck_approved_action_recovery_controls_finding_known
        CHECK (last_finding IS NULL OR last_finding = ANY (resolver_finding_kinds())),
    ADD COLUMN last_reason TEXT,
    ADD COLUMN reason_counts JSONB DEFAULT '{}'::jsonb NOT NULL,
    ADD COLUMN escalates_at_ms BIGINT,
    ADD CONSTRAINT ck_approved_action_recovery_controls_last_reason_shape
        CHECK (last_reason IS NULL OR (length(last_reason) BETWEEN 1 AND 32 AND last_reason !~ '[^a-z0-9_]')),
    ADD CONSTRAINT ck_approved_action_recovery_controls_reason_counts_object
        CHECK (jsonb_typeof(reason_counts) = 'object');

-- Signed authorization facts: the API signs who decided, with which token, what and when.
ALTER TABLE recovery_authorizations
    ADD COLUMN issuer TEXT,
    ADD COLUMN token_kid TEXT,
    ADD COLUMN signing_kid TEXT,
    ADD COLUMN signature TEXT,
    ADD CONSTRAINT ck_recovery_authorizations_signed_whole CHECK ((signature IS NULL) = (signing_kid IS NULL) AND (signature IS NULL) = (issuer IS NULL) AND (signature IS NULL) = (token_kid IS NULL)),
    ADD CONSTRAINT ck_recovery_authorizations_signature_hex CHECK (signature IS NULL OR signature ~ '^[0-9a-f]{128}$'),
    ADD CONSTRAINT ck_recovery_authorizations_signing_kid_shape CHECK (signing_kid IS NULL OR signing_kid ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'),
    ADD CONSTRAINT ck_recovery_authorizations_issuer_printable CHECK (issuer IS NULL OR (length(issuer) BETWEEN 1 AND 512 AND issuer !~ '[[:cntrl:]]')),
    ADD CONSTRAINT ck_recovery_authorizations_token_kid_printable CHECK (token_kid IS NULL OR (length(token_kid) BETWEEN 1 AND 256 AND token_kid !~ '[[:cntrl:]]'));

ALTER TABLE recovery_proposals
    DROP CONSTRAINT ck_recovery_proposals_outcome_known,
    ADD CONSTRAINT ck_recovery_proposals_outcome_known CHECK (outcome = ANY (resolver_terminal_states())),
    ADD COLUMN issuer text,
    ADD COLUMN token_kid text,
    ADD COLUMN signing_kid text,
    ADD COLUMN signature text,
    ADD CONSTRAINT ck_recovery_proposals_signed_whole
        CHECK ((signature IS NULL) = (signing_kid IS NULL) AND (signature IS NULL) = (issuer IS NULL)
               AND (signature IS NULL) = (token_kid IS NULL)),
    ADD CONSTRAINT ck_recovery_proposals_signature_hex
        CHECK (signature IS NULL OR signature ~ '^[0-9a-f]{128}$');

-- A signed fact names one act of one person (decide, propose, confirm, reject, withdraw) and
-- is consumed by it: the act, the mutation id it was signed for, the proposal it closes and
-- when the API verified the token are recorded with it, and no signature (nor the act's
-- mutation id) is recorded twice. Facts recorded before keep NULL.
ALTER TABLE recovery_authorizations
    ADD COLUMN act TEXT,
    ADD COLUMN act_mutation_id TEXT,
    ADD COLUMN proposal_id BIGINT,
    ADD COLUMN verified_at_ms BIGINT,
    ADD CONSTRAINT ck_recovery_authorizations_act_known
        CHECK (act IS NULL OR act = ANY (resolver_fact_acts())),
    ADD CONSTRAINT ck_recovery_authorizations_act_bound
        CHECK ((act IS NULL) = (act_mutation_id IS NULL) AND (act IS NULL) = (verified_at_ms IS NULL)
               AND (act IS NULL OR signature IS NOT NULL));
CREATE UNIQUE INDEX uq_recovery_authorizations_signature ON recovery_authorizations (signature)
    WHERE signature IS NOT NULL;
CREATE UNIQUE INDEX uq_recovery_authorizations_act_mutation_id
    ON recovery_authorizations (act_mutation_id) WHERE act_mutation_id IS NOT NULL;

-- The proposer's fact names its act too, and a reject or withdraw carries the closer's signed
-- fact.
ALTER TABLE recovery_proposals
    ADD COLUMN verified_at_ms bigint,
    ADD COLUMN closed_project_version bigint,
    ADD COLUMN closed_role_binding_version bigint,
    ADD COLUMN closed_issuer text,
    ADD COLUMN closed_token_kid text,
    ADD COLUMN closed_signing_kid text,
    ADD COLUMN closed_signature text,
    ADD COLUMN closed_verified_at_ms bigint,
    ADD CONSTRAINT ck_recovery_proposals_act_bound
        CHECK (verified_at_ms IS NULL OR signature IS NOT NULL),
    ADD CONSTRAINT ck_recovery_proposals_closed_signed_whole
        CHECK ((closed_signature IS NULL) = (closed_signing_kid IS NULL)
               AND (closed_signature IS NULL) = (closed_issuer IS NULL)
               AND (closed_signature IS NULL) = (closed_token_kid IS NULL)
               AND (closed_signature IS NULL) = (closed_verified_at_ms IS NULL)
               AND (closed_signature IS NULL) = (closed_project_version IS NULL)
               AND (closed_signature IS NULL) = (closed_role_binding_version IS NULL)
               AND (closed_signature IS NULL OR closed_as IN ('rejected', 'withdrawn'))),
    ADD CONSTRAINT ck_recovery_proposals_closed_signature_hex
        CHECK (closed_signature IS NULL OR closed_signature ~ '^[0-9a-f]{128}$');
CREATE UNIQUE INDEX uq_recovery_proposals_signature ON recovery_proposals (signature)
    WHERE signature IS NOT NULL;
CREATE UNIQUE INDEX uq_recovery_proposals_closed_signature ON recovery_proposals (closed_signature)
    WHERE closed_signature IS NOT NULL;

-- A proposal still open from before cannot be confirmed: its proposer's fact names no act (a
-- 0.1.0 proposal carries no signature at all). It is voided, so the case shows it closed and
-- its proposer proposes again; the downgrade opens it again.
UPDATE recovery_proposals
SET closed_as = 'voided', closed_at_ms = resolver_now_ms(NULL), close_reason_code = 'unbound_fact'
WHERE closed_as IS NULL;

-- The bounds of a human act, the policy writer's: strong-authentication age, proposal
-- lifetime, clock leeway. No longer arguments a caller chooses.
CREATE TABLE recovery_decision_policy (
    id smallint NOT NULL,
    max_auth_age_ms bigint NOT NULL,
    proposal_ttl_ms bigint NOT NULL,
    clock_leeway_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_decision_policy PRIMARY KEY (id),
    CONSTRAINT ck_recovery_decision_policy_one_row CHECK (id = 1),
    CONSTRAINT ck_recovery_decision_policy_max_auth_age
        CHECK (max_auth_age_ms BETWEEN 1000 AND 3600000),
    CONSTRAINT ck_recovery_decision_policy_proposal_ttl
        CHECK (proposal_ttl_ms BETWEEN 1000 AND 86400000),
    CONSTRAINT ck_recovery_decision_policy_clock_leeway
        CHECK (clock_leeway_ms BETWEEN 0 AND 300000)
);

INSERT INTO recovery_decision_policy (id, max_auth_age_ms, proposal_ttl_ms, clock_leeway_ms)
VALUES (1, 300000, 3600000, 30000);

-- The audit range an --include-audit prune removed, so a verifier can walk across it.
ALTER TABLE recovery_prune_runs
    ADD COLUMN audit_first_seq BIGINT,
    ADD COLUMN audit_last_seq BIGINT,
    ADD CONSTRAINT ck_recovery_prune_runs_audit_range CHECK ((audit_first_seq IS NULL) = (audit_last_seq IS NULL) AND audit_first_seq <= audit_last_seq),
    -- The outcome records a run took, and those a registered consumer had not read (only a
    -- run past consumers takes them).
    ADD COLUMN past_consumers BOOLEAN DEFAULT false NOT NULL,
    ADD COLUMN outcomes_pruned BIGINT DEFAULT 0 NOT NULL,
    ADD COLUMN outcomes_unread BIGINT DEFAULT 0 NOT NULL;

-- What retention kept of a pruned dispatch, so find still answers for it.
CREATE TABLE recovery_pruned_dispatches (
    dispatch_id TEXT NOT NULL,
    idempotency_key_sha256 TEXT NOT NULL,
    approval_request_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    action_type TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    state TEXT,
    closed_by TEXT,
    run_id BIGINT NOT NULL,
    pruned_at_ms BIGINT NOT NULL,
    CONSTRAINT pk_recovery_pruned_dispatches PRIMARY KEY (dispatch_id),
    CONSTRAINT fk_recovery_pruned_dispatches_run_id FOREIGN KEY(run_id) REFERENCES recovery_prune_runs (run_id),
    CONSTRAINT ck_recovery_pruned_dispatches_key_sha256_hex CHECK (idempotency_key_sha256 ~ '^[0-9a-f]{64}$')
);

CREATE INDEX ix_recovery_pruned_dispatches_idempotency_key_sha256 ON recovery_pruned_dispatches (idempotency_key_sha256);

-- Providers' own schemas: the migrations `resolver migrate` applied of each, and the evidence
-- tables a prune empties with the dispatch (resolver/db/provider_schemas.py).
CREATE TABLE resolver_provider_migrations (
    provider TEXT NOT NULL,
    name TEXT NOT NULL,
    checksum TEXT NOT NULL,
    applied_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    CONSTRAINT pk_resolver_provider_migrations PRIMARY KEY (provider, name),
    CONSTRAINT ck_resolver_provider_migrations_checksum_hex CHECK (checksum ~ '^[0-9a-f]{64}$')
);

CREATE TABLE resolver_evidence_tables (
    table_name TEXT NOT NULL,
    dispatch_column TEXT NOT NULL,
    provider TEXT NOT NULL,
    CONSTRAINT pk_resolver_evidence_tables PRIMARY KEY (table_name)
);
CREATE INDEX ix_recovery_pruned_dispatches_approval_request_id ON recovery_pruned_dispatches (approval_request_id);
CREATE INDEX ix_recovery_pruned_dispatches_pruned_at_ms ON recovery_pruned_dispatches (pruned_at_ms, dispatch_id);
CREATE INDEX ix_recovery_pruned_dispatches_run_id ON recovery_pruned_dispatches (run_id);

-- The decisions list walks newest first along this index, which now answers the dispatch too.
DROP INDEX ix_recovery_resolutions_manual;
CREATE INDEX ix_recovery_resolutions_manual
    ON approved_action_recovery_resolutions (resolved_at_ms, resolution_id)
    INCLUDE (dispatch_id)
    WHERE source = 'manual';

-- The outcome feed: a record per settled outcome, appended by triggers in the settling
-- transaction, and the consumers that registered a cursor (functions/10_outcome_feed.sql).
CREATE TABLE recovery_outcomes (
    xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    seq bigint GENERATED ALWAYS AS IDENTITY,
    kind text NOT NULL,
    dispatch_id text NOT NULL,
    approval_request_id text NOT NULL,
    project_id text NOT NULL,
    action_type text NOT NULL,
    state text NOT NULL,
    settled_by text,
    finding text,
    result_code text,
    evidence_digest text,
    mutation_id text,
    reason_code text,
    actors text[],
    superseded_by text,
    occurred_at_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_outcomes PRIMARY KEY (xid, seq),
    CONSTRAINT ck_recovery_outcomes_kind_known
        CHECK (kind IN ('settled', 'contradicted', 'superseded')),
    CONSTRAINT ck_recovery_outcomes_settled_by_known
        CHECK (settled_by IS NULL OR settled_by IN ('executor', 'resolver', 'person')),
    CONSTRAINT ck_recovery_outcomes_settled_terminal
        CHECK (kind <> 'settled' OR (state = ANY (resolver_terminal_states()) AND settled_by IS NOT NULL)),
    CONSTRAINT ck_recovery_outcomes_superseded_names
        CHECK ((kind = 'superseded') = (superseded_by IS NOT NULL))
);

CREATE INDEX ix_recovery_outcomes_dispatch_id ON recovery_outcomes (dispatch_id);

CREATE TABLE recovery_outcome_consumers (
    consumer text NOT NULL,
    cursor_xid xid8 NOT NULL,
    cursor_position bigint NOT NULL,
    registered_at_ms bigint NOT NULL,
    saved_at_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_outcome_consumers PRIMARY KEY (consumer),
    CONSTRAINT ck_recovery_outcome_consumers_consumer_shape
        CHECK (consumer ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$')
);

CREATE TABLE recovery_outcome_reader_scopes (
    role_name text NOT NULL,
    project_id text NOT NULL,
    CONSTRAINT pk_recovery_outcome_reader_scopes PRIMARY KEY (role_name, project_id),
    CONSTRAINT ck_recovery_outcome_reader_scopes_role_name_shape
        CHECK (length(role_name) BETWEEN 1 AND 63),
    CONSTRAINT ck_recovery_outcome_reader_scopes_project_id_shape
        CHECK (project_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$')
);

-- Each face its own role: release 0.1.0's grants.sql let the replicas' role (and through it
-- the API) write what a decision records. From this release only SECURITY DEFINER functions
-- do; grants.sql gives back what each face still needs. A table nobody was granted anything on
-- keeps its default privileges untouched.
DO $$
DECLARE
    t regclass;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'resolver_runtime') THEN
        RETURN;
    END IF;
    FOR t IN
        SELECT c.oid::regclass FROM pg_class AS c
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relacl IS NOT NULL
          AND c.relname IN ('approved_action_recovery_resolutions', 'recovery_authorizations',
                            'recovery_proposals', 'recovery_audit_chain', 'recovery_audit_head',
                            'recovery_late_evidence', 'approved_action_executions',
                            'approved_action_recovery_controls', 'recovery_late_watches',
                            'recovery_projects', 'recovery_role_bindings')
    LOOP
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON %s FROM resolver_runtime', t);
    END LOOP;
END
$$;
