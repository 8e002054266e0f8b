-- The human decision: the audit chain over manual decisions, two people, the guards that let
-- only the decision functions write what a decision records.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

CREATE TRIGGER recovery_audit_chain_immutable BEFORE UPDATE OR DELETE ON recovery_audit_chain
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER recovery_audit_chain_definer_write AFTER INSERT ON recovery_audit_chain
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write('resolver_commit_manual');

-- Only a decision moves the head (after the one row above exists).
CREATE TRIGGER recovery_audit_head_definer_write AFTER INSERT OR UPDATE ON recovery_audit_head
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write('resolver_commit_manual');

-- The canonical content of a manual decision's audit link: resolver_commit_manual writes it,
-- `resolver audit verify` rebuilds it from the stored facts with the same functions, so the
-- two agree only while the facts are unchanged. json, not jsonb: the text keeps this order.
-- A signed fact adds who vouched for it: the token's issuer and key id and
-- the API's Ed25519 signature with its key id, so the chain carries what verify checks; a
-- fact recorded before signing began keeps its content as it was.
CREATE OR REPLACE FUNCTION resolver_audit_authorization(
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

CREATE OR REPLACE FUNCTION resolver_audit_content(
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

-- The one reading of the rules: does this decision on this action type need two people?
CREATE OR REPLACE FUNCTION resolver_needs_two_people(p_action_type text, p_outcome text)
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

-- A proposal is closed once: only the closing columns of an open row may change.
CREATE OR REPLACE FUNCTION resolver_proposal_close_once() RETURNS trigger
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
CREATE OR REPLACE FUNCTION resolver_proposals_void() RETURNS trigger
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
CREATE OR REPLACE FUNCTION resolver_strong_amr(p_amr text[])
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
CREATE OR REPLACE FUNCTION resolver_two_people_present() RETURNS trigger
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
