-- The human decision: the audit chain over manual decisions, two people, the guards that let
-- only the decision functions write what a decision records.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

CREATE TRIGGER recovery_audit_chain_immutable BEFORE UPDATE OR DELETE ON recovery_audit_chain
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER recovery_audit_chain_definer_write AFTER INSERT ON recovery_audit_chain
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write(
        'resolver_commit_manual', 'resolver_proposal_close');

-- Only a person's act (a decision, a reject, a withdraw) moves the head (after the one row
-- above exists).
CREATE TRIGGER recovery_audit_head_definer_write AFTER INSERT OR UPDATE ON recovery_audit_head
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write(
        'resolver_commit_manual', 'resolver_proposal_close');

-- The acts a person's signed fact may name, each consumed by the one function that records it:
-- a decision alone (decide), the first of two (propose) and the second (confirm) by
-- resolver_commit_manual; ending a proposal without a decision (reject, withdraw) by
-- resolver_proposal_close. Python keeps the same set (resolver.core.domain.Act; a test compares
-- the two).
CREATE OR REPLACE FUNCTION resolver_fact_acts() RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN ARRAY['decide', 'propose', 'confirm', 'reject', 'withdraw'];
END
$$;

-- The canonical content of an audit link: resolver_commit_manual and resolver_proposal_close
-- write it, `resolver audit verify` rebuilds it from the stored facts with the same functions,
-- so the two agree only while the facts are unchanged. json, not jsonb: the text keeps this
-- order.
-- One person's authorization fact. A signed fact adds who vouched for it (the token's issuer
-- and key id) and the API's Ed25519 signature with its key id; a fact that names its act
-- (payload v2) adds the act, the mutation id it was signed for, the proposal it closes and when
-- the API verified the token. A fact recorded before either keeps its content as it was.
CREATE OR REPLACE FUNCTION resolver_audit_authorization(
    p_user_id text, p_permission text, p_project_id text, p_project_version bigint,
    p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[],
    p_authorized_at_ms bigint, p_issuer text, p_token_kid text, p_signing_kid text,
    p_signature text, p_act text, p_act_mutation_id text, p_proposal_id bigint,
    p_verified_at_ms bigint)
RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_signature IS NULL THEN json_build_object(
        'user_id', p_user_id, 'permission', p_permission, 'project_id', p_project_id,
        'project_version', p_project_version, 'role_binding_version', p_role_binding_version,
        'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', p_authorized_at_ms)
    WHEN p_act IS NULL THEN json_build_object(
        'user_id', p_user_id, 'permission', p_permission, 'project_id', p_project_id,
        'project_version', p_project_version, 'role_binding_version', p_role_binding_version,
        'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', p_authorized_at_ms,
        'issuer', p_issuer, 'token_kid', p_token_kid, 'signing_kid', p_signing_kid,
        'signature', p_signature)
    ELSE json_build_object(
        'user_id', p_user_id, 'permission', p_permission, 'project_id', p_project_id,
        'project_version', p_project_version, 'role_binding_version', p_role_binding_version,
        'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', p_authorized_at_ms,
        'issuer', p_issuer, 'token_kid', p_token_kid, 'signing_kid', p_signing_kid,
        'signature', p_signature, 'act', p_act, 'mutation_id', p_act_mutation_id,
        'proposal_id', p_proposal_id, 'verified_at_ms', p_verified_at_ms) END
$$;

-- The proposal a link's act confirms or closes, as the link carries it: which proposal, what
-- it proposed, who, when, until when.
CREATE OR REPLACE FUNCTION resolver_audit_proposal(
    p_proposal_id bigint, p_mutation_id text, p_outcome text,
    p_expected_execution_version bigint, p_evidence_digest text, p_reason_code text,
    p_proposed_by text, p_proposed_at_ms bigint, p_expires_at_ms bigint)
RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT json_build_object(
        'proposal_id', p_proposal_id, 'mutation_id', p_mutation_id, 'outcome', p_outcome,
        'expected_execution_version', p_expected_execution_version,
        'evidence_digest', p_evidence_digest, 'reason_code', p_reason_code,
        'proposed_by', p_proposed_by, 'proposed_at_ms', p_proposed_at_ms,
        'expires_at_ms', p_expires_at_ms)
$$;

-- A decision's link: the resolution and its authorization facts; since facts name their act
-- (v2), also the event (`decide`, or `confirm` of a proposal) and the proposal it confirmed.
CREATE OR REPLACE FUNCTION resolver_audit_content(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text,
    p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text,
    p_reason_code text, p_resolved_at_ms bigint, p_authorizations json, p_event text,
    p_proposal json)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_event IS NULL THEN json_build_object(
        'v', 1, 'dispatch_id', p_dispatch_id, 'mutation_id', p_mutation_id,
        'source', 'manual', 'outcome', p_outcome, 'overridden_finding', p_finding,
        'evidence_digest', p_evidence_digest,
        'expected_execution_version', p_expected_execution_version,
        'actor_user_id', p_actor_user_id, 'reason_code', p_reason_code,
        'resolved_at_ms', p_resolved_at_ms, 'authorizations', p_authorizations)::text
    ELSE json_build_object(
        'v', 2, 'event', p_event, 'dispatch_id', p_dispatch_id, 'mutation_id', p_mutation_id,
        'source', 'manual', 'outcome', p_outcome, 'overridden_finding', p_finding,
        'evidence_digest', p_evidence_digest,
        'expected_execution_version', p_expected_execution_version,
        'actor_user_id', p_actor_user_id, 'reason_code', p_reason_code,
        'resolved_at_ms', p_resolved_at_ms, 'proposal', p_proposal,
        'authorizations', p_authorizations)::text END
$$;

-- The content of the link of decision `p_mutation_id`, from the stored resolution, its facts
-- and the proposal a confirmation closed; NULL once retention removed the decision.
CREATE OR REPLACE FUNCTION resolver_audit_decision(p_mutation_id text)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT resolver_audit_content(
        r.dispatch_id, r.mutation_id, r.outcome, r.finding, r.evidence_digest,
        r.expected_execution_version, r.actor_user_id, r.reason_code, r.resolved_at_ms,
        f.facts, f.event,
        (SELECT resolver_audit_proposal(
                    p.proposal_id, p.mutation_id, p.outcome, p.expected_execution_version,
                    p.evidence_digest, p.reason_code, p.proposed_by, p.proposed_at_ms,
                    p.expires_at_ms)
         FROM recovery_proposals AS p WHERE p.proposal_id = f.proposal_id))
    FROM approved_action_recovery_resolutions AS r
    CROSS JOIN LATERAL (
        SELECT json_agg(resolver_audit_authorization(
                   a.user_id, a.permission, a.project_id, a.project_version,
                   a.role_binding_version, a.auth_time_ms, a.amr, a.authorized_at_ms,
                   a.issuer, a.token_kid, a.signing_kid, a.signature, a.act,
                   a.act_mutation_id, a.proposal_id, a.verified_at_ms)
                   ORDER BY a.user_id) AS facts,
               CASE WHEN bool_or(a.act = 'confirm') THEN 'confirm'
                    WHEN bool_or(a.act IS NOT NULL) THEN 'decide' END AS event,
               max(a.proposal_id) FILTER (WHERE a.act = 'confirm') AS proposal_id
        FROM recovery_authorizations AS a WHERE a.mutation_id = r.mutation_id) AS f
    WHERE r.mutation_id = p_mutation_id AND r.source = 'manual'
$$;

-- The content of the link of the reject or withdraw `p_mutation_id`: the proposal it ended,
-- the proposer's fact and the closer's; NULL once retention removed the proposal.
CREATE OR REPLACE FUNCTION resolver_audit_close(p_mutation_id text)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'v', 2, 'event', c.act, 'dispatch_id', p.dispatch_id,
        'mutation_id', p.closed_mutation_id, 'reason_code', p.close_reason_code,
        'closed_at_ms', p.closed_at_ms,
        'proposal', resolver_audit_proposal(
            p.proposal_id, p.mutation_id, p.outcome, p.expected_execution_version,
            p.evidence_digest, p.reason_code, p.proposed_by, p.proposed_at_ms,
            p.expires_at_ms),
        'authorizations', json_build_array(
            resolver_audit_authorization(
                p.proposed_by, 'approval.recover', p.project_id, p.project_version,
                p.role_binding_version, p.auth_time_ms, p.amr, p.proposed_at_ms, p.issuer,
                p.token_kid, p.signing_kid, p.signature,
                CASE WHEN p.verified_at_ms IS NOT NULL THEN 'propose' END,
                CASE WHEN p.verified_at_ms IS NOT NULL THEN p.mutation_id END, NULL,
                p.verified_at_ms),
            resolver_audit_authorization(
                p.closed_by, 'approval.recover', p.project_id, p.closed_project_version,
                p.closed_role_binding_version, p.closed_auth_time_ms, p.closed_amr,
                p.closed_at_ms, p.closed_issuer, p.closed_token_kid, p.closed_signing_kid,
                p.closed_signature,
                CASE WHEN p.closed_verified_at_ms IS NOT NULL THEN c.act END,
                CASE WHEN p.closed_verified_at_ms IS NOT NULL THEN p.closed_mutation_id END,
                CASE WHEN p.closed_verified_at_ms IS NOT NULL THEN p.proposal_id END,
                p.closed_verified_at_ms)))::text
    FROM recovery_proposals AS p
    CROSS JOIN LATERAL (
        SELECT CASE p.closed_as WHEN 'rejected' THEN 'reject' ELSE 'withdraw' END AS act) AS c
    WHERE p.closed_mutation_id = p_mutation_id AND p.closed_as IN ('rejected', 'withdrawn')
$$;

-- Appends one link after the head: moving the one head row takes its lock, so concurrent acts
-- link one after another; after a wait, READ COMMITTED re-reads the head that committed first
-- and this link's hash is computed from it. The head is the last row locked: the lock order
-- (execution, control, inserts, head) is the same for every writer. Run only inside the two
-- functions that record a person's act (the guards on the chain and the head look for them).
CREATE OR REPLACE FUNCTION resolver_audit_append(
    p_mutation_id text, p_dispatch_id text, p_content text, p_recorded_at_ms bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    WITH head AS (
        UPDATE recovery_audit_head AS h
        SET seq = h.seq + 1,
            prev_hash = h.hash,
            hash = encode(sha256(convert_to(h.hash || p_content, 'UTF8')), 'hex')
        WHERE h.id = 1
        RETURNING h.seq, h.prev_hash, h.hash
    )
    INSERT INTO recovery_audit_chain (
        seq, mutation_id, dispatch_id, content, prev_hash, hash, recorded_at_ms)
    SELECT h.seq, p_mutation_id, p_dispatch_id, p_content, h.prev_hash, h.hash,
           p_recorded_at_ms
    FROM head AS h
    RETURNING seq
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint,
                                 text, text, text, text, text, text, bigint, bigint),
    resolver_audit_proposal(bigint, text, text, bigint, text, text, text, bigint, bigint),
    resolver_audit_content(text, text, text, text, text, bigint, text, text, bigint, json, text,
                           json),
    resolver_audit_decision(text),
    resolver_audit_close(text),
    resolver_audit_append(text, text, text, bigint)
FROM PUBLIC;

-- The bounds an act is held to: the policy writer's row, or tighter ones the caller asks for
-- (NULL: the policy's). A looser bound is refused (RS005): the database, not the caller, sets
-- how old a strong authentication may be and how long a proposal waits.
CREATE OR REPLACE FUNCTION resolver_act_bounds(p_max_auth_age_ms bigint, p_proposal_ttl_ms bigint)
RETURNS TABLE (max_auth_age_ms bigint, proposal_ttl_ms bigint, clock_leeway_ms bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    policy record;
BEGIN
    SELECT p.max_auth_age_ms, p.proposal_ttl_ms, p.clock_leeway_ms INTO policy
    FROM recovery_decision_policy AS p WHERE p.id = 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'recovery_decision_policy has no row: no act can be bounded'
            USING ERRCODE = 'RS005';
    END IF;
    IF p_max_auth_age_ms > policy.max_auth_age_ms OR p_max_auth_age_ms < 0 THEN
        RAISE EXCEPTION 'p_max_auth_age_ms % is looser than the policy''s % ms',
            p_max_auth_age_ms, policy.max_auth_age_ms
            USING ERRCODE = 'RS005', HINT = 'pass NULL or a tighter bound';
    END IF;
    IF p_proposal_ttl_ms > policy.proposal_ttl_ms OR p_proposal_ttl_ms < 1000 THEN
        RAISE EXCEPTION 'p_proposal_ttl_ms % is not within 1 s and the policy''s % ms',
            p_proposal_ttl_ms, policy.proposal_ttl_ms
            USING ERRCODE = 'RS005', HINT = 'pass NULL or a tighter bound';
    END IF;
    max_auth_age_ms := coalesce(p_max_auth_age_ms, policy.max_auth_age_ms);
    proposal_ttl_ms := coalesce(p_proposal_ttl_ms, policy.proposal_ttl_ms);
    clock_leeway_ms := policy.clock_leeway_ms;
    RETURN NEXT;
END
$$;

-- What every signed fact must carry before anything is read: a strong authentication method,
-- the API's signature with its key id, the token's issuer and key id, and when the API
-- verified the token (RS005 otherwise).
CREATE OR REPLACE FUNCTION resolver_fact_shape(
    p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text,
    p_verified_at_ms bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT resolver_strong_amr(p_amr) THEN
        RAISE EXCEPTION 'p_amr must name a strong authentication method' USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_signature_hex(p_signature)
                    AND resolver_is_signing_kid(p_signing_kid)
                    AND length(p_issuer) BETWEEN 1 AND 512 AND p_issuer !~ '[[:cntrl:]]'
                    AND length(p_token_kid) BETWEEN 1 AND 256
                    AND p_token_kid !~ '[[:cntrl:]]'
                    AND p_verified_at_ms IS NOT NULL, false) THEN
        RAISE EXCEPTION 'an act needs its signed fact (p_issuer, p_token_kid, p_signing_kid, p_signature, p_verified_at_ms)'
            USING ERRCODE = 'RS005';
    END IF;
END
$$;

-- Once only: a fact whose mutation id or signature the database already recorded (a
-- decision, a proposal, a confirmation, a reject or a withdraw) is refused (RS007), whatever
-- it is passed as now. The caller tells a replay of its own request from a reuse.
CREATE OR REPLACE FUNCTION resolver_fact_unused(p_mutation_id text, p_signature text)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS r
               WHERE r.mutation_id = p_mutation_id)
       OR EXISTS (SELECT 1 FROM recovery_proposals AS rp WHERE rp.mutation_id = p_mutation_id)
       OR EXISTS (SELECT 1 FROM recovery_proposals AS rp
                  WHERE rp.closed_mutation_id = p_mutation_id) THEN
        RAISE EXCEPTION 'mutation id % was already recorded: a signed fact is consumed once',
            quote_literal(p_mutation_id) USING ERRCODE = 'RS007';
    END IF;
    IF EXISTS (SELECT 1 FROM recovery_authorizations AS a WHERE a.signature = p_signature)
       OR EXISTS (SELECT 1 FROM recovery_proposals AS rp WHERE rp.signature = p_signature)
       OR EXISTS (SELECT 1 FROM recovery_proposals AS rp
                  WHERE rp.closed_signature = p_signature) THEN
        RAISE EXCEPTION 'this signature was already recorded: a signed fact is consumed once'
            USING ERRCODE = 'RS007';
    END IF;
END
$$;

-- A fact is fresh: the API verified its token (and read the database clock) at most the
-- policy's leeway away from now. An old fact replayed later is refused (RS007).
CREATE OR REPLACE FUNCTION resolver_fact_fresh(
    p_verified_at_ms bigint, p_now_ms bigint, p_clock_leeway_ms bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_verified_at_ms NOT BETWEEN p_now_ms - p_clock_leeway_ms
                                AND p_now_ms + p_clock_leeway_ms THEN
        RAISE EXCEPTION 'the fact was verified at % ms, more than % ms from the database clock (%)',
            p_verified_at_ms, p_clock_leeway_ms, p_now_ms USING ERRCODE = 'RS007';
    END IF;
END
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_act_bounds(bigint, bigint),
    resolver_fact_shape(text[], text, text, text, text, bigint),
    resolver_fact_unused(text, text),
    resolver_fact_fresh(bigint, bigint, bigint)
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
                                     'closed_auth_time_ms', 'closed_amr',
                                     'closed_project_version', 'closed_role_binding_version',
                                     'closed_issuer', 'closed_token_kid', 'closed_signing_kid',
                                     'closed_signature', 'closed_verified_at_ms'];
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
        'resolver_commit_manual', 'resolver_proposal_close', 'resolver_executions_changed');

-- A new execution version voids the open proposal fenced on the old one: the executions'
-- statement trigger does it (resolver_executions_changed, 04_executor_protocol.sql).

REVOKE EXECUTE ON FUNCTION resolver_proposal_close_once() FROM PUBLIC;

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
