-- Each face its own database role: the replicas and the API hold no write privilege on what a
-- decision records, every such write goes through a SECURITY DEFINER function that checks it
-- (a trigger on each fact table looks for that function on the call stack), authorization
-- facts carry the API's Ed25519 signature, and the prune is the only path past the delete
-- guards (on the call stack, no longer a session flag). resolver/db/grants.sql, run after
-- this by `resolver migrate --grants`, grants the new role its functions.

-- Signed authorization facts: who vouched for the person (the verified token's issuer and
-- key id) and the API's signature over the fact. Facts recorded before stay unsigned.
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
    ADD COLUMN issuer text,
    ADD COLUMN token_kid text,
    ADD COLUMN signing_kid text,
    ADD COLUMN signature text,
    ADD CONSTRAINT ck_recovery_proposals_signed_whole
        CHECK ((signature IS NULL) = (signing_kid IS NULL) AND (signature IS NULL) = (issuer IS NULL)
               AND (signature IS NULL) = (token_kid IS NULL)),
    ADD CONSTRAINT ck_recovery_proposals_signature_hex
        CHECK (signature IS NULL OR signature ~ '^[0-9a-f]{128}$');

-- The range of audit links each prune run removed.
ALTER TABLE recovery_prune_runs
    ADD COLUMN audit_first_seq BIGINT,
    ADD COLUMN audit_last_seq BIGINT,
    ADD CONSTRAINT ck_recovery_prune_runs_audit_range CHECK ((audit_first_seq IS NULL) = (audit_last_seq IS NULL) AND audit_first_seq <= audit_last_seq);

-- The delete guards: the prune function on the call stack instead of a session flag.
CREATE OR REPLACE FUNCTION resolver_reject_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stack text;
BEGIN
    -- Nested, so an UPDATE never evaluates the check (plpgsql does not short-circuit AND).
    IF TG_OP = 'DELETE' THEN
        GET DIAGNOSTICS stack = PG_CONTEXT;
        IF stack ~ ('(^|\n)PL/pgSQL function (' || TG_TABLE_SCHEMA
                    || '\.)?resolver_prune_batch\(') THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION '% is insert-only: % rejected', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;

CREATE OR REPLACE FUNCTION resolver_guard_run_origin() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stack text;
BEGIN
    -- Inside resolver_prune_batch only (see resolver_reject_mutation).
    IF TG_OP = 'DELETE' THEN
        GET DIAGNOSTICS stack = PG_CONTEXT;
        IF stack ~ ('(^|\n)PL/pgSQL function (' || TG_TABLE_SCHEMA
                    || '\.)?resolver_prune_batch\(') THEN
            RETURN OLD;
        END IF;
    END IF;
    IF TG_OP = 'DELETE'
       OR (NEW.run_id, NEW.dispatch_id, NEW.idempotency_key, NEW.project_id,
           NEW.action_digest, NEW.attempt, NEW.created_at_ms)
          IS DISTINCT FROM
          (OLD.run_id, OLD.dispatch_id, OLD.idempotency_key, OLD.project_id,
           OLD.action_digest, OLD.attempt, OLD.created_at_ms)
       OR OLD.state <> 'running' THEN
        RAISE EXCEPTION 'run_origin_facts: origin is immutable and state settles once'
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$;

-- The write guard of the fact tables.
CREATE FUNCTION resolver_guard_definer_write() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stack text;
BEGIN
    IF TG_OP = 'INSERT' AND resolver_importing_history(TG_RELID) THEN
        RETURN NULL;
    END IF;
    GET DIAGNOSTICS stack = PG_CONTEXT;
    IF NOT EXISTS (
        SELECT 1 FROM unnest(TG_ARGV) AS f
        WHERE stack ~ ('(^|\n)(PL/pgSQL function (' || TG_TABLE_SCHEMA || '\.)?' || f
                       || '\(|SQL function "' || f || '")')
    ) THEN
        RAISE EXCEPTION '% of % only through %', TG_OP, TG_TABLE_NAME,
            array_to_string(TG_ARGV, ' or ')
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$$;

REVOKE EXECUTE ON FUNCTION resolver_guard_definer_write() FROM PUBLIC;

CREATE TRIGGER approved_action_recovery_resolutions_definer_write
    AFTER INSERT ON approved_action_recovery_resolutions
    FOR EACH STATEMENT
    EXECUTE FUNCTION resolver_guard_definer_write('resolver_commit_automatic', 'resolver_commit_manual');

CREATE TRIGGER recovery_authorizations_definer_write
    AFTER INSERT ON recovery_authorizations
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write('resolver_commit_manual');

CREATE TRIGGER recovery_audit_chain_definer_write AFTER INSERT ON recovery_audit_chain
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write('resolver_commit_manual');

CREATE TRIGGER recovery_audit_head_definer_write AFTER INSERT OR UPDATE ON recovery_audit_head
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write('resolver_commit_manual');

CREATE TRIGGER recovery_proposals_definer_write AFTER INSERT OR UPDATE ON recovery_proposals
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write(
        'resolver_commit_manual', 'resolver_proposal_close', 'resolver_proposals_void');

CREATE TRIGGER recovery_late_evidence_definer_write AFTER INSERT ON recovery_late_evidence
    FOR EACH STATEMENT
    EXECUTE FUNCTION resolver_guard_definer_write('resolver_record_late_evidence');

-- The audit content of a signed fact carries its signature.
DROP FUNCTION resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint);
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

REVOKE EXECUTE ON FUNCTION
    resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint,
                                 text, text, text, text)
FROM PUBLIC;

-- Strong authentication and the fact rule at commit.
CREATE FUNCTION resolver_strong_amr(p_amr text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(p_amr && ARRAY['mfa', 'hwk', 'swk', 'otp', 'fido']::text[], false)
$$;

REVOKE EXECUTE ON FUNCTION resolver_strong_amr(text[]) FROM PUBLIC;

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

-- The writers run as the owner.
ALTER FUNCTION resolver_commit_automatic(json, bigint) SECURITY DEFINER;
ALTER FUNCTION resolver_record_late_evidence(json, text, bigint, bigint) SECURITY DEFINER;
ALTER FUNCTION resolver_proposal_close(text, text, text, text, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint) SECURITY DEFINER;

DROP FUNCTION resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint, bigint);
CREATE FUNCTION resolver_commit_manual(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text,
    p_reason_code text, p_expected_execution_version bigint, p_user_id text, p_project_id text,
    p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint,
    p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text,
    p_max_auth_age_ms bigint, p_clock_leeway_ms bigint,
    p_now_ms bigint DEFAULT NULL, p_proposal_ttl_ms bigint DEFAULT 3600000
)
RETURNS TABLE (dispatch_id text, version bigint, result text, proposal_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    v_version bigint;
    v_action_type text;
    v_id bigint;
    prop recovery_proposals%ROWTYPE;
BEGIN
    IF p_proposal_ttl_ms IS NULL OR p_proposal_ttl_ms NOT BETWEEN 1000 AND 86400000 THEN
        RAISE EXCEPTION 'p_proposal_ttl_ms must be 1 s to 24 h' USING ERRCODE = 'RS005';
    END IF;
    IF NOT resolver_strong_amr(p_amr) THEN
        RAISE EXCEPTION 'p_amr must name a strong authentication method' USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(p_signature ~ '^[0-9a-f]{128}$'
                    AND p_signing_kid ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'
                    AND length(p_issuer) BETWEEN 1 AND 512 AND p_issuer !~ '[[:cntrl:]]'
                    AND length(p_token_kid) BETWEEN 1 AND 256
                    AND p_token_kid !~ '[[:cntrl:]]', false) THEN
        RAISE EXCEPTION 'a decision needs its signed authorization fact (p_issuer, p_token_kid, p_signing_kid, p_signature)'
            USING ERRCODE = 'RS005';
    END IF;
    PERFORM 1
    FROM recovery_role_bindings AS b
    JOIN recovery_projects AS p USING (project_id)
    WHERE b.project_id = p_project_id AND b.user_id = p_user_id
      AND b.permission = 'approval.recover'
      AND b.version = p_role_binding_version AND p.version = p_project_version
    FOR SHARE OF b, p;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The execution row first: the lock order of every writer (execution, control, inserts,
    -- head). It also serialises the two people of one case.
    SELECT e.version, d.action_type INTO v_version, v_action_type
    FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d ON d.dispatch_id = e.dispatch_id
    WHERE e.dispatch_id = p_dispatch_id AND d.project_id = p_project_id
      AND e.version = p_expected_execution_version AND e.state = 'executing'
    FOR UPDATE OF e;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    now_ms := resolver_now_ms(p_now_ms);
    IF NOT (p_auth_time_ms >= now_ms - p_max_auth_age_ms
            AND p_auth_time_ms <= now_ms + p_clock_leeway_ms)
       OR NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                      WHERE e.dispatch_id = p_dispatch_id AND e.lease_expires_at_ms <= now_ms)
       OR NOT EXISTS (SELECT 1 FROM approved_action_recovery_controls AS oc
                      WHERE oc.dispatch_id = p_dispatch_id AND oc.status <> 'resolved') THEN
        RETURN;
    END IF;
    SELECT * INTO prop FROM recovery_proposals AS rp
    WHERE rp.dispatch_id = p_dispatch_id AND rp.closed_as IS NULL
    FOR UPDATE;
    IF prop.proposal_id IS NOT NULL AND prop.expires_at_ms <= now_ms THEN
        UPDATE recovery_proposals AS rp SET closed_as = 'expired', closed_at_ms = now_ms
        WHERE rp.proposal_id = prop.proposal_id;
        prop := NULL;
    END IF;
    -- A mutation id names one fact: a used one writes nothing here (the caller tells a
    -- replay from a reuse), except the proposer resending its open proposal.
    IF EXISTS (SELECT 1 FROM recovery_proposals AS rp
               WHERE rp.mutation_id = p_mutation_id OR rp.closed_mutation_id = p_mutation_id)
       OR EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS r
                  WHERE r.mutation_id = p_mutation_id) THEN
        IF prop.mutation_id = p_mutation_id AND prop.proposed_by = p_user_id
           AND prop.outcome = p_outcome AND prop.reason_code = p_reason_code
           AND prop.evidence_digest IS NOT DISTINCT FROM p_evidence_digest THEN
            RETURN QUERY SELECT p_dispatch_id, v_version, 'proposed'::text, prop.proposal_id;
        END IF;
        RETURN;
    END IF;
    IF prop.proposal_id IS NULL AND NOT resolver_needs_two_people(v_action_type, p_outcome) THEN
        -- One person suffices.
        RETURN QUERY
        SELECT s.dispatch_id, s.version, 'committed'::text, NULL::bigint
        FROM resolver_settle_manual(
            p_dispatch_id, p_mutation_id, p_outcome, p_evidence_digest, p_reason_code,
            p_expected_execution_version, p_user_id, now_ms,
            json_build_array(json_build_object(
                'user_id', p_user_id, 'project_id', p_project_id,
                'project_version', p_project_version,
                'role_binding_version', p_role_binding_version,
                'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', now_ms,
                'issuer', p_issuer, 'token_kid', p_token_kid, 'signing_kid', p_signing_kid,
                'signature', p_signature)))
            AS s;
        RETURN;
    END IF;
    IF prop.proposal_id IS NULL THEN
        -- Bounded: a case that needed 16 proposals needs a conversation, not a 17th.
        IF (SELECT count(*) FROM recovery_proposals AS rp
            WHERE rp.dispatch_id = p_dispatch_id) >= 16 THEN
            RETURN QUERY SELECT p_dispatch_id, v_version, 'proposal_limit'::text, NULL::bigint;
            RETURN;
        END IF;
        INSERT INTO recovery_proposals AS rp (
            dispatch_id, mutation_id, outcome, expected_execution_version, reason_code,
            evidence_digest, proposed_by, project_id, project_version, role_binding_version,
            auth_time_ms, amr, proposed_at_ms, expires_at_ms, issuer, token_kid, signing_kid,
            signature)
        VALUES (p_dispatch_id, p_mutation_id, p_outcome, p_expected_execution_version,
                p_reason_code, p_evidence_digest, p_user_id, p_project_id, p_project_version,
                p_role_binding_version, p_auth_time_ms, p_amr, now_ms,
                now_ms + p_proposal_ttl_ms, p_issuer, p_token_kid, p_signing_kid, p_signature)
        RETURNING rp.proposal_id INTO v_id;
        RETURN QUERY SELECT p_dispatch_id, v_version, 'proposed'::text, v_id;
        RETURN;
    END IF;
    IF prop.proposed_by = p_user_id THEN
        RETURN QUERY
        SELECT p_dispatch_id, v_version, 'second_person_required'::text, prop.proposal_id;
        RETURN;
    END IF;
    IF prop.outcome <> p_outcome OR prop.evidence_digest IS DISTINCT FROM p_evidence_digest
       OR prop.expected_execution_version <> v_version THEN
        UPDATE recovery_proposals AS rp
        SET closed_as = 'rejected', closed_at_ms = now_ms, closed_by = p_user_id,
            closed_mutation_id = p_mutation_id, close_reason_code = p_reason_code,
            closed_auth_time_ms = p_auth_time_ms, closed_amr = p_amr
        WHERE rp.proposal_id = prop.proposal_id;
        RETURN QUERY SELECT p_dispatch_id, v_version, 'rejected'::text, prop.proposal_id;
        RETURN;
    END IF;
    -- The proposer must still hold the permission it proposed with.
    PERFORM 1
    FROM recovery_role_bindings AS b
    JOIN recovery_projects AS p USING (project_id)
    WHERE b.project_id = prop.project_id AND b.user_id = prop.proposed_by
      AND b.permission = 'approval.recover'
      AND b.version = prop.role_binding_version AND p.version = prop.project_version
    FOR SHARE OF b, p;
    IF NOT FOUND THEN
        UPDATE recovery_proposals AS rp
        SET closed_as = 'voided', closed_at_ms = now_ms, close_reason_code = 'grant_changed'
        WHERE rp.proposal_id = prop.proposal_id;
        RETURN QUERY SELECT p_dispatch_id, v_version, 'voided'::text, prop.proposal_id;
        RETURN;
    END IF;
    -- Confirmed: closed before the settle, whose version bump would otherwise void it.
    UPDATE recovery_proposals AS rp
    SET closed_as = 'confirmed', closed_at_ms = now_ms, closed_by = p_user_id,
        closed_mutation_id = p_mutation_id, close_reason_code = p_reason_code,
        closed_auth_time_ms = p_auth_time_ms, closed_amr = p_amr
    WHERE rp.proposal_id = prop.proposal_id;
    RETURN QUERY
    SELECT s.dispatch_id, s.version, 'committed'::text, prop.proposal_id
    FROM resolver_settle_manual(
        p_dispatch_id, p_mutation_id, p_outcome, p_evidence_digest, prop.reason_code,
        p_expected_execution_version, prop.proposed_by, now_ms,
        json_build_array(
            json_build_object(
                'user_id', prop.proposed_by, 'project_id', prop.project_id,
                'project_version', prop.project_version,
                'role_binding_version', prop.role_binding_version,
                'auth_time_ms', prop.auth_time_ms, 'amr', prop.amr,
                'authorized_at_ms', prop.proposed_at_ms, 'issuer', prop.issuer,
                'token_kid', prop.token_kid, 'signing_kid', prop.signing_kid,
                'signature', prop.signature),
            json_build_object(
                'user_id', p_user_id, 'project_id', p_project_id,
                'project_version', p_project_version,
                'role_binding_version', p_role_binding_version,
                'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', now_ms,
                'issuer', p_issuer, 'token_kid', p_token_kid, 'signing_kid', p_signing_kid,
                'signature', p_signature)))
        AS s;
END
$$;

REVOKE EXECUTE ON FUNCTION resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint, bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION resolver_settle_manual(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text,
    p_reason_code text, p_expected_execution_version bigint, p_actor_user_id text,
    p_now_ms bigint, p_authorizations json
)
RETURNS TABLE (dispatch_id text, version bigint)
LANGUAGE sql VOLATILE AS $$
    WITH settled AS (
        UPDATE approved_action_executions AS e
        SET state = p_outcome,
            version = e.version + 1,
            finished_at_ms = p_now_ms,
            evidence_digest = p_evidence_digest
        WHERE e.dispatch_id = p_dispatch_id AND e.version = p_expected_execution_version
          AND e.state = 'executing'
        RETURNING e.dispatch_id, e.version, e.finished_at_ms
    ),
    closed AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = 'resolved',
            closed_by = 'manual',
            closed_at_ms = s.finished_at_ms,
            execution_version = s.version,
            manual_at_ms = NULL,
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM settled AS s
        WHERE c.dispatch_id = s.dispatch_id AND c.status <> 'resolved'
        RETURNING c.dispatch_id
    ),
    resolution AS (
        -- `finding` of a manual resolution: the finding it overrode (the control's last one,
        -- read from the statement's snapshot, before `closed`).
        INSERT INTO approved_action_recovery_resolutions (
            dispatch_id, mutation_id, source, outcome, finding, evidence_digest,
            expected_execution_version, actor_user_id, reason_code, resolved_at_ms)
        SELECT s.dispatch_id, p_mutation_id, 'manual', p_outcome,
               (SELECT oc.last_finding FROM approved_action_recovery_controls AS oc
                WHERE oc.dispatch_id = s.dispatch_id),
               p_evidence_digest, p_expected_execution_version, p_actor_user_id, p_reason_code,
               s.finished_at_ms
        FROM settled AS s
        RETURNING dispatch_id, mutation_id, outcome, finding, evidence_digest,
                  expected_execution_version, actor_user_id, reason_code, resolved_at_ms
    ),
    authorization_fact AS (
        INSERT INTO recovery_authorizations (
            mutation_id, user_id, permission, project_id, project_version,
            role_binding_version, auth_time_ms, amr, authorized_at_ms, issuer, token_kid,
            signing_kid, signature)
        SELECT r.mutation_id, a.user_id, 'approval.recover', a.project_id, a.project_version,
               a.role_binding_version, a.auth_time_ms, a.amr, a.authorized_at_ms, a.issuer,
               a.token_kid, a.signing_kid, a.signature
        FROM resolution AS r,
             json_to_recordset(p_authorizations) AS a(
                 user_id text, project_id text, project_version bigint,
                 role_binding_version bigint, auth_time_ms bigint, amr text[],
                 authorized_at_ms bigint, issuer text, token_kid text, signing_kid text,
                 signature text)
        RETURNING mutation_id, user_id, permission, project_id, project_version,
                  role_binding_version, auth_time_ms, amr, authorized_at_ms, issuer, token_kid,
                  signing_kid, signature
    ),
    -- The audit chain (migration 0008): the decision's canonical content, linked to the
    -- chain's head. Updating the one head row takes its lock, so concurrent decisions link
    -- one after another; after a wait, READ COMMITTED re-reads the head that committed first
    -- and this link's hash is computed from it. The head is the last row locked: the lock
    -- order (execution, control, inserts, head) is the same for every writer.
    content AS (
        SELECT r.mutation_id, r.dispatch_id, r.resolved_at_ms,
               resolver_audit_content(
                   r.dispatch_id, r.mutation_id, r.outcome, r.finding, r.evidence_digest,
                   r.expected_execution_version, r.actor_user_id, r.reason_code,
                   r.resolved_at_ms,
                   (SELECT json_agg(resolver_audit_authorization(
                               a.user_id, a.permission, a.project_id, a.project_version,
                               a.role_binding_version, a.auth_time_ms, a.amr,
                               a.authorized_at_ms, a.issuer, a.token_kid, a.signing_kid,
                               a.signature)
                           ORDER BY a.user_id)
                    FROM authorization_fact AS a WHERE a.mutation_id = r.mutation_id))
                   AS content
        FROM resolution AS r
    ),
    head AS (
        UPDATE recovery_audit_head AS h
        SET seq = h.seq + 1,
            prev_hash = h.hash,
            hash = encode(sha256(convert_to(h.hash || c.content, 'UTF8')), 'hex')
        FROM content AS c
        WHERE h.id = 1
        RETURNING h.seq, h.prev_hash, h.hash
    ),
    link AS (
        INSERT INTO recovery_audit_chain (
            seq, mutation_id, dispatch_id, content, prev_hash, hash, recorded_at_ms)
        SELECT h.seq, c.mutation_id, c.dispatch_id, c.content, h.prev_hash, h.hash,
               c.resolved_at_ms
        FROM head AS h, content AS c
        RETURNING seq
    )
    SELECT s.dispatch_id, s.version FROM settled AS s
$$;

CREATE OR REPLACE FUNCTION resolver_prune_batch(p_run_id bigint, p_limit integer, p_dispatch_ids text[])
RETURNS TABLE (dispatches bigint, audit bigint, evidence bigint, remnants bigint)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    r recovery_prune_runs;
    v_settled text[];
    v_remnants text[] := '{}';
    v_rows text[];
    v_audit text[];
    v_evidence bigint := 0;
    v_n bigint;
    v_first_seq bigint;
    v_last_seq bigint;
BEGIN
    SELECT * INTO r FROM recovery_prune_runs WHERE run_id = p_run_id FOR NO KEY UPDATE;
    IF NOT FOUND OR r.finished_at_ms IS NOT NULL THEN
        RAISE EXCEPTION 'prune run % is not open', p_run_id USING ERRCODE = 'no_data_found';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'prune batch size must be between 1 and 10000'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Deleting only what was exported: a run with an export names its dispatches.
    IF r.export_digest IS NOT NULL AND p_dispatch_ids IS NULL THEN
        RAISE EXCEPTION 'a run with an export prunes only the dispatches it exported'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_dispatch_ids) > p_limit THEN
        RAISE EXCEPTION 'more dispatch ids than the batch size'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Settled: terminal execution, resolved control, both older than the cut-off. Locks the
    -- execution, the control and the identity; anything held elsewhere waits for a later run.
    IF p_dispatch_ids IS NULL THEN
        SELECT coalesce(array_agg(s.dispatch_id), '{}') INTO v_settled FROM (
            SELECT c.dispatch_id
            FROM approved_action_recovery_controls AS c
            JOIN approved_action_executions AS e USING (dispatch_id)
            JOIN approved_action_dispatches AS d USING (dispatch_id)
            WHERE c.status = 'resolved' AND c.closed_at_ms < r.cutoff_ms
              AND e.state = ANY (resolver_terminal_states()) AND e.finished_at_ms < r.cutoff_ms
            ORDER BY c.closed_at_ms, c.dispatch_id
            LIMIT p_limit
            FOR UPDATE OF e, c, d SKIP LOCKED) AS s;
    ELSE
        SELECT coalesce(array_agg(s.dispatch_id), '{}') INTO v_settled FROM (
            SELECT c.dispatch_id
            FROM approved_action_recovery_controls AS c
            JOIN approved_action_executions AS e USING (dispatch_id)
            JOIN approved_action_dispatches AS d USING (dispatch_id)
            WHERE c.dispatch_id = ANY (p_dispatch_ids)
              AND c.status = 'resolved' AND c.closed_at_ms < r.cutoff_ms
              AND e.state = ANY (resolver_terminal_states()) AND e.finished_at_ms < r.cutoff_ms
            FOR UPDATE OF e, c, d SKIP LOCKED) AS s;
    END IF;

    -- Audit remnants (include-audit only): identity and resolution left by an earlier prune.
    -- A resolution proves the dispatch was settled; no execution means nothing can run it.
    IF r.include_audit THEN
        SELECT coalesce(array_agg(s.dispatch_id), '{}') INTO v_remnants FROM (
            SELECT d.dispatch_id
            FROM approved_action_dispatches AS d
            JOIN approved_action_recovery_resolutions AS res USING (dispatch_id)
            WHERE d.dispatch_id = ANY (p_dispatch_ids)
              AND res.resolved_at_ms < r.cutoff_ms
              AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                              WHERE e.dispatch_id = d.dispatch_id)
            FOR UPDATE OF d SKIP LOCKED) AS s;
    END IF;

    -- The fact triggers let these deletes through because this function is on their call
    -- stack (resolver_reject_mutation); nothing a session sets opens them.
    DELETE FROM approved_action_recovery_controls WHERE dispatch_id = ANY (v_settled);
    DELETE FROM approved_action_executions WHERE dispatch_id = ANY (v_settled);
    DELETE FROM action_receipts WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM run_origin_facts WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM package_install_records WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM package_install_targets WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM package_commit_markers WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;

    -- Identity rows go when nothing audits them (closed by the executor's own completion) or
    -- when the audit facts go too; a dispatch a newer one supersedes keeps its identity.
    SELECT coalesce(array_agg(d.dispatch_id), '{}') INTO v_rows
    FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = ANY (v_settled || v_remnants)
      AND (r.include_audit OR NOT EXISTS (
              SELECT 1 FROM approved_action_recovery_resolutions AS res
              WHERE res.dispatch_id = d.dispatch_id))
      AND NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS n
                      WHERE n.supersedes_dispatch_id = d.dispatch_id);
    SELECT coalesce(array_agg(res.dispatch_id), '{}') INTO v_audit
    FROM approved_action_recovery_resolutions AS res
    WHERE res.dispatch_id = ANY (v_rows);

    DELETE FROM recovery_authorizations AS a
    USING approved_action_recovery_resolutions AS res
    WHERE a.mutation_id = res.mutation_id AND res.dispatch_id = ANY (v_audit);
    -- Their audit links go with them (migration 0015): the export carries each link, so
    -- `resolver audit verify --export` still walks the whole chain. The run records the range
    -- of links it removed (migration 0020_face_roles): a link is accepted as pruned only inside the
    -- range of the run whose export carries it.
    WITH removed AS (
        DELETE FROM recovery_audit_chain AS l
        USING approved_action_recovery_resolutions AS res
        WHERE l.mutation_id = res.mutation_id AND res.dispatch_id = ANY (v_audit)
        RETURNING l.seq
    )
    SELECT min(seq), max(seq) INTO v_first_seq, v_last_seq FROM removed;
    -- Late evidence and its watch go by ON DELETE CASCADE from the resolution.
    DELETE FROM approved_action_recovery_resolutions WHERE dispatch_id = ANY (v_audit);
    DELETE FROM approved_action_dispatches WHERE dispatch_id = ANY (v_rows);

    dispatches := cardinality(v_settled);
    audit := cardinality(v_audit);
    evidence := v_evidence;
    remnants := cardinality(ARRAY(SELECT unnest(v_remnants) INTERSECT SELECT unnest(v_rows)));
    UPDATE recovery_prune_runs
    SET batches = batches + 1,
        dispatches_pruned = dispatches_pruned + dispatches,
        audit_pruned = audit_pruned + audit,
        evidence_pruned = evidence_pruned + evidence,
        last_batch_at_ms = resolver_now_ms(NULL),
        audit_first_seq = least(audit_first_seq, v_first_seq),
        audit_last_seq = greatest(audit_last_seq, v_last_seq)
    WHERE run_id = p_run_id;
    RETURN NEXT;
END
$$;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_two_people_present()',
        'resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint, bigint)',
        'resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json)',
        'resolver_prune_batch(bigint, integer, text[])'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;

-- The grants an earlier grants.sql gave the replicas' role (and through it the API): writes on
-- what a decision records. grants.sql gives back only what each face still needs. A table
-- nobody was granted anything on keeps its default privileges untouched.
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
    REVOKE EXECUTE ON FUNCTION
        resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json),
        resolver_proposal_close(text, text, text, text, text, text, bigint, bigint, bigint,
                                text[], bigint, bigint, bigint),
        resolver_commit_wait_executions(text[]),
        resolver_commit_wait_controls(text[])
        FROM resolver_runtime;
END
$$;
