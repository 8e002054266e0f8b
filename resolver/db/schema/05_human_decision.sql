-- Current definitions: what the human decision needs beyond the core tables (migration
-- 0012): the lookups of the API and the audit chain over manual decisions. Before
-- 08_commits.sql, whose manual commit writes the chain.
-- Applied in file-name order onto an empty schema, these files build what the migrations build
-- step by step (tests/integration/test_schema_files.py compares the two catalogs). A schema
-- change edits the definition here AND adds a migration under resolver/db/migrations/sql/.

-- Lookup of a case by the approval it executes.
CREATE INDEX ix_approved_action_dispatches_approval_request_id
    ON approved_action_dispatches (approval_request_id);

-- The decisions list, newest first; with the dispatch id, so the list's total is an
-- index-only walk (migration 0024).
CREATE INDEX ix_recovery_resolutions_manual
    ON approved_action_recovery_resolutions (resolved_at_ms, resolution_id)
    INCLUDE (dispatch_id)
    WHERE source = 'manual';

-- The audit chain: one link per manual decision, written by the decision's own statement.
-- `content` is the canonical JSON of the decision as committed (resolution and authorization
-- facts); `hash` = sha256(prev_hash || content), hex. The link holds its content; an
-- --include-audit prune exports it, then deletes it with its decision (migration 0015), and
-- `resolver audit verify --export` walks the pruned range from the export.
CREATE TABLE recovery_audit_chain (
    seq bigint NOT NULL,
    mutation_id text NOT NULL,
    dispatch_id text NOT NULL,
    content text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    recorded_at_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_audit_chain PRIMARY KEY (seq),
    CONSTRAINT uq_recovery_audit_chain_mutation_id UNIQUE (mutation_id),
    CONSTRAINT ck_recovery_audit_chain_seq_positive CHECK (seq >= 1),
    CONSTRAINT ck_recovery_audit_chain_hashes_hex
        CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_audit_chain_content_bounded CHECK (octet_length(content) <= 8192)
);
CREATE TRIGGER recovery_audit_chain_immutable BEFORE UPDATE OR DELETE ON recovery_audit_chain
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();
CREATE TRIGGER recovery_audit_chain_definer_write AFTER INSERT ON recovery_audit_chain
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write('resolver_commit_manual');

-- The chain's head: one row. Each decision updates it (seq + 1, the new hash; prev_hash keeps
-- the old one, which RETURNING cannot see otherwise) before it inserts its link, so
-- concurrent decisions queue on this row lock and each links to the head committed before it
-- (READ COMMITTED re-reads the row after the wait).
CREATE TABLE recovery_audit_head (
    id smallint NOT NULL,
    seq bigint NOT NULL,
    hash text NOT NULL,
    prev_hash text NOT NULL,
    CONSTRAINT pk_recovery_audit_head PRIMARY KEY (id),
    CONSTRAINT ck_recovery_audit_head_one_row CHECK (id = 1),
    CONSTRAINT ck_recovery_audit_head_hashes_hex
        CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$')
);
INSERT INTO recovery_audit_head (id, seq, hash, prev_hash)
VALUES (1, 0, repeat('0', 64), repeat('0', 64));
-- Only a decision moves the head (after the one row above exists).
CREATE TRIGGER recovery_audit_head_definer_write AFTER INSERT OR UPDATE ON recovery_audit_head
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write('resolver_commit_manual');

-- The canonical content of a manual decision's audit link: resolver_commit_manual writes it,
-- `resolver audit verify` rebuilds it from the stored facts with the same functions, so the
-- two agree only while the facts are unchanged. json, not jsonb: the text keeps this order.
-- A signed fact (migration 0020_face_roles) adds who vouched for it: the token's issuer and key id and
-- the API's Ed25519 signature with its key id, so the chain carries what verify checks; a
-- fact recorded before signing began keeps its content as it was.
CREATE FUNCTION resolver_audit_authorization(
    p_user_id text, p_permission text, p_project_id text, p_project_version bigint,
    p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[],
    p_authorized_at_ms bigint, p_issuer text, p_token_kid text, p_signing_kid text,
    p_signature text)
RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_signature IS NULL THEN json_build_object(
        'user_id', p_user_id, 'permission', p_permission, 'project_id', p_project_id,
        'project_version', p_project_version, 'role_binding_version', p_role_binding_version,
        'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', p_authorized_at_ms)
    ELSE json_build_object(
        'user_id', p_user_id, 'permission', p_permission, 'project_id', p_project_id,
        'project_version', p_project_version, 'role_binding_version', p_role_binding_version,
        'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', p_authorized_at_ms,
        'issuer', p_issuer, 'token_kid', p_token_kid, 'signing_kid', p_signing_kid,
        'signature', p_signature) END
$$;

CREATE FUNCTION resolver_audit_content(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text,
    p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text,
    p_reason_code text, p_resolved_at_ms bigint, p_authorizations json)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT json_build_object(
        'v', 1, 'dispatch_id', p_dispatch_id, 'mutation_id', p_mutation_id,
        'source', 'manual', 'outcome', p_outcome, 'overridden_finding', p_finding,
        'evidence_digest', p_evidence_digest,
        'expected_execution_version', p_expected_execution_version,
        'actor_user_id', p_actor_user_id, 'reason_code', p_reason_code,
        'resolved_at_ms', p_resolved_at_ms, 'authorizations', p_authorizations)::text
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint,
                                 text, text, text, text),
    resolver_audit_content(text, text, text, text, text, bigint, text, text, bigint, json)
FROM PUBLIC;

-- Two people where it matters (migration 0013). A rule names an action type (exactly, or a
-- prefix ending in `*`, or `*` for every type) and a decision that needs a second person.
-- The rules live here, read by resolver_commit_manual, so no path that commits a manual
-- decision can skip them: the runtime role may read them, only the owner writes them.
CREATE TABLE recovery_two_person_rules (
    action_type_pattern text NOT NULL,
    decision text NOT NULL,
    CONSTRAINT pk_recovery_two_person_rules PRIMARY KEY (action_type_pattern, decision),
    CONSTRAINT ck_recovery_two_person_rules_pattern_shape
        CHECK (action_type_pattern ~ '^([a-z][a-z0-9_.-]{0,63}[*]?|[*])$'),
    CONSTRAINT ck_recovery_two_person_rules_decision_known
        CHECK (resolver_decision_settles(decision) IS NOT NULL)
);

-- The one reading of the rules: does this decision on this action type need two people?
CREATE FUNCTION resolver_needs_two_people(p_action_type text, p_outcome text)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (
        SELECT 1 FROM recovery_two_person_rules AS r
        WHERE resolver_decision_settles(r.decision) = p_outcome
          AND (r.action_type_pattern IN (p_action_type, '*')
               OR (right(r.action_type_pattern, 1) = '*'
                   AND left(p_action_type, length(r.action_type_pattern) - 1)
                       = left(r.action_type_pattern, -1))))
$$;

-- One proposal per first decision of a two-person case: who proposed what, fenced on which
-- execution version, until when; and how it ended (closed once, never reopened). At most
-- one open proposal per dispatch; resolver_commit_manual records at most 16 per dispatch.
-- The proposer's authorization fact is held here until a confirmation copies it into
-- recovery_authorizations next to the confirmer's. Pruned with its dispatch.
CREATE TABLE recovery_proposals (
    proposal_id bigint GENERATED BY DEFAULT AS IDENTITY,
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
    issuer text,
    token_kid text,
    signing_kid text,
    signature text,
    CONSTRAINT pk_recovery_proposals PRIMARY KEY (proposal_id),
    CONSTRAINT uq_recovery_proposals_mutation_id UNIQUE (mutation_id),
    CONSTRAINT uq_recovery_proposals_closed_mutation_id UNIQUE (closed_mutation_id),
    CONSTRAINT fk_recovery_proposals_dispatch_id FOREIGN KEY (dispatch_id)
        REFERENCES approved_action_dispatches (dispatch_id) ON DELETE CASCADE,
    CONSTRAINT ck_recovery_proposals_outcome_known
        CHECK (outcome = ANY (resolver_terminal_states())),
    CONSTRAINT ck_recovery_proposals_reason_code_shape
        CHECK (reason_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT ck_recovery_proposals_evidence_digest_hex
        CHECK (evidence_digest IS NULL OR evidence_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_proposals_close_reason_code_shape
        CHECK (close_reason_code IS NULL OR close_reason_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT ck_recovery_proposals_expires_after_proposed
        CHECK (expires_at_ms > proposed_at_ms),
    CONSTRAINT ck_recovery_proposals_closed_as_known
        CHECK (closed_as IN ('confirmed', 'withdrawn', 'rejected', 'voided', 'expired')),
    CONSTRAINT ck_recovery_proposals_closed_at_with_closed_as
        CHECK ((closed_as IS NULL) = (closed_at_ms IS NULL)),
    -- A person ends it (confirmed, withdrawn, rejected) with a mutation id of their own; the
    -- proposer only withdraws, and only someone else confirms or rejects.
    CONSTRAINT ck_recovery_proposals_closed_by_person
        CHECK (closed_as NOT IN ('confirmed', 'withdrawn', 'rejected')
               OR (closed_by IS NOT NULL AND closed_mutation_id IS NOT NULL
                   AND close_reason_code IS NOT NULL)),
    CONSTRAINT ck_recovery_proposals_second_person
        CHECK ((closed_as <> 'withdrawn' OR closed_by = proposed_by)
               AND (closed_as NOT IN ('confirmed', 'rejected') OR closed_by <> proposed_by)),
    -- The proposer's signed authorization fact (migration 0020_face_roles), copied into
    -- recovery_authorizations by the confirmation.
    CONSTRAINT ck_recovery_proposals_signed_whole
        CHECK ((signature IS NULL) = (signing_kid IS NULL) AND (signature IS NULL) = (issuer IS NULL)
               AND (signature IS NULL) = (token_kid IS NULL)),
    CONSTRAINT ck_recovery_proposals_signature_hex
        CHECK (signature IS NULL OR signature ~ '^[0-9a-f]{128}$')
);
-- The open proposal of a dispatch (at most one), and the void trigger's fast path.
CREATE UNIQUE INDEX ix_recovery_proposals_open ON recovery_proposals (dispatch_id)
    WHERE closed_as IS NULL;
-- Every proposal of a dispatch: the per-dispatch bound and the cascade of a pruned dispatch.
CREATE INDEX ix_recovery_proposals_dispatch_id ON recovery_proposals (dispatch_id);

-- A proposal is closed once: only the closing columns of an open row may change.
CREATE FUNCTION resolver_proposal_close_once() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    closing constant text[] := ARRAY['closed_as', 'closed_at_ms', 'closed_by',
                                     'closed_mutation_id', 'close_reason_code',
                                     'closed_auth_time_ms', 'closed_amr'];
BEGIN
    IF OLD.closed_as IS NOT NULL OR NEW.closed_as IS NULL
       OR (to_jsonb(NEW) - closing) IS DISTINCT FROM (to_jsonb(OLD) - closing) THEN
        RAISE EXCEPTION 'recovery_proposals: a proposal is closed once and never edited'
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER recovery_proposals_close_once BEFORE UPDATE ON recovery_proposals
    FOR EACH ROW EXECUTE FUNCTION resolver_proposal_close_once();
CREATE TRIGGER recovery_proposals_definer_write AFTER INSERT OR UPDATE ON recovery_proposals
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write(
        'resolver_commit_manual', 'resolver_proposal_close', 'resolver_proposals_void');

-- A new execution version (a renew, a completion, any resolution, a takeover) voids the
-- open proposal fenced on the old one, in the same transaction: a confirmation can only
-- ever follow the very state the proposer saw. One call per statement, and a probe of the
-- (nearly always empty) open index before anything else, so writers that never meet a
-- proposal pay next to nothing. SECURITY DEFINER: whoever updated the execution (the
-- runtime role, the executor protocol) need not write proposals themselves.
CREATE FUNCTION resolver_proposals_void() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM recovery_proposals AS p WHERE p.closed_as IS NULL) THEN
        RETURN NULL;
    END IF;
    UPDATE recovery_proposals AS p
    SET closed_as = 'voided', closed_at_ms = resolver_now_ms(NULL),
        close_reason_code = 'execution_changed'
    FROM changed AS n
    WHERE p.dispatch_id = n.dispatch_id AND p.closed_as IS NULL
      AND p.expected_execution_version <> n.version;
    RETURN NULL;
END
$$;
CREATE TRIGGER approved_action_executions_void_proposals AFTER UPDATE
    ON approved_action_executions REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_proposals_void();

REVOKE EXECUTE ON FUNCTION resolver_proposal_close_once(), resolver_proposals_void() FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION resolver_proposals_void() '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

-- Strong authentication: the `amr` values that count as a second factor. The Python side
-- keeps the same set (resolver.human.manual.STRONG_AMR; a test compares the two).
CREATE FUNCTION resolver_strong_amr(p_amr text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(p_amr && ARRAY['mfa', 'hwk', 'swk', 'otp', 'fido']::text[], false)
$$;

-- The rule in the schema, whatever wrote the rows: at commit, a manual resolution carries
-- signed authorization facts of as many different people as the rules require (one, or two),
-- each strongly authenticated and still bound to the permission on the dispatch's project at
-- exactly the project and role-binding versions the fact names. (Deferred: the facts are
-- inserted after the resolution, in the same statement.)
-- SECURITY DEFINER: it fires at COMMIT as whoever commits, who reads none of these tables.
CREATE FUNCTION resolver_two_people_present() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_action_type text;
    v_project_id text;
    v_people bigint;
    v_needed bigint;
BEGIN
    IF resolver_importing_history(TG_RELID) THEN
        RETURN NULL;  -- the owner's import of history recorded elsewhere
    END IF;
    SELECT d.action_type, d.project_id INTO v_action_type, v_project_id
    FROM approved_action_dispatches AS d WHERE d.dispatch_id = NEW.dispatch_id;
    SELECT count(DISTINCT a.user_id) INTO v_people
    FROM recovery_authorizations AS a
    JOIN recovery_role_bindings AS b
      ON b.project_id = a.project_id AND b.user_id = a.user_id
     AND b.permission = 'approval.recover' AND b.version = a.role_binding_version
    JOIN recovery_projects AS p
      ON p.project_id = a.project_id AND p.version = a.project_version
    WHERE a.mutation_id = NEW.mutation_id AND a.project_id = v_project_id
      AND a.signature IS NOT NULL AND resolver_strong_amr(a.amr);
    v_needed := CASE WHEN resolver_needs_two_people(v_action_type, NEW.outcome) THEN 2
                     ELSE 1 END;
    IF v_people < v_needed THEN
        RAISE EXCEPTION 'dispatch % needs % people for this decision: its resolution has % signed authorizations of currently bound, strongly authenticated people',
            quote_literal(NEW.dispatch_id), v_needed, v_people
            USING ERRCODE = 'check_violation',
                  CONSTRAINT = 'ck_recovery_resolutions_two_people';
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER approved_action_recovery_resolutions_two_people
    AFTER INSERT ON approved_action_recovery_resolutions
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.source = 'manual')
    EXECUTE FUNCTION resolver_two_people_present();

REVOKE EXECUTE ON FUNCTION resolver_needs_two_people(text, text), resolver_two_people_present(),
    resolver_strong_amr(text[])
FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION resolver_two_people_present() '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;
