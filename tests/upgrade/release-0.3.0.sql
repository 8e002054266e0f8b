-- A database release 0.3.0 migrated (0003_schema_0_3_0) and filled by its demo (tests/upgrade/make_demo_dump.py).
--
-- PostgreSQL database dump
--


-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', 'public', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: resolver_closed_by; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_closed_by AS text
	CONSTRAINT ck_resolver_closed_by CHECK (VALUE IN ('completion','automatic','manual'));


--
-- Name: resolver_is_code(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_is_code(p_value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT length(p_value) BETWEEN 1 AND 64 AND p_value !~ '[^a-z0-9_.-]'
$$;


--
-- Name: resolver_code; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_code AS text
	CONSTRAINT ck_resolver_code CHECK (resolver_is_code(VALUE));


--
-- Name: resolver_control_status; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_control_status AS text
	CONSTRAINT ck_resolver_control_status CHECK (VALUE IN ('armed','manual','resolved'));


--
-- Name: resolver_terminal_states(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_terminal_states() RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    RETURN ARRAY['succeeded', 'failed', 'blocked'];
END
$$;


--
-- Name: resolver_execution_state; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_execution_state AS text
	CONSTRAINT ck_resolver_execution_state CHECK (VALUE IN ('leased','executing') OR VALUE = ANY (resolver_terminal_states()));


--
-- Name: resolver_failure_class; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_failure_class AS text
	CONSTRAINT ck_resolver_failure_class CHECK (VALUE IN ('outage','timeout','configuration','error'));


--
-- Name: resolver_finding_kinds(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_finding_kinds() RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    RETURN ARRAY['verified_succeeded', 'verified_failed', 'still_running', 'missing',
                 'conflict', 'unsupported', 'unavailable'];
END
$$;


--
-- Name: resolver_finding; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_finding AS text
	CONSTRAINT ck_resolver_finding CHECK (VALUE = ANY (resolver_finding_kinds()));


--
-- Name: resolver_is_id(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_is_id(p_value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT resolver_is_identifier(p_value, 128)
$$;


--
-- Name: resolver_id; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_id AS text
	CONSTRAINT ck_resolver_id CHECK (resolver_is_id(VALUE));


--
-- Name: resolver_json_object; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_json_object AS jsonb
	CONSTRAINT ck_resolver_json_object CHECK (jsonb_typeof(VALUE) = 'object');


--
-- Name: resolver_outcome_kind; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_outcome_kind AS text
	CONSTRAINT ck_resolver_outcome_kind CHECK (VALUE IN ('settled', 'contradicted', 'superseded'));


--
-- Name: resolver_resolution_source; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_resolution_source AS text
	CONSTRAINT ck_resolver_resolution_source CHECK (VALUE IN ('automatic','manual'));


--
-- Name: resolver_scan_reason; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_scan_reason AS text
	CONSTRAINT ck_resolver_scan_reason CHECK (length(VALUE) BETWEEN 1 AND 32 AND VALUE !~ '[^a-z0-9_]');


--
-- Name: resolver_settled_by; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_settled_by AS text
	CONSTRAINT ck_resolver_settled_by CHECK (VALUE IN ('executor', 'resolver', 'person'));


--
-- Name: resolver_is_sha256_hex(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_is_sha256_hex(p_value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT length(p_value) = 64 AND p_value !~ '[^0-9a-f]'
$$;


--
-- Name: resolver_sha256_hex; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_sha256_hex AS text
	CONSTRAINT ck_resolver_sha256_hex CHECK (resolver_is_sha256_hex(VALUE));


--
-- Name: resolver_is_signature_hex(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_is_signature_hex(p_value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT length(p_value) = 128 AND p_value !~ '[^0-9a-f]'
$$;


--
-- Name: resolver_signature_hex; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_signature_hex AS text
	CONSTRAINT ck_resolver_signature_hex CHECK (resolver_is_signature_hex(VALUE));


--
-- Name: resolver_is_signing_kid(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_is_signing_kid(p_value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT resolver_is_identifier(p_value, 64)
$$;


--
-- Name: resolver_signing_kid; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_signing_kid AS text
	CONSTRAINT ck_resolver_signing_kid CHECK (resolver_is_signing_kid(VALUE));


--
-- Name: resolver_terminal_state; Type: DOMAIN; Schema: public; Owner: -
--

CREATE DOMAIN public.resolver_terminal_state AS text
	CONSTRAINT ck_resolver_terminal_state CHECK (VALUE = ANY (resolver_terminal_states()));


--
-- Name: resolver_act_bounds(bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_act_bounds(p_max_auth_age_ms bigint, p_proposal_ttl_ms bigint) RETURNS TABLE(max_auth_age_ms bigint, proposal_ttl_ms bigint, clock_leeway_ms bigint)
    LANGUAGE plpgsql STABLE
    AS $$
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


--
-- Name: resolver_action_summary_problem(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_action_summary_problem(p_summary jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    fact jsonb;
    part text;
BEGIN
    IF p_summary IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_summary) <> 'object' THEN
        RETURN 'must be a JSON object';
    END IF;
    IF octet_length(p_summary::text) > 2048 THEN
        RETURN 'must be at most 2048 bytes as JSON';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(p_summary) AS k WHERE k NOT IN ('title', 'facts')) THEN
        RETURN 'takes the keys title and facts only';
    END IF;
    IF jsonb_typeof(p_summary -> 'title') IS DISTINCT FROM 'string'
       OR char_length(p_summary ->> 'title') NOT BETWEEN 1 AND 120 THEN
        RETURN 'title must be a string of 1-120 characters';
    END IF;
    IF p_summary ? 'facts' AND (jsonb_typeof(p_summary -> 'facts') <> 'array'
                               OR jsonb_array_length(p_summary -> 'facts') > 8) THEN
        RETURN 'facts must be an array of at most 8 facts';
    END IF;
    FOR fact IN SELECT f FROM jsonb_array_elements(coalesce(p_summary -> 'facts', '[]')) AS f LOOP
        IF jsonb_typeof(fact) <> 'object' THEN
            RETURN 'each fact must be an object {"label": ..., "value": ...}';
        END IF;
        IF (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(fact) AS k)
               IS DISTINCT FROM ARRAY['label', 'value']
           OR jsonb_typeof(fact -> 'label') <> 'string' OR jsonb_typeof(fact -> 'value') <> 'string'
           OR char_length(fact ->> 'label') NOT BETWEEN 1 AND 40
           OR char_length(fact ->> 'value') NOT BETWEEN 1 AND 200 THEN
            RETURN 'each fact must be {"label": 1-40 characters, "value": 1-200 characters}';
        END IF;
        IF (fact ->> 'label') ~* '(passw|secret|token|api.?key|private.?key|credential|authori[sz]ation|cookie)' THEN
            RETURN 'a fact''s label names a secret: secrets never go in the summary';
        END IF;
    END LOOP;
    FOR part IN
        SELECT p_summary ->> 'title'
        UNION ALL
        SELECT x FROM jsonb_array_elements(coalesce(p_summary -> 'facts', '[]')) AS f,
                      LATERAL (VALUES (f ->> 'label'), (f ->> 'value')) AS v(x)
    LOOP
        IF part ~ '[[:cntrl:]\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]' THEN
            RETURN 'takes no control, zero-width or direction-override character';
        END IF;
        IF part ~* '(-----BEGIN|^(bearer|basic)\s|eyJ[A-Za-z0-9_-]+\.|://[^/@\s]*:[^/@\s]*@|[A-Za-z0-9+/=_]{32})' THEN
            RETURN 'a value looks like a secret or a digest (a key, token, credential or 32+ character code): never put one in the summary';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;


--
-- Name: resolver_audit_append(text, text, text, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_audit_append(p_mutation_id text, p_dispatch_id text, p_content text, p_recorded_at_ms bigint) RETURNS bigint
    LANGUAGE sql
    AS $$
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


--
-- Name: resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint, text, text, text, text, text, text, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_audit_authorization(p_user_id text, p_permission text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_authorized_at_ms bigint, p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_act text, p_act_mutation_id text, p_proposal_id bigint, p_verified_at_ms bigint) RETURNS json
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
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


--
-- Name: resolver_audit_close(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_audit_close(p_mutation_id text) RETURNS text
    LANGUAGE sql STABLE
    AS $$
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


--
-- Name: resolver_audit_content(text, text, text, text, text, bigint, text, text, bigint, json, text, json); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_audit_content(p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text, p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text, p_reason_code text, p_resolved_at_ms bigint, p_authorizations json, p_event text, p_proposal json) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
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


--
-- Name: resolver_audit_decision(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_audit_decision(p_mutation_id text) RETURNS text
    LANGUAGE sql STABLE
    AS $$
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


--
-- Name: resolver_audit_proposal(bigint, text, text, bigint, text, text, text, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_audit_proposal(p_proposal_id bigint, p_mutation_id text, p_outcome text, p_expected_execution_version bigint, p_evidence_digest text, p_reason_code text, p_proposed_by text, p_proposed_at_ms bigint, p_expires_at_ms bigint) RETURNS json
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT json_build_object(
        'proposal_id', p_proposal_id, 'mutation_id', p_mutation_id, 'outcome', p_outcome,
        'expected_execution_version', p_expected_execution_version,
        'evidence_digest', p_evidence_digest, 'reason_code', p_reason_code,
        'proposed_by', p_proposed_by, 'proposed_at_ms', p_proposed_at_ms,
        'expires_at_ms', p_expires_at_ms)
$$;


--
-- Name: resolver_check_control_in_step(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_check_control_in_step() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    control_version bigint;
    execution_version bigint;
BEGIN
    SELECT c.execution_version, e.version INTO control_version, execution_version
    FROM approved_action_recovery_controls AS c
    JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE c.dispatch_id = NEW.dispatch_id AND c.status <> 'resolved';
    IF FOUND AND control_version <> execution_version THEN
        RAISE EXCEPTION 'dispatch %: an open control''s execution_version (%) must equal its execution''s version (%) at commit',
            NEW.dispatch_id, control_version, execution_version
            USING ERRCODE = 'RS006',
                  HINT = 'update the control in the same transaction (resolver_execution_renew does)';
    END IF;
    RETURN NULL;
END
$$;


--
-- Name: resolver_check_receipt_lease(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_check_receipt_lease() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    expires bigint;
    now_ms bigint;
BEGIN
    SELECT e.lease_expires_at_ms INTO expires FROM approved_action_executions AS e
    WHERE e.dispatch_id = NEW.dispatch_id AND e.state = 'executing';
    now_ms := resolver_now_ms(NULL);
    IF FOUND AND expires <= now_ms AND NOT resolver_importing_history(TG_RELID) THEN
        RAISE EXCEPTION 'the receipt of % would commit after its execution lease expired (at % ms, now % ms): the transaction rolls back',
            quote_literal(NEW.dispatch_id), expires, now_ms
            USING ERRCODE = 'RS002',
                  HINT = 'renew before the mutation''s transaction; nothing of this transaction committed';
    END IF;
    RETURN NULL;
END
$$;


--
-- Name: resolver_check_settled_closed(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_check_settled_closed() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    left_open text;
BEGIN
    -- A semi-join from the settled rows to the controls' primary key. The planner knows how
    -- many rows the statement settled: for one (every completion) a single key probe is the
    -- plan, on tables never analyzed too. (An `= ANY (array)` over the controls was planned
    -- there as a scan of every control, and a long-lived session kept that plan as the table
    -- grew.) A statement that settles nothing (the start barrier, a renewal) reads no control.
    SELECT n.dispatch_id INTO left_open
    FROM settled AS n
    WHERE n.state = ANY (resolver_terminal_states())
      AND EXISTS (SELECT 1 FROM approved_action_recovery_controls AS c
                  WHERE c.dispatch_id = n.dispatch_id AND c.status <> 'resolved')
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'dispatch %: an open control''s execution_version must equal its execution''s version; a terminal execution''s control is closed by the same statement',
            left_open
            USING ERRCODE = 'RS006',
                  HINT = 'settle through resolver_execution_complete (or close the control in the same statement)';
    END IF;
    RETURN NULL;
END
$$;


--
-- Name: resolver_commit_automatic(json, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_commit_automatic(p_items json, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, status text, manual_reason text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    ids text[];
    verified_ids text[];
    locked_executions text[];
    locked_controls text[];
    now_ms bigint;
BEGIN
    SELECT array_agg(i.dispatch_id ORDER BY i.dispatch_id),
           array_agg(i.dispatch_id ORDER BY i.dispatch_id)
               FILTER (WHERE resolver_finding_status(i.finding) = 'resolved')
    INTO ids, verified_ids
    FROM json_to_recordset(p_items) AS i(dispatch_id text, finding text);
    -- Lock order, the same for every writer: executions (of verified items), then every
    -- control of the page, each in key order; then the fenced writes. SKIP LOCKED: a row
    -- another transaction holds (an operator's open SELECT ... FOR UPDATE, an executor's
    -- completion in flight) leaves its item out of this commit, as a lost fence; it is
    -- claimed again once its recovery lease lapses. The rest of the page commits at once
    -- instead of waiting (and failing whole on lock_timeout) behind one held row.
    SELECT coalesce(array_agg(e.dispatch_id), '{}') INTO locked_executions
    FROM (SELECT e.dispatch_id FROM approved_action_executions AS e
          WHERE e.dispatch_id = ANY(coalesce(verified_ids, '{}'))
          ORDER BY e.dispatch_id
          FOR UPDATE SKIP LOCKED) AS e;
    -- A row skipped above is most often held for an instant only: a concurrent claim whose
    -- snapshot still saw it due found it claimed since, locked its new version to recheck it
    -- and, the recheck failing, holds that lock to the end of its statement. Left out, the
    -- item would wait a whole recovery lease; so the skipped rows are waited for, briefly
    --, and only what is still held after that is left out.
    IF cardinality(locked_executions) < cardinality(verified_ids) THEN
        locked_executions := locked_executions || resolver_commit_wait_executions(
            ARRAY(SELECT v FROM unnest(verified_ids) AS v
                  WHERE v <> ALL(locked_executions) ORDER BY v));
    END IF;
    SELECT coalesce(array_agg(c.dispatch_id), '{}') INTO locked_controls
    FROM (SELECT c.dispatch_id FROM approved_action_recovery_controls AS c
          WHERE c.dispatch_id = ANY(ids)
          ORDER BY c.dispatch_id
          FOR UPDATE SKIP LOCKED) AS c;
    IF cardinality(locked_controls) < cardinality(ids) THEN
        locked_controls := locked_controls || resolver_commit_wait_controls(
            ARRAY(SELECT v FROM unnest(ids) AS v WHERE v <> ALL(locked_controls) ORDER BY v));
    END IF;
    -- The database clock once the rows are ours: an execution lease is judged expired at
    -- the moment of the write, not before a lock wait.
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- With the rows locked (an item whose rows another transaction holds is left out),
    -- `fenced` is exactly the set whose recovery lease, open control,
    -- execution version and expired execution lease still hold; every write below applies
    -- to that set only, so each dispatch commits all-or-nothing and a stale item writes
    -- nothing. The answer: each fenced dispatch id and the status its control took.
    RETURN QUERY
    WITH item AS (
        -- Every key of an item is one column (the replica writes them).
        SELECT * FROM json_to_recordset(p_items) AS i(
            dispatch_id text, recovery_token uuid, recovery_version bigint,
            execution_version bigint, finding text, result_code text, evidence_digest text,
            mutation_id text, delay_ms bigint, failure text, escalate_after_ms bigint,
            reason text)
    ),
    fenced AS (
        SELECT i.*,
               CASE
                   -- Escalation, when evidence is missing: a finding that
                   -- would re-arm goes to a human once its action type's window, counted from
                   -- the case's first inspection, has elapsed. From the first inspection, not
                   -- from when this kind began, so alternating findings never restart it.
                   WHEN resolver_finding_status(i.finding) = 'armed'
                        AND i.escalate_after_ms IS NOT NULL
                        AND now_ms - coalesce(c.first_inspected_at_ms, now_ms)
                            >= i.escalate_after_ms
                   THEN 'manual'
                   ELSE resolver_finding_status(i.finding)
               END AS status
        FROM item AS i
        JOIN approved_action_recovery_controls AS c
          ON i.dispatch_id = ANY(locked_controls)
         AND (resolver_finding_status(i.finding) <> 'resolved'
              OR i.dispatch_id = ANY(locked_executions))
         AND c.dispatch_id = i.dispatch_id AND c.status = 'armed'
         AND c.recovery_token = i.recovery_token AND c.recovery_version = i.recovery_version
         AND c.execution_version = i.execution_version
        JOIN approved_action_executions AS e
          ON e.dispatch_id = i.dispatch_id AND e.state = 'executing'
         AND e.version = i.execution_version
         -- Defence in depth: the version fence already excludes a renewed execution; this
         -- one holds even if a writer extended a lease without bumping the version.
         AND e.lease_expires_at_ms <= now_ms
    ),
    routed AS (
        -- Why a control goes to a person, decided here once: its finding needs one
        -- (`conflict`, `unsupported`), or a finding that would re-arm outlasted its window
        -- (an escalation). The answer carries it, so no replica re-derives the routing.
        SELECT f.*,
               CASE WHEN f.status <> 'manual' THEN NULL
                    WHEN resolver_finding_status(f.finding) = 'manual' THEN f.finding
                    ELSE 'evidence_window_elapsed' END AS manual_reason
        FROM fenced AS f
    ),
    terminal AS (
        UPDATE approved_action_executions AS e
        SET state = resolver_finding_outcome(f.finding),
            version = e.version + 1,
            finished_at_ms = now_ms,
            result_code = f.result_code,
            evidence_digest = f.evidence_digest
        FROM routed AS f
        WHERE e.dispatch_id = f.dispatch_id AND f.status = 'resolved'
    ),
    control AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = f.status,
            execution_version = c.execution_version
                                + CASE WHEN f.status = 'resolved' THEN 1 ELSE 0 END,
            closed_by = CASE WHEN f.status = 'resolved' THEN 'automatic' END,
            closed_at_ms = CASE WHEN f.status = 'resolved' THEN now_ms END,
            manual_at_ms = CASE WHEN f.status = 'manual' THEN now_ms END,
            manual_reason = f.manual_reason,
            last_finding = f.finding,
            finding_count = c.finding_count + 1,
            -- Bounded statistics: at most one key per finding kind, two times, two codes.
            finding_counts = c.finding_counts || jsonb_build_object(
                f.finding, coalesce((c.finding_counts ->> f.finding)::bigint, 0) + 1),
            first_inspected_at_ms = coalesce(c.first_inspected_at_ms, now_ms),
            last_inspected_at_ms = now_ms,
            last_failure_class = coalesce(f.failure, c.last_failure_class),
            -- Why the evidence says what it says: the provider's bounded
            -- reason code of this inspection (`unknown_kid`, `http_404`), counted like the
            -- findings; at most 16 distinct codes are kept by name, the rest as `other`.
            last_reason = f.reason,
            reason_counts = CASE
                WHEN f.reason IS NULL THEN c.reason_counts
                WHEN c.reason_counts ? f.reason
                     OR (SELECT count(*) FROM jsonb_object_keys(c.reason_counts)) < 16
                THEN c.reason_counts || jsonb_build_object(
                    f.reason, coalesce((c.reason_counts ->> f.reason)::bigint, 0) + 1)
                ELSE c.reason_counts || jsonb_build_object(
                    'other', coalesce((c.reason_counts ->> 'other')::bigint, 0) + 1)
            END,
            last_evidence_digest = coalesce(f.evidence_digest, c.last_evidence_digest),
            next_scan_at_ms = CASE WHEN f.status = 'armed' THEN now_ms + f.delay_ms
                                   ELSE c.next_scan_at_ms END,
            -- When it escalates if the evidence stays as it is: the window
            -- counts from the first inspection, like the escalation above.
            escalates_at_ms = CASE WHEN f.status = 'armed' AND f.escalate_after_ms IS NOT NULL
                                   THEN coalesce(c.first_inspected_at_ms, now_ms)
                                        + f.escalate_after_ms END,
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM routed AS f
        WHERE c.dispatch_id = f.dispatch_id
    ),
    resolution AS (
        INSERT INTO approved_action_recovery_resolutions (
            dispatch_id, mutation_id, source, outcome, finding, evidence_digest, result_code,
            expected_execution_version, resolved_at_ms)
        SELECT f.dispatch_id, f.mutation_id, 'automatic',
               resolver_finding_outcome(f.finding),
               f.finding, f.evidence_digest, f.result_code, f.execution_version, now_ms
        FROM routed AS f
        WHERE f.status = 'resolved'
    )
    SELECT f.dispatch_id, f.status, f.manual_reason FROM routed AS f;
END
$$;


--
-- Name: resolver_commit_manual(text, text, text, bigint, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint, bigint, boolean, text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_commit_manual(p_dispatch_id text, p_mutation_id text, p_act text, p_proposal_id bigint, p_outcome text, p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint, p_max_auth_age_ms bigint DEFAULT NULL::bigint, p_proposal_ttl_ms bigint DEFAULT NULL::bigint, p_now_ms bigint DEFAULT NULL::bigint, p_tamper_acknowledged boolean DEFAULT false, p_tampering_reasons text[] DEFAULT '{}'::text[]) RETURNS TABLE(dispatch_id text, version bigint, result text, proposal_id bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    v_version bigint;
    v_action_type text;
    v_id bigint;
    bounds record;
    prop recovery_proposals%ROWTYPE;
BEGIN
    IF p_act IS NULL OR p_act NOT IN ('decide', 'propose', 'confirm') THEN
        RAISE EXCEPTION 'resolver_commit_manual records a decide, propose or confirm fact, not %',
            coalesce(quote_literal(p_act), 'NULL') USING ERRCODE = 'RS008';
    END IF;
    IF (p_act = 'confirm') <> (p_proposal_id IS NOT NULL) THEN
        RAISE EXCEPTION 'p_proposal_id names the proposal a confirm fact confirms, and only then'
            USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION 'p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]'
            USING ERRCODE = 'RS005';
    END IF;
    PERFORM resolver_fact_shape(p_amr, p_issuer, p_token_kid, p_signing_kid, p_signature,
                                p_verified_at_ms);
    SELECT * INTO bounds FROM resolver_act_bounds(p_max_auth_age_ms, p_proposal_ttl_ms);
    PERFORM resolver_fact_unused(p_mutation_id, p_signature);
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
    now_ms := resolver_protocol_now_ms(p_now_ms);
    PERFORM resolver_fact_fresh(p_verified_at_ms, now_ms, bounds.clock_leeway_ms);
    IF NOT (p_auth_time_ms >= now_ms - bounds.max_auth_age_ms
            AND p_auth_time_ms <= now_ms + bounds.clock_leeway_ms)
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
    -- Possibly forged evidence is never confirmed as succeeded without the decision's own
    -- acknowledgement (the caller names the reasons that suggest tampering: the providers
    -- declare them). The control is read under a lock, after the execution's (the lock
    -- order), so no inspection changes the evidence between this check and the commit.
    IF p_outcome = 'succeeded' AND NOT coalesce(p_tamper_acknowledged, false) AND EXISTS (
           SELECT 1 FROM approved_action_recovery_controls AS tc
           WHERE tc.dispatch_id = p_dispatch_id AND tc.last_finding = 'conflict'
             AND tc.last_reason = ANY (coalesce(p_tampering_reasons, '{}'))
           FOR SHARE) THEN
        RETURN QUERY SELECT p_dispatch_id, v_version, 'tamper_unacknowledged'::text, NULL::bigint;
        RETURN;
    END IF;
    IF prop.proposal_id IS NULL THEN
        IF p_act = 'confirm' THEN
            RAISE EXCEPTION 'proposal % is not open on dispatch %: nothing to confirm',
                p_proposal_id, quote_literal(p_dispatch_id) USING ERRCODE = 'RS008';
        END IF;
        IF NOT resolver_needs_two_people(v_action_type, p_outcome) THEN
            IF p_act <> 'decide' THEN
                RAISE EXCEPTION 'one person decides this case: a decide fact, not %', p_act
                    USING ERRCODE = 'RS008';
            END IF;
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
                    'issuer', p_issuer, 'token_kid', p_token_kid,
                    'signing_kid', p_signing_kid, 'signature', p_signature,
                    'act', 'decide', 'act_mutation_id', p_mutation_id,
                    'verified_at_ms', p_verified_at_ms)))
                AS s;
            RETURN;
        END IF;
        IF p_act <> 'propose' THEN
            RAISE EXCEPTION 'this decision needs two people: its first fact is a propose fact, not %',
                p_act USING ERRCODE = 'RS008';
        END IF;
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
            signature, verified_at_ms)
        VALUES (p_dispatch_id, p_mutation_id, p_outcome, p_expected_execution_version,
                p_reason_code, p_evidence_digest, p_user_id, p_project_id, p_project_version,
                p_role_binding_version, p_auth_time_ms, p_amr, now_ms,
                now_ms + bounds.proposal_ttl_ms, p_issuer, p_token_kid, p_signing_kid,
                p_signature, p_verified_at_ms)
        RETURNING rp.proposal_id INTO v_id;
        RETURN QUERY SELECT p_dispatch_id, v_version, 'proposed'::text, v_id;
        RETURN;
    END IF;
    -- A proposal is open: only its confirmation by a second person is an act here (ending it
    -- otherwise is resolver_proposal_close's).
    IF p_act <> 'confirm' OR p_proposal_id <> prop.proposal_id THEN
        RAISE EXCEPTION 'proposal % is open on dispatch %: only a confirm fact naming it is recorded here, not % of proposal %',
            prop.proposal_id, quote_literal(p_dispatch_id), p_act,
            coalesce(p_proposal_id::text, 'none') USING ERRCODE = 'RS008';
    END IF;
    IF prop.proposed_by = p_user_id THEN
        RAISE EXCEPTION 'the proposer of proposal % cannot confirm it: a second person does',
            prop.proposal_id USING ERRCODE = 'RS008';
    END IF;
    IF prop.outcome <> p_outcome OR prop.evidence_digest IS DISTINCT FROM p_evidence_digest
       OR prop.expected_execution_version <> v_version THEN
        RAISE EXCEPTION 'the confirm fact names another decision than proposal %',
            prop.proposal_id USING ERRCODE = 'RS008';
    END IF;
    IF prop.verified_at_ms IS NULL THEN
        RAISE EXCEPTION 'proposal %''s fact names no act: propose again', prop.proposal_id
            USING ERRCODE = 'RS008';
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
                'signature', prop.signature, 'act', 'propose',
                'act_mutation_id', prop.mutation_id, 'verified_at_ms', prop.verified_at_ms),
            json_build_object(
                'user_id', p_user_id, 'project_id', p_project_id,
                'project_version', p_project_version,
                'role_binding_version', p_role_binding_version,
                'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', now_ms,
                'issuer', p_issuer, 'token_kid', p_token_kid, 'signing_kid', p_signing_kid,
                'signature', p_signature, 'act', 'confirm', 'act_mutation_id', p_mutation_id,
                'proposal_id', prop.proposal_id, 'verified_at_ms', p_verified_at_ms)))
        AS s;
END
$$;


--
-- Name: resolver_commit_wait_controls(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_commit_wait_controls(p_ids text[]) RETURNS text[]
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    locked text[] := '{}';
    saved text := current_setting('lock_timeout');
BEGIN
    BEGIN
        PERFORM set_config('lock_timeout', '50ms', true);
        SELECT coalesce(array_agg(c.dispatch_id), '{}') INTO locked
        FROM (SELECT c.dispatch_id FROM approved_action_recovery_controls AS c
              WHERE c.dispatch_id = ANY(p_ids)
              ORDER BY c.dispatch_id
              FOR UPDATE) AS c;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        locked := '{}';
    END;
    PERFORM set_config('lock_timeout', saved, true);
    RETURN locked;
END
$$;


--
-- Name: resolver_commit_wait_executions(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_commit_wait_executions(p_ids text[]) RETURNS text[]
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    locked text[] := '{}';
    saved text := current_setting('lock_timeout');
BEGIN
    BEGIN
        PERFORM set_config('lock_timeout', '50ms', true);
        SELECT coalesce(array_agg(e.dispatch_id), '{}') INTO locked
        FROM (SELECT e.dispatch_id FROM approved_action_executions AS e
              WHERE e.dispatch_id = ANY(p_ids)
              ORDER BY e.dispatch_id
              FOR UPDATE) AS e;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        locked := '{}';
    END;
    PERFORM set_config('lock_timeout', saved, true);
    RETURN locked;
END
$$;


--
-- Name: resolver_decision_settles(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_decision_settles(p_decision text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE p_decision WHEN 'confirm_succeeded' THEN 'succeeded'
                           WHEN 'confirm_failed' THEN 'failed'
                           WHEN 'abandon_unknown' THEN 'blocked' END
$$;


--
-- Name: resolver_dispatch_create_v2(text, text, text, text, text, text, integer, text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_dispatch_create_v2(p_dispatch_id text, p_approval_request_id text, p_project_id text, p_action_type text, p_action_digest text, p_idempotency_key text, p_schema_version integer DEFAULT 1, p_supersedes_dispatch_id text DEFAULT NULL::text, p_action_summary jsonb DEFAULT NULL::jsonb) RETURNS TABLE(dispatch_id text, created boolean, created_at_ms bigint)
    LANGUAGE plpgsql SECURITY DEFINER ROWS 1
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    field text;
    existing approved_action_dispatches%ROWTYPE;
    problem text;
BEGIN
    -- The four ids in one expression; the loop below only names the first bad one.
    IF NOT coalesce(resolver_is_id(p_dispatch_id) AND resolver_is_id(p_approval_request_id)
                    AND resolver_is_id(p_project_id) AND resolver_is_id(p_idempotency_key),
                    false) THEN
        FOREACH field IN ARRAY ARRAY['p_dispatch_id', 'p_approval_request_id',
                                     'p_project_id', 'p_idempotency_key'] LOOP
            IF NOT coalesce(resolver_is_id(CASE field
                    WHEN 'p_dispatch_id' THEN p_dispatch_id
                    WHEN 'p_approval_request_id' THEN p_approval_request_id
                    WHEN 'p_project_id' THEN p_project_id
                    ELSE p_idempotency_key END), false) THEN
                RAISE EXCEPTION '% must be 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric', field
                    USING ERRCODE = 'RS005';
            END IF;
        END LOOP;
    END IF;
    IF NOT coalesce(resolver_is_action_type(p_action_type), false) THEN
        RAISE EXCEPTION 'p_action_type must match [a-z][a-z0-9_.-]{0,63}'
            USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_sha256_hex(p_action_digest), false) THEN
        RAISE EXCEPTION 'p_action_digest must be a lowercase hex sha256'
            USING ERRCODE = 'RS005';
    END IF;
    IF p_schema_version IS NULL OR p_schema_version < 1 THEN
        RAISE EXCEPTION 'p_schema_version must be >= 1' USING ERRCODE = 'RS005';
    END IF;
    -- What was approved, for people: optional; an executor that does not
    -- pass it records none. Refused with the rule it breaks, never with its content.
    problem := resolver_action_summary_problem(p_action_summary);
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'p_action_summary %', problem
            USING ERRCODE = 'RS005',
                  HINT = 'a title and up to 8 labelled facts for people; never secrets, tool arguments or raw responses';
    END IF;
    -- Nested, so a dispatch that supersedes nothing (nearly all) runs no query for it.
    IF p_supersedes_dispatch_id IS NOT NULL THEN
        IF p_supersedes_dispatch_id = p_dispatch_id
           OR NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS s
                          WHERE s.dispatch_id = p_supersedes_dispatch_id) THEN
            RAISE EXCEPTION 'supersedes_dispatch_id % names no dispatch', quote_literal(p_supersedes_dispatch_id)
                USING ERRCODE = 'RS005';
        END IF;
    END IF;
    INSERT INTO approved_action_dispatches AS d (
        dispatch_id, approval_request_id, project_id, action_type, action_digest,
        idempotency_key, schema_version, supersedes_dispatch_id, action_summary)
    VALUES (p_dispatch_id, p_approval_request_id, p_project_id, p_action_type,
            p_action_digest, p_idempotency_key, p_schema_version, p_supersedes_dispatch_id,
            p_action_summary)
    ON CONFLICT DO NOTHING
    RETURNING d.dispatch_id, true, d.created_at_ms INTO dispatch_id, created, created_at_ms;
    IF FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- An exact re-create is the same fact; anything else reuses an id for a new action.
    SELECT * INTO existing FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = p_dispatch_id OR d.idempotency_key = p_idempotency_key
    ORDER BY d.dispatch_id = p_dispatch_id DESC
    LIMIT 1;
    IF (existing.dispatch_id, existing.approval_request_id, existing.project_id,
        existing.action_type, existing.action_digest, existing.idempotency_key,
        existing.schema_version::integer)
           IS NOT DISTINCT FROM
       (p_dispatch_id, p_approval_request_id, p_project_id, p_action_type,
        p_action_digest, p_idempotency_key, p_schema_version)
       AND existing.supersedes_dispatch_id IS NOT DISTINCT FROM p_supersedes_dispatch_id
       AND existing.action_summary IS NOT DISTINCT FROM p_action_summary THEN
        dispatch_id := existing.dispatch_id;
        created := false;
        created_at_ms := existing.created_at_ms;
        RETURN NEXT;
        RETURN;
    END IF;
    RAISE EXCEPTION 'dispatch % or idempotency key % is already recorded with a different identity; a new action needs a new dispatch id and idempotency key',
        quote_literal(p_dispatch_id), quote_literal(p_idempotency_key)
        USING ERRCODE = 'RS005';
END
$$;


--
-- Name: resolver_dispatch_history(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_dispatch_history(p_dispatch_id text) RETURNS TABLE(cursor text, kind text, state text, settled_by text, finding text, result_code text, reason_code text, actors text[], superseded_by text, attempt integer, occurred_at_ms bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT h.cursor, h.kind, h.state, h.settled_by, h.finding, h.result_code, h.reason_code,
           h.actors, h.superseded_by, h.attempt, h.occurred_at_ms
    FROM (
        SELECT NULL::text AS cursor, 'created' AS kind, 'pending' AS state,
               NULL::text AS settled_by, NULL::text AS finding, NULL::text AS result_code,
               NULL::text AS reason_code, NULL::text[] AS actors, NULL::text AS superseded_by,
               NULL::integer AS attempt, d.created_at_ms AS occurred_at_ms,
               0 AS rank, NULL::xid8 AS xid, 0::bigint AS seq
        FROM approved_action_dispatches AS d WHERE d.dispatch_id = p_dispatch_id
        UNION ALL
        SELECT NULL, 'started', 'executing', NULL, NULL, NULL, NULL, NULL, NULL, e.attempt,
               e.started_at_ms, 1, NULL, 0
        FROM approved_action_executions AS e
        WHERE e.dispatch_id = p_dispatch_id AND e.started_at_ms IS NOT NULL
        UNION ALL
        SELECT o.xid::text || ':' || o.seq::text, o.kind, o.state, o.settled_by,
               o.finding, o.result_code, o.reason_code, o.actors, o.superseded_by, NULL,
               o.occurred_at_ms, 2, o.xid, o.seq
        FROM recovery_outcomes AS o WHERE o.dispatch_id = p_dispatch_id
    ) AS h
    CROSS JOIN (SELECT resolver_outcome_scope() AS scope) AS r
    WHERE r.scope IS NULL OR EXISTS (
        SELECT 1 FROM approved_action_dispatches AS d
        WHERE d.dispatch_id = p_dispatch_id AND d.project_id = ANY (r.scope))
    ORDER BY h.rank, h.xid, h.seq
$$;


--
-- Name: resolver_dispatch_status(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_dispatch_status(p_dispatch_id text) RETURNS TABLE(dispatch_id text, approval_request_id text, project_id text, action_type text, idempotency_key text, supersedes_dispatch_id text, superseded_by text, state text, attempt integer, lease_expires_at_ms bigint, started_at_ms bigint, finished_at_ms bigint, result_code text, evidence_digest text, settled_by text, finding text, reason_code text, actors text[], control_status text, created_at_ms bigint, db_now_ms bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    WITH now AS (SELECT resolver_now_ms(NULL) AS ms, resolver_outcome_scope() AS scope)
    SELECT d.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           d.idempotency_key, d.supersedes_dispatch_id,
           (SELECT s.dispatch_id FROM approved_action_dispatches AS s
            WHERE s.supersedes_dispatch_id = d.dispatch_id
            ORDER BY s.created_at_ms DESC, s.dispatch_id DESC LIMIT 1),
           resolver_effective_state(e.state, e.lease_expires_at_ms, now.ms),
           e.attempt, e.lease_expires_at_ms, e.started_at_ms, e.finished_at_ms,
           coalesce(e.result_code, r.result_code), e.evidence_digest,
           CASE WHEN e.state <> ALL (resolver_terminal_states()) THEN NULL
                WHEN r.source = 'automatic' THEN 'resolver'
                WHEN r.source = 'manual' THEN 'person'
                ELSE 'executor' END,
           r.finding, r.reason_code,
           CASE WHEN r.source = 'manual' THEN
               ARRAY(SELECT a.user_id FROM recovery_authorizations AS a
                     WHERE a.mutation_id = r.mutation_id ORDER BY a.user_id) END,
           c.status, d.created_at_ms, now.ms
    FROM approved_action_dispatches AS d
    CROSS JOIN now
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_resolutions AS r ON r.dispatch_id = d.dispatch_id
    WHERE d.dispatch_id = p_dispatch_id
      AND (now.scope IS NULL OR d.project_id = ANY (now.scope))
$$;


--
-- Name: resolver_effective_state(text, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_effective_state(p_state text, p_lease_expires_at_ms bigint, p_now_ms bigint) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN p_state IS NULL THEN 'pending'
                WHEN p_state = 'executing' AND p_lease_expires_at_ms <= p_now_ms
                THEN 'recovery_required'
                ELSE p_state END
$$;


--
-- Name: resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_execution_complete(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_outcome text, p_result_code text, p_mutation_id text, p_evidence_digest text DEFAULT NULL::text, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, result text, state text, version bigint)
    LANGUAGE plpgsql SECURITY DEFINER ROWS 1
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    seen record;
BEGIN
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed') THEN
        RAISE EXCEPTION 'p_outcome must be succeeded or failed' USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_code(p_result_code), false) THEN
        RAISE EXCEPTION 'p_result_code must match [a-z0-9_.-]{1,64}' USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION 'p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]'
            USING ERRCODE = 'RS005';
    END IF;
    IF p_evidence_digest IS NOT NULL AND NOT resolver_is_sha256_hex(p_evidence_digest) THEN
        RAISE EXCEPTION 'p_evidence_digest must be a lowercase hex sha256 or NULL'
            USING ERRCODE = 'RS005';
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- Terminal state fenced on owner/token/version; a late completion is accepted as
    -- long as nobody replaced the fence (no resolution, no takeover).
    -- One statement: the control closes with the terminal state (the settled-closed
    -- trigger checks exactly that at the end of the statement).
    WITH completed AS (
        UPDATE approved_action_executions AS e
        SET state = p_outcome,
            version = e.version + 1,
            finished_at_ms = now_ms,
            result_code = p_result_code,
            completion_mutation_id = p_mutation_id,
            evidence_digest = p_evidence_digest
        WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
          AND e.version = p_version AND e.state = 'executing'
        RETURNING e.dispatch_id, e.state, e.version, e.finished_at_ms
    ),
    closed AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = 'resolved',
            closed_by = 'completion',
            closed_at_ms = d.finished_at_ms,
            completion_mutation_id = p_mutation_id,
            execution_version = d.version,
            -- manual_at_ms stays, as in the manual settle.
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM completed AS d
        WHERE c.dispatch_id = d.dispatch_id AND c.status <> 'resolved'
        RETURNING c.dispatch_id
    )
    SELECT d.dispatch_id, d.state, d.version INTO dispatch_id, state, version
    FROM completed AS d;
    IF FOUND THEN
        result := 'committed';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT e.dispatch_id, e.state, e.version, e.result_code, e.completion_mutation_id,
           e.evidence_digest, r.source, r.evidence_digest AS resolution_digest
    INTO seen
    FROM approved_action_executions AS e
    LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
    WHERE e.dispatch_id = p_dispatch_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dispatch % has no execution', quote_literal(p_dispatch_id)
            USING ERRCODE = 'RS004';
    END IF;
    -- Our own completion already landed: a replay repeats every semantic field. A
    -- resolution won first: only the same outcome on the same evidence is the same fact.
    IF seen.state = p_outcome AND (
           (seen.source IS NULL
            AND seen.completion_mutation_id IS NOT DISTINCT FROM p_mutation_id
            AND seen.result_code IS NOT DISTINCT FROM p_result_code
            AND seen.evidence_digest IS NOT DISTINCT FROM p_evidence_digest)
        OR (seen.source IS NOT NULL AND p_evidence_digest IS NOT NULL
            AND seen.resolution_digest = p_evidence_digest)) THEN
        dispatch_id := seen.dispatch_id;
        state := seen.state;
        version := seen.version;
        result := 'replayed';
        RETURN NEXT;
        RETURN;
    END IF;
    IF seen.state = ANY (resolver_terminal_states()) THEN
        RAISE EXCEPTION 'dispatch % was already settled % by %; completion % (%) drifts from it',
            quote_literal(p_dispatch_id), seen.state,
            CASE seen.source WHEN 'automatic' THEN 'an automatic resolution'
                             WHEN 'manual' THEN 'a manual resolution'
                             ELSE 'a completion' END,
            quote_literal(p_mutation_id), p_outcome
            USING ERRCODE = 'RS001';
    END IF;
    PERFORM resolver_protocol_refuse(
        'complete', p_dispatch_id, p_owner, p_token, p_version, now_ms);
END
$$;


--
-- Name: resolver_execution_lease(text, text, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_execution_lease(p_dispatch_id text, p_owner text, p_lease_ms bigint, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, owner text, token uuid, version bigint, attempt integer, lease_expires_at_ms bigint, state text)
    LANGUAGE plpgsql SECURITY DEFINER ROWS 1
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    seen approved_action_executions%ROWTYPE;
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, p_lease_ms) THEN
        PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- First lease: an INSERT for an existing dispatch, checked in the statement. Not an
    -- upsert: INSERT ... ON CONFLICT DO UPDATE fires the table's statement-level UPDATE
    -- triggers (settled-closed, proposals) even when it inserts.
    INSERT INTO approved_action_executions AS e (
        dispatch_id, state, owner, token, version, attempt, lease_expires_at_ms)
    SELECT d.dispatch_id, 'leased', p_owner, gen_random_uuid(), 1, 1, now_ms + p_lease_ms
    FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = p_dispatch_id
    ON CONFLICT (dispatch_id) DO NOTHING
    RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
              e.lease_expires_at_ms, e.state
    INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state;
    IF NOT FOUND THEN
        -- Takeover of a `leased` execution whose lease expired (it never crossed the
        -- barrier, so running it again is safe). `executing` never leases again.
        UPDATE approved_action_executions AS e
        SET owner = p_owner,
            token = gen_random_uuid(),
            version = e.version + 1,
            attempt = e.attempt + 1,
            lease_expires_at_ms = now_ms + p_lease_ms
        WHERE e.dispatch_id = p_dispatch_id
          AND e.state = 'leased' AND e.lease_expires_at_ms <= now_ms
        RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
                  e.lease_expires_at_ms, e.state
        INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state;
    END IF;
    IF FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS d
                   WHERE d.dispatch_id = p_dispatch_id) THEN
        RAISE EXCEPTION 'dispatch % does not exist', quote_literal(p_dispatch_id)
            USING ERRCODE = 'RS004';
    END IF;
    SELECT * INTO seen FROM approved_action_executions AS e
    WHERE e.dispatch_id = p_dispatch_id;
    IF seen.state = 'leased' THEN
        RAISE EXCEPTION 'dispatch % is leased by % until its lease expires (at % ms, now % ms)',
            quote_literal(p_dispatch_id), quote_literal(seen.owner),
            seen.lease_expires_at_ms, now_ms
            USING ERRCODE = 'RS003', HINT = 'retry after the lease expires';
    END IF;
    RAISE EXCEPTION 'dispatch % is %: past the start barrier only recovery or a human may settle it',
        quote_literal(p_dispatch_id), seen.state
        USING ERRCODE = 'RS003';
END
$$;


--
-- Name: resolver_execution_renew(text, text, uuid, bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_execution_renew(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_lease_ms bigint, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, owner text, token uuid, version bigint, attempt integer, lease_expires_at_ms bigint, state text, controls_rearmed integer)
    LANGUAGE plpgsql SECURITY DEFINER ROWS 1
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    was text;
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, p_lease_ms) THEN
        PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    UPDATE approved_action_executions AS e
    SET version = e.version + 1,
        lease_expires_at_ms = now_ms + p_lease_ms
    WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
      AND e.version = p_version AND e.state IN ('leased', 'executing')
    RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
              e.lease_expires_at_ms, e.state
    INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state;
    IF NOT FOUND THEN
        PERFORM resolver_protocol_refuse(
            'renew', p_dispatch_id, p_owner, p_token, p_version, now_ms);
    END IF;
    -- The control follows: new execution_version, recovery lease revoked
    -- (recovery_version+1), next scan pushed to the new expiry, and a manual control
    -- re-armed (the executor is alive after all). Lock order: the execution (above), then
    -- the control, read first so that only a manual -> armed change counts as re-armed.
    SELECT c.status INTO was FROM approved_action_recovery_controls AS c
    WHERE c.dispatch_id = p_dispatch_id AND c.status IN ('armed', 'manual')
    FOR UPDATE;
    UPDATE approved_action_recovery_controls AS c
    SET execution_version = version,
        status = 'armed',
        manual_at_ms = NULL,
        (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
            = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version)),
        next_scan_at_ms = lease_expires_at_ms
    WHERE c.dispatch_id = p_dispatch_id AND c.status IN ('armed', 'manual');
    controls_rearmed := CASE WHEN was = 'manual' THEN 1 ELSE 0 END;
    RETURN NEXT;
END
$$;


--
-- Name: resolver_execution_start(text, text, uuid, bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_execution_start(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_lease_ms bigint, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, owner text, token uuid, version bigint, attempt integer, lease_expires_at_ms bigint, state text, started_at_ms bigint)
    LANGUAGE plpgsql SECURITY DEFINER ROWS 1
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, p_lease_ms) THEN
        PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- The start barrier: leased -> executing and the control armed, one statement. Lock
    -- order: the execution row (the UPDATE, whose rows the INSERT reads), then the control.
    WITH started AS (
        UPDATE approved_action_executions AS e
        SET state = 'executing',
            version = e.version + 1,
            started_at_ms = now_ms,
            lease_expires_at_ms = now_ms + p_lease_ms
        WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
          AND e.version = p_version AND e.state = 'leased' AND e.lease_expires_at_ms > now_ms
        RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
                  e.lease_expires_at_ms, e.state, e.started_at_ms
    ),
    armed AS (
        INSERT INTO approved_action_recovery_controls (
            dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms)
        SELECT s.dispatch_id, 'armed', s.version, s.lease_expires_at_ms, s.started_at_ms
        FROM started AS s
    )
    SELECT s.dispatch_id, s.owner, s.token, s.version, s.attempt, s.lease_expires_at_ms,
           s.state, s.started_at_ms
    INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state,
         started_at_ms
    FROM started AS s;
    IF NOT FOUND THEN
        PERFORM resolver_protocol_refuse(
            'start', p_dispatch_id, p_owner, p_token, p_version, now_ms);
    END IF;
    RETURN NEXT;
END
$$;


--
-- Name: resolver_fact_acts(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_fact_acts() RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    RETURN ARRAY['decide', 'propose', 'confirm', 'reject', 'withdraw'];
END
$$;


--
-- Name: resolver_fact_fresh(bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_fact_fresh(p_verified_at_ms bigint, p_now_ms bigint, p_clock_leeway_ms bigint) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF p_verified_at_ms NOT BETWEEN p_now_ms - p_clock_leeway_ms
                                AND p_now_ms + p_clock_leeway_ms THEN
        RAISE EXCEPTION 'the fact was verified at % ms, more than % ms from the database clock (%)',
            p_verified_at_ms, p_clock_leeway_ms, p_now_ms USING ERRCODE = 'RS007';
    END IF;
END
$$;


--
-- Name: resolver_fact_shape(text[], text, text, text, text, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_fact_shape(p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $$
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


--
-- Name: resolver_fact_unused(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_fact_unused(p_mutation_id text, p_signature text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
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


--
-- Name: resolver_finding_outcome(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_finding_outcome(p_finding text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE p_finding WHEN 'verified_succeeded' THEN 'succeeded'
                          WHEN 'verified_failed' THEN 'failed' END
$$;


--
-- Name: resolver_finding_status(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_finding_status(p_finding text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE
        WHEN resolver_finding_outcome(p_finding) IS NOT NULL THEN 'resolved'
        WHEN p_finding IN ('conflict', 'unsupported') THEN 'manual'
        ELSE 'armed'
    END
$$;


--
-- Name: resolver_guard_control(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_guard_control() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    rule text;
BEGIN
    rule := CASE
        WHEN OLD.status = 'resolved' THEN 'a resolved control never reopens or changes'
        WHEN NEW.dispatch_id <> OLD.dispatch_id THEN 'a control keeps its dispatch_id'
        WHEN NEW.execution_version < OLD.execution_version
          OR NEW.recovery_version < OLD.recovery_version
            THEN 'execution_version and recovery_version never decrease'
        ELSE 'a recovery lease changes only with a recovery_version bump'
    END;
    RAISE EXCEPTION 'approved_action_recovery_controls %: % rejected (%)',
        NEW.dispatch_id, TG_OP, rule
        USING ERRCODE = 'RS006',
              HINT = 'controls change only through the resolver_execution_* functions and the resolver';
END
$$;


--
-- Name: resolver_guard_definer_write(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_guard_definer_write() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: resolver_guard_execution(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_guard_execution() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    rule text;
BEGIN
    rule := CASE
        WHEN OLD.state = ANY (resolver_terminal_states()) THEN 'a terminal execution never changes'
        WHEN NEW.dispatch_id <> OLD.dispatch_id THEN 'an execution keeps its dispatch_id'
        WHEN OLD.state = 'executing' AND NEW.state = 'leased'
            THEN 'executing never returns to leased'
        WHEN NOT (NEW.state = OLD.state OR (OLD.state = 'leased' AND NEW.state = 'executing')
                  OR (OLD.state = 'executing' AND NEW.state = ANY (resolver_terminal_states())))
            THEN 'only leased -> executing -> terminal (the start barrier cannot be skipped)'
        WHEN NEW.version < OLD.version OR NEW.attempt < OLD.attempt
            THEN 'version and attempt never decrease'
        WHEN NEW.version = OLD.version AND NEW.lease_expires_at_ms > OLD.lease_expires_at_ms
            THEN 'a lease is extended only with a version bump'
        WHEN NEW.version = OLD.version
            THEN 'a state, owner or token change needs a version bump'
        ELSE 'started_at_ms is set once, at the start barrier'
    END;
    RAISE EXCEPTION 'approved_action_executions %: % rejected (%)', NEW.dispatch_id, TG_OP, rule
        USING ERRCODE = 'RS006',
              HINT = 'executors change executions only through the resolver_execution_* functions';
END
$$;


--
-- Name: resolver_guard_insert(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_guard_insert() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    IF resolver_importing_history(TG_RELID) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION '%: INSERT of % rejected (%)', TG_TABLE_NAME, NEW.dispatch_id,
        CASE TG_TABLE_NAME
            WHEN 'approved_action_executions'
                THEN 'an execution is born leased, at version 1 and attempt 1, with no start or outcome'
            ELSE 'a control is born armed by the start barrier, with no recovery lease'
        END
        USING ERRCODE = 'RS006',
              HINT = 'executors write executions and controls only through the resolver_execution_* functions';
END
$$;


--
-- Name: resolver_guard_run_origin(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_guard_run_origin() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: resolver_importing_history(regclass); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_importing_history(p_table regclass) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT coalesce(current_setting('resolver.import_history', true), '') = 'on'
       AND pg_has_role(session_user, (SELECT c.relowner FROM pg_class AS c WHERE c.oid = p_table),
                       'MEMBER')
$$;


--
-- Name: resolver_is_action_type(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_is_action_type(p_value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT length(p_value) BETWEEN 1 AND 64 AND p_value ~ '^[a-z]'
       AND p_value !~ '[^a-z0-9_.-]'
$$;


--
-- Name: resolver_is_identifier(text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_is_identifier(p_value text, p_max_length integer) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT length(p_value) BETWEEN 1 AND p_max_length AND p_value ~ '^[A-Za-z0-9]'
       AND p_value !~ '[^A-Za-z0-9_.:-]'
$$;


--
-- Name: resolver_needs_two_people(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_needs_two_people(p_action_type text, p_outcome text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT EXISTS (
        SELECT 1 FROM recovery_two_person_rules AS r
        WHERE resolver_decision_settles(r.decision) = p_outcome
          AND (r.action_type_pattern IN (p_action_type, '*')
               OR (right(r.action_type_pattern, 1) = '*'
                   AND left(p_action_type, length(r.action_type_pattern) - 1)
                       = left(r.action_type_pattern, -1))))
$$;


--
-- Name: resolver_now_ms(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_now_ms(override_ms bigint) RETURNS bigint
    LANGUAGE sql PARALLEL SAFE
    AS $$ SELECT COALESCE(override_ms, (extract(epoch from clock_timestamp()) * 1000)::bigint) $$;


--
-- Name: resolver_open_late_watch(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_open_late_watch() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO recovery_late_watches (
        dispatch_id, decision_mutation_id, decided_outcome, decided_at_ms, next_scan_at_ms)
    VALUES (NEW.dispatch_id, NEW.mutation_id, NEW.outcome, NEW.resolved_at_ms,
            NEW.resolved_at_ms);
    RETURN NULL;
END
$$;


--
-- Name: resolver_outcome_consumer_cursor(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcome_consumer_cursor(p_consumer text) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT c.cursor_xid::text || ':' || c.cursor_position::text
    FROM recovery_outcome_consumers AS c WHERE c.consumer = p_consumer
$$;


--
-- Name: resolver_outcome_consumer_drop(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcome_consumer_drop(p_consumer text) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    WITH gone AS (DELETE FROM recovery_outcome_consumers AS c
                  WHERE c.consumer = p_consumer RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM gone)
$$;


--
-- Name: resolver_outcome_consumer_save(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcome_consumer_save(p_consumer text, p_cursor text) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    at_xid xid8;
    at_position bigint;
    now_ms bigint := resolver_now_ms(NULL);
    stored text;
BEGIN
    IF NOT coalesce(resolver_is_id(p_consumer), false) THEN
        RAISE EXCEPTION 'p_consumer must be 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric'
            USING ERRCODE = 'RS005';
    END IF;
    SELECT c.xid, c.seq INTO at_xid, at_position
    FROM resolver_outcome_cursor_parse(p_cursor) AS c;
    INSERT INTO recovery_outcome_consumers AS t (
        consumer, cursor_xid, cursor_position, registered_at_ms, saved_at_ms)
    VALUES (p_consumer, at_xid, at_position, now_ms, now_ms)
    ON CONFLICT (consumer) DO UPDATE
    SET (cursor_xid, cursor_position, saved_at_ms) =
        (SELECT g.x, g.p, now_ms
         FROM (SELECT EXCLUDED.cursor_xid AS x, EXCLUDED.cursor_position AS p
               WHERE (EXCLUDED.cursor_xid, EXCLUDED.cursor_position)
                     > (t.cursor_xid, t.cursor_position)
               UNION ALL
               SELECT t.cursor_xid, t.cursor_position
               WHERE (EXCLUDED.cursor_xid, EXCLUDED.cursor_position)
                     <= (t.cursor_xid, t.cursor_position)) AS g)
    RETURNING t.cursor_xid::text || ':' || t.cursor_position::text INTO stored;
    RETURN stored;
END
$$;


--
-- Name: resolver_outcome_cursor_now(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcome_cursor_now() RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text || ':0'
$$;


--
-- Name: resolver_outcome_cursor_parse(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcome_cursor_parse(p_cursor text, OUT xid xid8, OUT seq bigint) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
BEGIN
    IF p_cursor IS NULL OR p_cursor = '' THEN
        xid := '0'::xid8;
        seq := 0;
        RETURN;
    END IF;
    IF p_cursor !~ '^[0-9]{1,20}:[0-9]{1,19}$' THEN
        RAISE EXCEPTION 'cursor must be xid:seq as the feed handed it out'
            USING ERRCODE = 'RS005';
    END IF;
    xid := split_part(p_cursor, ':', 1)::xid8;
    seq := split_part(p_cursor, ':', 2)::bigint;
END
$_$;


--
-- Name: resolver_outcome_listen(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcome_listen() RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    now_ms bigint := resolver_now_ms(NULL);
    until_ms bigint := now_ms + 60000;
BEGIN
    DELETE FROM recovery_outcome_listeners AS l
    WHERE l.listening_until_ms <= now_ms AND l.pid <> pg_backend_pid();
    INSERT INTO recovery_outcome_listeners AS l (pid, listening_until_ms)
    VALUES (pg_backend_pid(), until_ms)
    ON CONFLICT (pid) DO UPDATE SET listening_until_ms = EXCLUDED.listening_until_ms;
    RETURN until_ms;
END
$$;


--
-- Name: resolver_outcome_scope(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcome_scope() RETURNS text[]
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    IF to_regrole('resolver_outcome_reader') IS NULL
       OR NOT pg_has_role(session_user, 'resolver_outcome_reader', 'MEMBER') THEN
        RETURN NULL;
    END IF;
    IF (SELECT r.rolsuper FROM pg_roles AS r WHERE r.rolname = session_user) THEN
        RETURN NULL;
    END IF;
    IF to_regrole('resolver_executor') IS NOT NULL
       AND pg_has_role(session_user, 'resolver_executor', 'MEMBER') THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY(
        SELECT DISTINCT s.project_id FROM recovery_outcome_reader_scopes AS s
        WHERE CASE WHEN to_regrole(s.role_name) IS NULL THEN false
                   ELSE pg_has_role(session_user, s.role_name, 'MEMBER') END
        ORDER BY 1);
END
$$;


--
-- Name: resolver_outcome_unlisten(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcome_unlisten() RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    DELETE FROM recovery_outcome_listeners AS l WHERE l.pid = pg_backend_pid();
    RETURN FOUND;
END
$$;


--
-- Name: resolver_outcomes_after(text, integer, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcomes_after(p_cursor text DEFAULT NULL::text, p_limit integer DEFAULT 100, p_project_id text DEFAULT NULL::text) RETURNS TABLE(cursor text, kind text, dispatch_id text, approval_request_id text, project_id text, action_type text, state text, settled_by text, finding text, result_code text, evidence_digest text, mutation_id text, reason_code text, actors text[], superseded_by text, occurred_at_ms bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    after_xid xid8;
    after_position bigint;
    scope text[] := resolver_outcome_scope();
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'p_limit must be 1-1000' USING ERRCODE = 'RS005';
    END IF;
    SELECT c.xid, c.seq INTO after_xid, after_position
    FROM resolver_outcome_cursor_parse(p_cursor) AS c;
    RETURN QUERY
    SELECT o.xid::text || ':' || o.seq::text, o.kind::text, o.dispatch_id,
           o.approval_request_id, o.project_id, o.action_type, o.state, o.settled_by::text,
           o.finding, o.result_code, o.evidence_digest, o.mutation_id, o.reason_code,
           o.actors, o.superseded_by, o.occurred_at_ms
    FROM recovery_outcomes AS o
    WHERE (o.xid, o.seq) > (after_xid, after_position)
      AND o.xid < pg_snapshot_xmin(pg_current_snapshot())
      AND (p_project_id IS NULL OR o.project_id = p_project_id)
      AND (scope IS NULL OR o.project_id = ANY (scope))
    ORDER BY o.xid, o.seq
    LIMIT p_limit;
END
$$;


--
-- Name: resolver_outcomes_append_contradicted(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcomes_append_contradicted() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO recovery_outcomes (
        kind, dispatch_id, approval_request_id, project_id, action_type, state, settled_by,
        finding, result_code, evidence_digest, mutation_id, occurred_at_ms)
    SELECT 'contradicted', l.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           e.state, 'resolver', l.finding, l.result_code, l.evidence_digest,
           l.decision_mutation_id, l.observed_at_ms
    FROM observed AS l
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE NOT l.agrees
    ORDER BY l.dispatch_id;
    IF FOUND THEN
        PERFORM resolver_outcomes_notify();
    END IF;
    RETURN NULL;
END
$$;


--
-- Name: resolver_outcomes_append_settled(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcomes_append_settled() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    -- Most updates settle nothing (every start barrier, every renewal): they read the
    -- transition table once and leave, where an INSERT of no rows would still open the feed's
    -- indexes and fire its statement trigger.
    IF NOT EXISTS (SELECT 1 FROM settled AS n WHERE n.state = ANY (resolver_terminal_states())) THEN
        RETURN NULL;
    END IF;
    INSERT INTO recovery_outcomes (
        kind, dispatch_id, approval_request_id, project_id, action_type, state, settled_by,
        finding, result_code, evidence_digest, mutation_id, reason_code, actors,
        occurred_at_ms)
    SELECT 'settled', n.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           n.state,
           CASE r.source WHEN 'automatic' THEN 'resolver' WHEN 'manual' THEN 'person'
                ELSE 'executor' END,
           r.finding, coalesce(n.result_code, r.result_code), n.evidence_digest,
           coalesce(r.mutation_id, n.completion_mutation_id), r.reason_code,
           CASE WHEN r.source = 'manual' THEN
               ARRAY(SELECT a.user_id FROM recovery_authorizations AS a
                     WHERE a.mutation_id = r.mutation_id ORDER BY a.user_id) END,
           n.finished_at_ms
    FROM settled AS n
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
    WHERE n.state = ANY (resolver_terminal_states())
    ORDER BY n.dispatch_id;
    IF FOUND THEN
        PERFORM resolver_outcomes_notify();
    END IF;
    RETURN NULL;
END
$$;


--
-- Name: resolver_outcomes_append_superseded(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcomes_append_superseded() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO recovery_outcomes (
        kind, dispatch_id, approval_request_id, project_id, action_type, state,
        superseded_by, occurred_at_ms)
    SELECT 'superseded', d.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           resolver_effective_state(e.state, e.lease_expires_at_ms, NEW.created_at_ms),
           NEW.dispatch_id, NEW.created_at_ms
    FROM approved_action_dispatches AS d
    LEFT JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE d.dispatch_id = NEW.supersedes_dispatch_id;
    PERFORM resolver_outcomes_notify();
    RETURN NULL;
END
$$;


--
-- Name: resolver_outcomes_guard(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcomes_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF pg_trigger_depth() < 2 THEN
        IF NOT resolver_importing_history(TG_RELID) THEN
            RAISE EXCEPTION 'INSERT of recovery_outcomes only through the outcome appends'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    RETURN NULL;
END
$$;


--
-- Name: resolver_outcomes_notify(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_outcomes_notify() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF coalesce(current_setting('resolver.outcomes_notify', true), '') <> 'off'
       AND EXISTS (SELECT 1 FROM recovery_outcome_listeners AS l
                   WHERE l.listening_until_ms > resolver_now_ms(NULL)) THEN
        PERFORM pg_notify('resolver_outcomes', pg_current_xact_id()::text);
    END IF;
END
$$;


--
-- Name: resolver_proposal_close(text, text, text, bigint, text, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_proposal_close(p_dispatch_id text, p_mutation_id text, p_act text, p_proposal_id bigint, p_reason_code text, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint, p_max_auth_age_ms bigint DEFAULT NULL::bigint, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, result text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    v_closed_as text;
    bounds record;
    prop recovery_proposals%ROWTYPE;
BEGIN
    IF p_act IS NULL OR p_act NOT IN ('withdraw', 'reject') THEN
        RAISE EXCEPTION 'resolver_proposal_close records a reject or withdraw fact, not %',
            coalesce(quote_literal(p_act), 'NULL') USING ERRCODE = 'RS008';
    END IF;
    IF p_proposal_id IS NULL THEN
        RAISE EXCEPTION 'p_proposal_id must name the proposal the fact ends'
            USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION 'p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]'
            USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_code(p_reason_code), false) THEN
        RAISE EXCEPTION 'p_reason_code must match [a-z0-9_.-]{1,64}' USING ERRCODE = 'RS005';
    END IF;
    PERFORM resolver_fact_shape(p_amr, p_issuer, p_token_kid, p_signing_kid, p_signature,
                                p_verified_at_ms);
    SELECT * INTO bounds FROM resolver_act_bounds(p_max_auth_age_ms, NULL);
    PERFORM resolver_fact_unused(p_mutation_id, p_signature);
    v_closed_as := CASE p_act WHEN 'withdraw' THEN 'withdrawn' ELSE 'rejected' END;
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
    PERFORM 1 FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d ON d.dispatch_id = e.dispatch_id
    WHERE e.dispatch_id = p_dispatch_id AND d.project_id = p_project_id
    FOR UPDATE OF e;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    PERFORM resolver_fact_fresh(p_verified_at_ms, now_ms, bounds.clock_leeway_ms);
    dispatch_id := p_dispatch_id;
    IF NOT (p_auth_time_ms >= now_ms - bounds.max_auth_age_ms
            AND p_auth_time_ms <= now_ms + bounds.clock_leeway_ms) THEN
        result := 'stale_auth';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT * INTO prop FROM recovery_proposals AS rp
    WHERE rp.dispatch_id = p_dispatch_id AND rp.project_id = p_project_id
      AND rp.closed_as IS NULL
    FOR UPDATE;
    IF prop.proposal_id IS NOT NULL AND prop.expires_at_ms <= now_ms THEN
        RAISE EXCEPTION 'proposal % expired: it is no longer open', prop.proposal_id
            USING ERRCODE = 'RS008';
    END IF;
    IF prop.proposal_id IS NULL OR prop.proposal_id <> p_proposal_id THEN
        RAISE EXCEPTION 'proposal % is not open on dispatch %', p_proposal_id,
            quote_literal(p_dispatch_id) USING ERRCODE = 'RS008';
    END IF;
    IF p_act = 'withdraw' AND prop.proposed_by <> p_user_id THEN
        RAISE EXCEPTION 'only the proposer withdraws proposal %', prop.proposal_id
            USING ERRCODE = 'RS008';
    END IF;
    IF p_act = 'reject' AND prop.proposed_by = p_user_id THEN
        RAISE EXCEPTION 'the proposer of proposal % withdraws it, never rejects it',
            prop.proposal_id USING ERRCODE = 'RS008';
    END IF;
    IF prop.verified_at_ms IS NULL THEN
        RAISE EXCEPTION 'proposal %''s fact names no act', prop.proposal_id
            USING ERRCODE = 'RS008';
    END IF;
    UPDATE recovery_proposals AS rp
    SET closed_as = v_closed_as, closed_at_ms = now_ms, closed_by = p_user_id,
        closed_mutation_id = p_mutation_id, close_reason_code = p_reason_code,
        closed_auth_time_ms = p_auth_time_ms, closed_amr = p_amr,
        closed_project_version = p_project_version,
        closed_role_binding_version = p_role_binding_version, closed_issuer = p_issuer,
        closed_token_kid = p_token_kid, closed_signing_kid = p_signing_kid,
        closed_signature = p_signature, closed_verified_at_ms = p_verified_at_ms
    WHERE rp.proposal_id = prop.proposal_id;
    PERFORM resolver_audit_append(p_mutation_id, p_dispatch_id,
                                  resolver_audit_close(p_mutation_id), now_ms);
    result := v_closed_as;
    RETURN NEXT;
END
$$;


--
-- Name: resolver_proposal_close_once(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_proposal_close_once() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: resolver_proposals_void(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_proposals_void() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
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


--
-- Name: resolver_protocol_check_lease(text, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_protocol_check_lease(p_owner text, p_lease_ms bigint) RETURNS void
    LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, 1) THEN
        RAISE EXCEPTION 'p_owner must be 1-128 characters' USING ERRCODE = 'RS005';
    END IF;
    IF NOT resolver_protocol_lease_ok('-', p_lease_ms) THEN
        RAISE EXCEPTION 'p_lease_ms must be between 1 and 86400000 (one day)'
            USING ERRCODE = 'RS005';
    END IF;
END
$$;


--
-- Name: resolver_protocol_lease_ok(text, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_protocol_lease_ok(p_owner text, p_lease_ms bigint) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT coalesce(length(p_owner) BETWEEN 1 AND 128 AND p_lease_ms BETWEEN 1 AND 86400000,
                    false)
$$;


--
-- Name: resolver_protocol_now_ms(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_protocol_now_ms(p_now_ms bigint) RETURNS bigint
    LANGUAGE sql
    AS $$
    SELECT CASE WHEN p_now_ms IS NULL THEN resolver_now_ms(NULL)
                ELSE resolver_protocol_test_clock(p_now_ms) END
$$;


--
-- Name: resolver_protocol_refuse(text, text, text, uuid, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_protocol_refuse(p_step text, p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_now_ms bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    seen approved_action_executions%ROWTYPE;
BEGIN
    -- Explains a fenced write that matched no row: which fence did not hold.
    SELECT * INTO seen FROM approved_action_executions AS e
    WHERE e.dispatch_id = p_dispatch_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dispatch % has no execution', quote_literal(p_dispatch_id)
            USING ERRCODE = 'RS004';
    END IF;
    -- A takeover always issues a new token: a stale version under the caller's own token is
    -- its own renew moving on, not a takeover.
    IF seen.state = 'leased' AND seen.version <> p_version AND seen.token IS DISTINCT FROM p_token THEN
        RAISE EXCEPTION 'lease on % was taken over (attempt %): % fence lost',
            quote_literal(p_dispatch_id), seen.attempt, p_step
            USING ERRCODE = 'RS002', HINT = 'stop: never start the side effect';
    END IF;
    IF seen.version = p_version AND (seen.owner, seen.token) IS DISTINCT FROM (p_owner, p_token) THEN
        RAISE EXCEPTION '% of % rejected: the owner/token fence does not hold',
            p_step, quote_literal(p_dispatch_id)
            USING ERRCODE = 'RS001';
    END IF;
    IF seen.state = 'leased' AND seen.version <> p_version
       AND (seen.owner, seen.token) = (p_owner, p_token) THEN
        RAISE EXCEPTION '% of % at version % rejected: a stale version, the execution is % at version % (a later renew moved it on)',
            p_step, quote_literal(p_dispatch_id), p_version, seen.state, seen.version
            USING ERRCODE = 'RS001',
                  HINT = 'pass the version the last call returned; stop a heartbeat before the mutation''s transaction';
    END IF;
    -- Receipts are fenced on the live lease: once recovery may settle the execution, no
    -- receipt (and so no mutation in the same transaction) may commit.
    IF p_step = 'receipt' AND seen.state = 'executing' AND seen.lease_expires_at_ms <= p_now_ms THEN
        RAISE EXCEPTION 'lease on % expired at % ms (now % ms): a receipt needs a live lease; roll back the mutation',
            quote_literal(p_dispatch_id), seen.lease_expires_at_ms, p_now_ms
            USING ERRCODE = 'RS002',
                  HINT = 'renew before the mutation''s transaction; nothing of this transaction commits';
    END IF;
    IF p_step = 'start' AND seen.state = 'leased' THEN
        RAISE EXCEPTION 'lease on % expired before the start barrier (at % ms, now % ms)',
            quote_literal(p_dispatch_id), seen.lease_expires_at_ms, p_now_ms
            USING ERRCODE = 'RS002', HINT = 'lease again; never start the side effect';
    END IF;
    IF p_step = 'start' THEN
        RAISE EXCEPTION 'dispatch % is already % (version %): the start fence does not hold',
            quote_literal(p_dispatch_id), seen.state, seen.version
            USING ERRCODE = 'RS001';
    END IF;
    RAISE EXCEPTION '% of % at version % rejected: the version/state fence does not hold, now % at version %',
        p_step, quote_literal(p_dispatch_id), p_version, seen.state, seen.version
        USING ERRCODE = 'RS001';
END
$$;


--
-- Name: resolver_protocol_test_clock(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_protocol_test_clock(p_now_ms bigint) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    -- The clock override is the test clock: only the schema owner's own sessions (the
    -- test suites) may move time; an executor role gets the database clock or a refusal.
    IF p_now_ms IS NOT NULL AND NOT pg_has_role(session_user, current_user, 'MEMBER') THEN
        RAISE EXCEPTION 'p_now_ms (the test clock) is refused for role %', session_user
            USING ERRCODE = 'RS005',
                  HINT = 'pass NULL: the protocol runs on the database clock';
    END IF;
    RETURN resolver_now_ms(p_now_ms);
END
$$;


--
-- Name: resolver_prune_batch(bigint, integer, text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_prune_batch(p_run_id bigint, p_limit integer, p_dispatch_ids text[]) RETURNS TABLE(dispatches bigint, audit bigint, evidence bigint, remnants bigint, outcomes bigint, outcomes_unread bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
DECLARE
    v_unread_xid xid8;
    v_unread_seq bigint;
    v_outcomes bigint;
    v_outcomes_unread bigint;
    r recovery_prune_runs;
    v_settled text[];
    v_remnants text[] := '{}';
    v_rows text[];
    v_audit text[];
    v_evidence bigint := 0;
    v_n bigint;
    v_first_seq bigint;
    v_last_seq bigint;
    v_table record;
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

    -- The slowest registered consumer's cursor: every outcome record after it is unread by
    -- someone. Unless the run goes past consumers, a dispatch with such a record waits for a
    -- later run (a consumer registered while this batch runs is protected from its commit on).
    SELECT c.cursor_xid, c.cursor_position INTO v_unread_xid, v_unread_seq
    FROM recovery_outcome_consumers AS c
    ORDER BY c.cursor_xid, c.cursor_position
    LIMIT 1;

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
              AND (r.past_consumers OR v_unread_xid IS NULL OR NOT EXISTS (
                      SELECT 1 FROM recovery_outcomes AS o
                      WHERE o.dispatch_id = c.dispatch_id
                        AND (o.xid, o.seq) > (v_unread_xid, v_unread_seq)))
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
              AND (r.past_consumers OR v_unread_xid IS NULL OR NOT EXISTS (
                      SELECT 1 FROM recovery_outcomes AS o
                      WHERE o.dispatch_id = c.dispatch_id
                        AND (o.xid, o.seq) > (v_unread_xid, v_unread_seq)))
            FOR UPDATE OF e, c, d SKIP LOCKED) AS s;
    END IF;

    -- Audit remnants (include-audit only): identity and resolution, or the links of its
    -- proposals' rejects and withdrawals, left by an earlier prune. A resolution proves the
    -- dispatch was settled; no execution means nothing can run it.
    IF r.include_audit THEN
        SELECT coalesce(array_agg(s.dispatch_id), '{}') INTO v_remnants FROM (
            SELECT d.dispatch_id
            FROM approved_action_dispatches AS d
            WHERE d.dispatch_id = ANY (p_dispatch_ids)
              AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                              WHERE e.dispatch_id = d.dispatch_id)
              AND (EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS res
                           WHERE res.dispatch_id = d.dispatch_id
                             AND res.resolved_at_ms < r.cutoff_ms)
                   OR EXISTS (SELECT 1 FROM recovery_proposals AS p
                              JOIN recovery_audit_chain AS l
                                ON l.mutation_id = p.closed_mutation_id
                              WHERE p.dispatch_id = d.dispatch_id
                                AND p.closed_as IN ('rejected', 'withdrawn')
                                AND l.recorded_at_ms < r.cutoff_ms))
              AND (r.past_consumers OR v_unread_xid IS NULL OR NOT EXISTS (
                      SELECT 1 FROM recovery_outcomes AS o
                      WHERE o.dispatch_id = d.dispatch_id
                        AND (o.xid, o.seq) > (v_unread_xid, v_unread_seq)))
            FOR UPDATE OF d SKIP LOCKED) AS s;
    END IF;

    -- What stays findable of each dispatch this batch prunes, before its
    -- rows go: a remnant pruned again keeps the state and closure its first run recorded.
    INSERT INTO recovery_pruned_dispatches AS t (
        dispatch_id, idempotency_key_sha256, approval_request_id, project_id, action_type,
        created_at_ms, state, closed_by, run_id, pruned_at_ms)
    SELECT d.dispatch_id, encode(sha256(convert_to(d.idempotency_key, 'UTF8')), 'hex'),
           d.approval_request_id, d.project_id, d.action_type, d.created_at_ms, e.state,
           c.closed_by, p_run_id, resolver_now_ms(NULL)
    FROM approved_action_dispatches AS d
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    WHERE d.dispatch_id = ANY (v_settled || v_remnants)
    ON CONFLICT (dispatch_id) DO UPDATE
    SET run_id = EXCLUDED.run_id,
        pruned_at_ms = EXCLUDED.pruned_at_ms,
        state = coalesce(EXCLUDED.state, t.state),
        closed_by = coalesce(EXCLUDED.closed_by, t.closed_by);
    -- The records' own retention: one period after their prune, at most a batch's worth.
    DELETE FROM recovery_pruned_dispatches AS t
    WHERE t.dispatch_id IN (SELECT o.dispatch_id FROM recovery_pruned_dispatches AS o
                            WHERE o.pruned_at_ms < r.cutoff_ms
                            ORDER BY o.pruned_at_ms, o.dispatch_id
                            LIMIT p_limit
                            FOR UPDATE SKIP LOCKED);

    -- The fact triggers let these deletes through because this function is on their call
    -- stack (resolver_reject_mutation); nothing a session sets opens them.
    DELETE FROM approved_action_recovery_controls WHERE dispatch_id = ANY (v_settled);
    DELETE FROM approved_action_executions WHERE dispatch_id = ANY (v_settled);
    DELETE FROM action_receipts WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    -- Each provider's own evidence tables, as `resolver migrate` registered them from what the
    -- installed providers declare: their rows of these dispatches go too.
    FOR v_table IN
        SELECT t.table_name, t.dispatch_column FROM resolver_evidence_tables AS t
        ORDER BY t.table_name
    LOOP
        EXECUTE format('DELETE FROM %I WHERE %I = ANY ($1)',
                       v_table.table_name, v_table.dispatch_column)
            USING v_settled || v_remnants;
        GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    END LOOP;
    -- The outcome records go with the execution they report; those after the slowest
    -- consumer's cursor (only a run past consumers takes them) are counted apart.
    WITH gone AS (
        DELETE FROM recovery_outcomes AS o WHERE o.dispatch_id = ANY (v_settled || v_remnants)
        RETURNING o.xid, o.seq
    )
    SELECT count(*),
           count(*) FILTER (WHERE v_unread_xid IS NOT NULL
                              AND (g.xid, g.seq) > (v_unread_xid, v_unread_seq))
    INTO v_outcomes, v_outcomes_unread
    FROM gone AS g;

    -- Identity rows go when nothing audits them (no decision, and no reject or withdraw of
    -- a proposal: closed by the executor's own completion) or when the audit facts go too; a
    -- dispatch a newer one supersedes keeps its identity. Its proposals go with it (ON DELETE
    -- CASCADE), so a kept identity keeps the facts its links are rebuilt from.
    SELECT coalesce(array_agg(d.dispatch_id), '{}') INTO v_rows
    FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = ANY (v_settled || v_remnants)
      AND (r.include_audit
           OR (NOT EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS res
                           WHERE res.dispatch_id = d.dispatch_id)
               AND NOT EXISTS (SELECT 1 FROM recovery_proposals AS p
                               JOIN recovery_audit_chain AS l
                                 ON l.mutation_id = p.closed_mutation_id
                               WHERE p.dispatch_id = d.dispatch_id
                                 AND p.closed_as IN ('rejected', 'withdrawn'))))
      AND NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS n
                      WHERE n.supersedes_dispatch_id = d.dispatch_id);
    SELECT coalesce(array_agg(d.dispatch_id), '{}') INTO v_audit
    FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = ANY (v_rows)
      AND (EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS res
                   WHERE res.dispatch_id = d.dispatch_id)
           OR EXISTS (SELECT 1 FROM recovery_proposals AS p
                      JOIN recovery_audit_chain AS l ON l.mutation_id = p.closed_mutation_id
                      WHERE p.dispatch_id = d.dispatch_id
                        AND p.closed_as IN ('rejected', 'withdrawn')));

    DELETE FROM recovery_authorizations AS a
    USING approved_action_recovery_resolutions AS res
    WHERE a.mutation_id = res.mutation_id AND res.dispatch_id = ANY (v_audit);
    -- Their audit links go with them (the decision's, and those of its proposals' rejects and
    -- withdrawals): the export carries each link, so `resolver audit verify --export` still
    -- walks the whole chain. The run records the range of links it removed: a link is
    -- accepted as pruned only inside the range of the run whose export carries it.
    WITH decisions AS (
        DELETE FROM recovery_audit_chain AS l
        USING approved_action_recovery_resolutions AS res
        WHERE l.mutation_id = res.mutation_id AND res.dispatch_id = ANY (v_audit)
        RETURNING l.seq
    ),
    closes AS (
        DELETE FROM recovery_audit_chain AS l
        USING recovery_proposals AS p
        WHERE l.mutation_id = p.closed_mutation_id AND p.dispatch_id = ANY (v_audit)
          AND p.closed_as IN ('rejected', 'withdrawn')
        RETURNING l.seq
    )
    SELECT min(seq), max(seq) INTO v_first_seq, v_last_seq
    FROM (SELECT seq FROM decisions UNION ALL SELECT seq FROM closes) AS removed;
    -- Late evidence and its watch go by ON DELETE CASCADE from the resolution.
    DELETE FROM approved_action_recovery_resolutions WHERE dispatch_id = ANY (v_audit);
    DELETE FROM approved_action_dispatches WHERE dispatch_id = ANY (v_rows);

    dispatches := cardinality(v_settled);
    audit := cardinality(v_audit);
    evidence := v_evidence;
    remnants := cardinality(ARRAY(SELECT unnest(v_remnants) INTERSECT SELECT unnest(v_rows)));
    outcomes := v_outcomes;
    outcomes_unread := v_outcomes_unread;
    UPDATE recovery_prune_runs
    SET batches = batches + 1,
        outcomes_pruned = outcomes_pruned + v_outcomes,
        outcomes_unread = recovery_prune_runs.outcomes_unread + v_outcomes_unread,
        dispatches_pruned = dispatches_pruned + dispatches,
        audit_pruned = audit_pruned + audit,
        evidence_pruned = evidence_pruned + evidence,
        last_batch_at_ms = resolver_now_ms(NULL),
        audit_first_seq = least(audit_first_seq, v_first_seq),
        audit_last_seq = greatest(audit_last_seq, v_last_seq)
    WHERE run_id = p_run_id;
    RETURN NEXT;
END
$_$;


--
-- Name: resolver_prune_begin(bigint, boolean, text, text, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_prune_begin(p_cutoff_ms bigint, p_include_audit boolean, p_export_digest text, p_actor text, p_past_consumers boolean DEFAULT false) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    v_run_id bigint;
BEGIN
    IF p_cutoff_ms IS NULL OR p_cutoff_ms > resolver_now_ms(NULL) THEN
        RAISE EXCEPTION 'prune cut-off must be a time in the past'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_export_digest IS NOT NULL AND NOT resolver_is_sha256_hex(p_export_digest) THEN
        RAISE EXCEPTION 'an export digest is a lowercase hex sha256'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(p_include_audit, true) AND p_export_digest IS NULL THEN
        RAISE EXCEPTION 'pruning audit facts requires the sha256 of their export'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO recovery_prune_runs (started_at_ms, cutoff_ms, include_audit, export_digest,
                                     db_user, actor, past_consumers)
    VALUES (resolver_now_ms(NULL), p_cutoff_ms, p_include_audit, p_export_digest,
            session_user, left(p_actor, 128), coalesce(p_past_consumers, false))
    RETURNING run_id INTO v_run_id;
    RETURN v_run_id;
END
$$;


--
-- Name: resolver_prune_candidates(bigint, boolean, text, integer, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_prune_candidates(p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer, p_past_consumers boolean DEFAULT false) RETURNS TABLE(dispatch_id text, audited boolean, record jsonb)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    WITH unread AS (
        -- The slowest registered consumer's cursor, unless the run goes past consumers.
        SELECT c.cursor_xid AS xid, c.cursor_position AS seq
        FROM recovery_outcome_consumers AS c
        WHERE NOT coalesce(p_past_consumers, false)
        ORDER BY c.cursor_xid, c.cursor_position
        LIMIT 1
    ),
    ids AS (
        (SELECT c.dispatch_id
         FROM approved_action_recovery_controls AS c
         JOIN approved_action_executions AS e USING (dispatch_id)
         WHERE c.dispatch_id > p_after
           AND c.status = 'resolved' AND c.closed_at_ms < p_cutoff_ms
           AND e.state = ANY (resolver_terminal_states()) AND e.finished_at_ms < p_cutoff_ms
           AND NOT EXISTS (SELECT 1 FROM recovery_outcomes AS o, unread AS u
                           WHERE o.dispatch_id = c.dispatch_id AND (o.xid, o.seq) > (u.xid, u.seq))
         ORDER BY c.dispatch_id
         LIMIT least(p_limit, 10000))
        UNION ALL
        (SELECT res.dispatch_id
         FROM approved_action_recovery_resolutions AS res
         WHERE p_include_audit AND res.dispatch_id > p_after
           AND res.resolved_at_ms < p_cutoff_ms
           AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                           WHERE e.dispatch_id = res.dispatch_id)
           AND NOT EXISTS (SELECT 1 FROM recovery_outcomes AS o, unread AS u
                           WHERE o.dispatch_id = res.dispatch_id AND (o.xid, o.seq) > (u.xid, u.seq))
         ORDER BY res.dispatch_id
         LIMIT least(p_limit, 10000))
        UNION ALL
        -- Identities kept only by the links of their proposals' rejects and withdrawals.
        (SELECT DISTINCT p.dispatch_id
         FROM recovery_proposals AS p
         JOIN recovery_audit_chain AS l ON l.mutation_id = p.closed_mutation_id
         WHERE p_include_audit AND p.dispatch_id > p_after
           AND p.closed_as IN ('rejected', 'withdrawn')
           AND l.recorded_at_ms < p_cutoff_ms
           AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                           WHERE e.dispatch_id = p.dispatch_id)
           AND NOT EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS res
                           WHERE res.dispatch_id = p.dispatch_id)
           AND NOT EXISTS (SELECT 1 FROM recovery_outcomes AS o, unread AS u
                           WHERE o.dispatch_id = p.dispatch_id AND (o.xid, o.seq) > (u.xid, u.seq))
         ORDER BY p.dispatch_id
         LIMIT least(p_limit, 10000))
    ),
    page AS (SELECT i.dispatch_id FROM ids AS i ORDER BY i.dispatch_id
             LIMIT least(p_limit, 10000))
    SELECT d.dispatch_id, res.dispatch_id IS NOT NULL OR cl.links IS NOT NULL,
           jsonb_build_object(
               'v', 1,
               'dispatch', to_jsonb(d),
               'execution', CASE WHEN e.dispatch_id IS NOT NULL THEN jsonb_build_object(
                   'state', e.state, 'attempt', e.attempt, 'version', e.version,
                   'started_at_ms', e.started_at_ms, 'finished_at_ms', e.finished_at_ms,
                   'result_code', e.result_code,
                   'completion_mutation_id', e.completion_mutation_id,
                   'evidence_digest', e.evidence_digest,
                   'closed_by', c.closed_by, 'closed_at_ms', c.closed_at_ms) END,
               'resolution', to_jsonb(res),
               'authorization', (SELECT to_jsonb(a) FROM recovery_authorizations AS a
                                 WHERE a.mutation_id = res.mutation_id
                                   AND a.user_id = res.actor_user_id),
               'authorizations', (SELECT jsonb_agg(to_jsonb(a) ORDER BY a.user_id)
                                  FROM recovery_authorizations AS a
                                  WHERE a.mutation_id = res.mutation_id),
               -- Migration 0015: the decision's audit link, so a pruned range of the chain
               -- stays verifiable from the export, and the late evidence beside it.
               'audit_link', (SELECT jsonb_build_object(
                                  'seq', l.seq, 'mutation_id', l.mutation_id,
                                  'dispatch_id', l.dispatch_id, 'content', l.content,
                                  'prev_hash', l.prev_hash, 'hash', l.hash,
                                  'recorded_at_ms', l.recorded_at_ms)
                              FROM recovery_audit_chain AS l
                              WHERE l.mutation_id = res.mutation_id),
               'late_evidence', (SELECT to_jsonb(le) FROM recovery_late_evidence AS le
                                 WHERE le.dispatch_id = res.dispatch_id))
           -- The links of its proposals' rejects and withdrawals, in chain order, so the
           -- pruned range stays verifiable from the export (only when there are any: a
           -- record without keeps its former shape).
           || CASE WHEN cl.links IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('close_links', cl.links) END
    FROM page AS p
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_resolutions AS res ON res.dispatch_id = d.dispatch_id
    CROSS JOIN LATERAL (
        SELECT jsonb_agg(jsonb_build_object(
                   'seq', l.seq, 'mutation_id', l.mutation_id, 'dispatch_id', l.dispatch_id,
                   'content', l.content, 'prev_hash', l.prev_hash, 'hash', l.hash,
                   'recorded_at_ms', l.recorded_at_ms) ORDER BY l.seq) AS links
        FROM recovery_proposals AS pr
        JOIN recovery_audit_chain AS l ON l.mutation_id = pr.closed_mutation_id
        WHERE pr.dispatch_id = d.dispatch_id
          AND pr.closed_as IN ('rejected', 'withdrawn')) AS cl
    ORDER BY d.dispatch_id
$$;


--
-- Name: resolver_prune_consumers(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_prune_consumers(p_cutoff_ms bigint) RETURNS TABLE(consumer text, cursor text, saved_at_ms bigint, holding bigint)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT c.consumer, c.cursor_xid::text || ':' || c.cursor_position::text, c.saved_at_ms,
           (SELECT count(DISTINCT o.dispatch_id)
            FROM recovery_outcomes AS o
            JOIN approved_action_executions AS e USING (dispatch_id)
            JOIN approved_action_recovery_controls AS k USING (dispatch_id)
            WHERE (o.xid, o.seq) > (c.cursor_xid, c.cursor_position)
              AND k.status = 'resolved' AND k.closed_at_ms < p_cutoff_ms
              AND e.state = ANY (resolver_terminal_states())
              AND e.finished_at_ms < p_cutoff_ms)
    FROM recovery_outcome_consumers AS c
    ORDER BY c.cursor_xid, c.cursor_position, c.consumer
$$;


--
-- Name: resolver_prune_finish(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_prune_finish(p_run_id bigint) RETURNS TABLE(dispatches_pruned bigint, audit_pruned bigint, evidence_pruned bigint)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    UPDATE recovery_prune_runs
    SET finished_at_ms = resolver_now_ms(NULL)
    WHERE run_id = p_run_id AND finished_at_ms IS NULL
    RETURNING dispatches_pruned, audit_pruned, evidence_pruned
$$;


--
-- Name: resolver_receipt_identity(text, text, uuid, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_receipt_identity(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(schema_version integer, dispatch_id text, approval_request_id text, project_id text, action_type text, action_digest text, idempotency_key text, attempt integer, started_at_ms bigint, db_now_ms bigint)
    LANGUAGE plpgsql SECURITY DEFINER ROWS 1
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
BEGIN
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- FOR SHARE keeps a resolver or a human from settling the execution until the
    -- caller's transaction (the mutation and its receipt) commits or rolls back; the live
    -- lease is checked here, at the write, and again at commit (resolver_check_receipt_lease).
    RETURN QUERY
    SELECT d.schema_version::integer, d.dispatch_id, d.approval_request_id, d.project_id,
           d.action_type, d.action_digest::text, d.idempotency_key, e.attempt, e.started_at_ms,
           now_ms
    FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
      AND e.version = p_version AND e.state = 'executing' AND e.lease_expires_at_ms > now_ms
    FOR SHARE OF e;
    IF NOT FOUND THEN
        PERFORM resolver_protocol_refuse(
            'receipt', p_dispatch_id, p_owner, p_token, p_version, now_ms);
    END IF;
END
$$;


--
-- Name: resolver_receipt_write(text, text, uuid, bigint, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_receipt_write(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_receipt jsonb) RETURNS TABLE(dispatch_id text, written_at_ms bigint)
    LANGUAGE plpgsql SECURITY DEFINER ROWS 1
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint := resolver_now_ms(NULL);
    identity jsonb;
    field text;
BEGIN
    -- One statement checks everything a receipt is written under: the fence and the live
    -- lease of resolver_receipt_identity (the execution locked FOR SHARE the same way), a JSON
    -- object whose integers are JSON numbers (drivers hand bigints back as strings), naming
    -- this execution field by field. Shape and signature are the provider's to verify when it
    -- reads (a tampered receipt is a `conflict` there, never success).
    INSERT INTO action_receipts AS a (dispatch_id, receipt)
    SELECT e.dispatch_id, p_receipt
    FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
      AND e.version = p_version AND e.state = 'executing' AND e.lease_expires_at_ms > now_ms
      AND jsonb_typeof(p_receipt) = 'object'
      AND coalesce(jsonb_typeof(p_receipt -> 'v'), 'number') = 'number'
      AND coalesce(jsonb_typeof(p_receipt -> 'attempt'), 'number') = 'number'
      AND coalesce(jsonb_typeof(p_receipt -> 'started_at_ms'), 'number') = 'number'
      AND coalesce(jsonb_typeof(p_receipt -> 'finished_at_ms'), 'number') = 'number'
      AND p_receipt -> 'dispatch_id' = to_jsonb(d.dispatch_id)
      AND p_receipt -> 'approval_request_id' = to_jsonb(d.approval_request_id)
      AND p_receipt -> 'project_id' = to_jsonb(d.project_id)
      AND p_receipt -> 'action_type' = to_jsonb(d.action_type)
      AND p_receipt -> 'action_digest' = to_jsonb(d.action_digest)
      AND p_receipt -> 'idempotency_key' = to_jsonb(d.idempotency_key)
      AND p_receipt -> 'attempt' = to_jsonb(e.attempt)
      AND p_receipt -> 'started_at_ms' = to_jsonb(e.started_at_ms)
    FOR SHARE OF e
    RETURNING a.dispatch_id, a.written_at_ms INTO dispatch_id, written_at_ms;
    IF FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- Written nothing: say why, in the order the checks are documented. A fence that does
    -- not hold is refused by resolver_receipt_identity itself.
    SELECT to_jsonb(i) INTO identity FROM resolver_receipt_identity(
        p_dispatch_id, p_owner, p_token, p_version, NULL) AS i;
    IF p_receipt IS NULL OR jsonb_typeof(p_receipt) <> 'object' THEN
        RAISE EXCEPTION 'p_receipt must be a JSON object (receipt v1)'
            USING ERRCODE = 'RS005';
    END IF;
    FOREACH field IN ARRAY ARRAY['v', 'attempt', 'started_at_ms', 'finished_at_ms'] LOOP
        IF p_receipt ? field AND jsonb_typeof(p_receipt -> field) <> 'number' THEN
            RAISE EXCEPTION 'receipt field % must be a JSON integer, not a JSON %', field,
                jsonb_typeof(p_receipt -> field)
                USING ERRCODE = 'RS005',
                      HINT = 'convert the bigint your driver returned as a string (Number() in JavaScript)';
        END IF;
    END LOOP;
    FOREACH field IN ARRAY ARRAY['dispatch_id', 'approval_request_id', 'project_id',
                                 'action_type', 'action_digest', 'idempotency_key',
                                 'attempt', 'started_at_ms'] LOOP
        IF (p_receipt -> field) IS DISTINCT FROM (identity -> field) THEN
            RAISE EXCEPTION 'receipt field % does not match dispatch %', field,
                quote_literal(p_dispatch_id)
                USING ERRCODE = 'RS005';
        END IF;
    END LOOP;
    -- Every check passes now: the execution moved on between the write and these reads.
    RAISE EXCEPTION 'receipt of % was not written: its execution changed while it was written',
        quote_literal(p_dispatch_id)
        USING ERRCODE = 'RS001';
END
$$;


--
-- Name: resolver_record_late_evidence(json, text, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_record_late_evidence(p_items json, p_owner text, p_window_ms bigint, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, observation_id text, recorded boolean, agrees boolean)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    -- The clock rule first, whatever the items: a refused override is refused even when no
    -- watch matches (the query below reads its clock only once a watch is found).
    SELECT resolver_protocol_now_ms(p_now_ms);
    WITH now AS (SELECT resolver_protocol_now_ms(p_now_ms) AS ms),
    item AS (
        SELECT * FROM json_to_recordset(p_items) AS i(
            dispatch_id text, watch_token uuid, finding text, evidence_digest text,
            result_code text, observation_id text, delay_ms bigint)
    ),
    -- SKIP LOCKED, like the automatic commit: a watch another transaction holds is left out
    -- (a lost fence); it is claimed again once its lease lapses.
    locked AS (
        SELECT w.dispatch_id, w.watch_token, w.decision_mutation_id, w.decided_outcome
        FROM recovery_late_watches AS w
        JOIN item AS i ON i.dispatch_id = w.dispatch_id AND i.watch_token = w.watch_token
        WHERE w.closed_at_ms IS NULL
          AND w.decided_at_ms + p_window_ms > (SELECT ms FROM now)
        ORDER BY w.dispatch_id
        FOR UPDATE OF w SKIP LOCKED
    ),
    fenced AS (
        SELECT DISTINCT ON (l.dispatch_id)
               l.dispatch_id, l.decision_mutation_id, l.decided_outcome,
               i.finding, i.evidence_digest, i.result_code, i.observation_id, i.delay_ms,
               resolver_finding_outcome(i.finding) IS NOT NULL AS verified,
               i.finding = 'verified_' || l.decided_outcome AS agrees
        FROM locked AS l
        JOIN item AS i ON i.dispatch_id = l.dispatch_id AND i.watch_token = l.watch_token
        ORDER BY l.dispatch_id, i.observation_id
    ),
    evidence AS (
        INSERT INTO recovery_late_evidence (
            observation_id, dispatch_id, decision_mutation_id, finding, agrees,
            evidence_digest, result_code, observer, observed_at_ms)
        SELECT f.observation_id, f.dispatch_id, f.decision_mutation_id, f.finding, f.agrees,
               f.evidence_digest, f.result_code, p_owner, now.ms
        FROM fenced AS f, now
        WHERE f.verified
    ),
    watch AS (
        UPDATE recovery_late_watches AS w
        SET watch_owner = NULL,
            watch_token = NULL,
            observations = w.observations + 1,
            last_observed_at_ms = now.ms,
            next_scan_at_ms = now.ms + greatest(coalesce(f.delay_ms, 0), 0),
            closed_at_ms = CASE WHEN f.verified OR f.finding = 'unsupported' THEN now.ms END,
            closed_reason = CASE WHEN f.verified THEN 'observed'
                                 WHEN f.finding = 'unsupported' THEN 'unsupported' END
        FROM fenced AS f, now
        WHERE w.dispatch_id = f.dispatch_id
    )
    SELECT f.dispatch_id, f.observation_id, f.verified, CASE WHEN f.verified THEN f.agrees END
    FROM fenced AS f
$$;


--
-- Name: resolver_recovery_lease_released(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_recovery_lease_released(p_recovery_version bigint) RETURNS TABLE(recovery_version bigint, recovery_owner text, recovery_token uuid, recovery_lease_expires_at_ms bigint)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT p_recovery_version + 1, NULL::text, NULL::uuid, NULL::bigint
$$;


--
-- Name: resolver_refuse_settled_lease(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_refuse_settled_lease() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    -- Only when no execution exists: INSERT ... ON CONFLICT (the lease) fires this before the
    -- conflict check, and a settled execution that still exists is the lease's to refuse
    -- (RS003, past the start barrier).
    IF EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS r
               WHERE r.dispatch_id = NEW.dispatch_id)
       AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                       WHERE e.dispatch_id = NEW.dispatch_id) THEN
        RAISE EXCEPTION 'dispatch % was settled by a resolution (its execution was pruned): it is never leased again; a new action needs a new dispatch',
            quote_literal(NEW.dispatch_id)
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$;


--
-- Name: resolver_reject_mutation(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_reject_mutation() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_settle_manual(p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint, p_actor_user_id text, p_now_ms bigint, p_authorizations json) RETURNS TABLE(dispatch_id text, version bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
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
            -- manual_at_ms stays: when the case reached the queue is part of its history
            --; the queue itself reads open (status 'manual') controls only.
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
        RETURNING mutation_id
    ),
    authorization_fact AS (
        INSERT INTO recovery_authorizations (
            mutation_id, user_id, permission, project_id, project_version,
            role_binding_version, auth_time_ms, amr, authorized_at_ms, issuer, token_kid,
            signing_kid, signature, act, act_mutation_id, proposal_id, verified_at_ms)
        SELECT r.mutation_id, a.user_id, 'approval.recover', a.project_id, a.project_version,
               a.role_binding_version, a.auth_time_ms, a.amr, a.authorized_at_ms, a.issuer,
               a.token_kid, a.signing_kid, a.signature, a.act, a.act_mutation_id,
               a.proposal_id, a.verified_at_ms
        FROM resolution AS r,
             json_to_recordset(p_authorizations) AS a(
                 user_id text, project_id text, project_version bigint,
                 role_binding_version bigint, auth_time_ms bigint, amr text[],
                 authorized_at_ms bigint, issuer text, token_kid text, signing_kid text,
                 signature text, act text, act_mutation_id text, proposal_id bigint,
                 verified_at_ms bigint)
    )
    SELECT s.dispatch_id, s.version INTO dispatch_id, version FROM settled AS s;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The audit chain: the decision's canonical content, read back from what the statement
    -- above stored, linked after the chain's head.
    PERFORM resolver_audit_append(p_mutation_id, p_dispatch_id,
                                  resolver_audit_decision(p_mutation_id), p_now_ms);
    RETURN NEXT;
END
$$;


--
-- Name: resolver_strong_amr(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_strong_amr(p_amr text[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT coalesce(p_amr && ARRAY['mfa', 'hwk', 'swk', 'otp', 'fido']::text[], false)
$$;


--
-- Name: resolver_two_people_present(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_two_people_present() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
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


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: action_receipts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.action_receipts (
    dispatch_id text NOT NULL,
    receipt jsonb NOT NULL,
    written_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    CONSTRAINT ck_action_receipts_receipt_bounded CHECK (octet_length(receipt::text) <= 16384),
    CONSTRAINT ck_action_receipts_receipt_is_object CHECK (jsonb_typeof(receipt) = 'object')
);


--
-- Name: alembic_version; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alembic_version (
    version_num character varying(32) NOT NULL
);


--
-- Name: approved_action_dispatches; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approved_action_dispatches (
    dispatch_id text NOT NULL,
    approval_request_id text NOT NULL,
    project_id text NOT NULL,
    action_type text NOT NULL,
    action_digest public.resolver_sha256_hex NOT NULL,
    idempotency_key text NOT NULL,
    schema_version smallint NOT NULL,
    supersedes_dispatch_id text,
    created_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    action_summary jsonb,
    CONSTRAINT ck_approved_action_dispatches_action_summary_shape CHECK (resolver_action_summary_problem(action_summary) IS NULL),
    CONSTRAINT ck_approved_action_dispatches_bounded_ids CHECK (length(dispatch_id) <= 128 AND length(approval_request_id) <= 128 AND length(project_id) <= 128 AND length(idempotency_key) <= 128 AND length(action_type) <= 64),
    CONSTRAINT ck_approved_action_dispatches_no_self_supersede CHECK (supersedes_dispatch_id <> dispatch_id),
    CONSTRAINT ck_approved_action_dispatches_schema_version_positive CHECK (schema_version >= 1)
);


--
-- Name: approved_action_executions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approved_action_executions (
    dispatch_id text NOT NULL,
    state public.resolver_execution_state NOT NULL,
    owner text NOT NULL,
    token uuid NOT NULL,
    version bigint NOT NULL,
    attempt integer NOT NULL,
    lease_expires_at_ms bigint NOT NULL,
    started_at_ms bigint,
    finished_at_ms bigint,
    result_code public.resolver_code,
    completion_mutation_id text,
    evidence_digest public.resolver_sha256_hex,
    CONSTRAINT ck_approved_action_executions_counters_positive CHECK (version >= 1 AND attempt >= 1),
    CONSTRAINT ck_approved_action_executions_finished_iff_terminal CHECK ((state = ANY (resolver_terminal_states())) = (finished_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_executions_started_after_barrier CHECK (state = 'leased' OR started_at_ms IS NOT NULL)
)
WITH (fillfactor='85');


--
-- Name: approved_action_recovery_controls; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approved_action_recovery_controls (
    dispatch_id text NOT NULL,
    status public.resolver_control_status NOT NULL,
    execution_version bigint NOT NULL,
    next_scan_at_ms bigint NOT NULL,
    recovery_owner text,
    recovery_token uuid,
    recovery_version bigint DEFAULT 0 NOT NULL,
    recovery_lease_expires_at_ms bigint,
    last_finding public.resolver_finding,
    finding_count integer DEFAULT 0 NOT NULL,
    armed_at_ms bigint NOT NULL,
    manual_at_ms bigint,
    closed_by public.resolver_closed_by,
    closed_at_ms bigint,
    completion_mutation_id text,
    finding_counts public.resolver_json_object DEFAULT '{}'::jsonb NOT NULL,
    first_inspected_at_ms bigint,
    last_inspected_at_ms bigint,
    last_failure_class public.resolver_failure_class,
    last_evidence_digest public.resolver_sha256_hex,
    manual_reason public.resolver_code,
    last_reason public.resolver_scan_reason,
    reason_counts public.resolver_json_object DEFAULT '{}'::jsonb NOT NULL,
    escalates_at_ms bigint,
    CONSTRAINT ck_approved_action_recovery_controls_closed_iff_resolved CHECK ((status = 'resolved') = (closed_by IS NOT NULL AND closed_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_lease_only_when_armed CHECK (status = 'armed' OR recovery_token IS NULL),
    CONSTRAINT ck_approved_action_recovery_controls_recovery_lease_whole CHECK ((recovery_token IS NULL) = (recovery_lease_expires_at_ms IS NULL) AND (recovery_token IS NULL) = (recovery_owner IS NULL))
)
WITH (fillfactor='90');


--
-- Name: approved_action_recovery_resolutions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approved_action_recovery_resolutions (
    resolution_id bigint NOT NULL,
    dispatch_id text NOT NULL,
    mutation_id text NOT NULL,
    source public.resolver_resolution_source NOT NULL,
    outcome public.resolver_terminal_state NOT NULL,
    finding text,
    evidence_digest public.resolver_sha256_hex,
    result_code public.resolver_code,
    expected_execution_version bigint NOT NULL,
    actor_user_id text,
    reason_code public.resolver_code,
    resolved_at_ms bigint NOT NULL,
    CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified CHECK (source <> 'automatic' OR (resolver_finding_outcome(finding) IS NOT NULL
               AND evidence_digest IS NOT NULL AND result_code IS NOT NULL
               AND actor_user_id IS NULL AND outcome <> 'blocked')),
    CONSTRAINT ck_approved_action_recovery_resolutions_manual_has_actor CHECK (source <> 'manual' OR (actor_user_id IS NOT NULL AND reason_code IS NOT NULL))
);


--
-- Name: approved_action_recovery_resolutions_resolution_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.approved_action_recovery_resolutions ALTER COLUMN resolution_id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.approved_action_recovery_resolutions_resolution_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: ledger_entries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ledger_entries (
    dispatch_id text NOT NULL,
    idempotency_key text NOT NULL,
    action_digest text NOT NULL,
    attempt integer NOT NULL,
    amount_cents bigint NOT NULL,
    state text NOT NULL,
    entry_digest text NOT NULL,
    booked_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    CONSTRAINT ck_ledger_entries_entry_digest_hex CHECK ((entry_digest ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT ck_ledger_entries_state_known CHECK ((state = ANY (ARRAY['booked'::text, 'pending'::text, 'rejected'::text])))
);


--
-- Name: package_commit_markers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.package_commit_markers (
    dispatch_id text NOT NULL,
    content_digest text NOT NULL,
    committed_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    CONSTRAINT ck_package_commit_markers_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$')
);


--
-- Name: package_install_records; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.package_install_records (
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
    CONSTRAINT ck_package_install_records_target_version_shape CHECK (target_version ~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$')
);


--
-- Name: package_install_targets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.package_install_targets (
    dispatch_id text NOT NULL,
    installed_version text NOT NULL,
    content_digest text NOT NULL,
    observed_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    CONSTRAINT ck_package_install_targets_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_package_install_targets_installed_version_shape CHECK (installed_version ~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$')
);


--
-- Name: recovery_audit_chain; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_audit_chain (
    seq bigint NOT NULL,
    mutation_id text NOT NULL,
    dispatch_id text NOT NULL,
    content text NOT NULL,
    prev_hash public.resolver_sha256_hex NOT NULL,
    hash public.resolver_sha256_hex NOT NULL,
    recorded_at_ms bigint NOT NULL,
    CONSTRAINT ck_recovery_audit_chain_content_bounded CHECK (octet_length(content) <= 8192),
    CONSTRAINT ck_recovery_audit_chain_seq_positive CHECK (seq >= 1)
);


--
-- Name: recovery_audit_head; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_audit_head (
    id smallint NOT NULL,
    seq bigint NOT NULL,
    hash public.resolver_sha256_hex NOT NULL,
    prev_hash public.resolver_sha256_hex NOT NULL,
    CONSTRAINT ck_recovery_audit_head_one_row CHECK (id = 1)
);


--
-- Name: recovery_authorizations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_authorizations (
    authorization_id bigint NOT NULL,
    mutation_id text NOT NULL,
    user_id text NOT NULL,
    permission text NOT NULL,
    project_id text NOT NULL,
    project_version bigint NOT NULL,
    role_binding_version bigint NOT NULL,
    auth_time_ms bigint NOT NULL,
    amr text[] NOT NULL,
    authorized_at_ms bigint NOT NULL,
    issuer text,
    token_kid text,
    signing_kid public.resolver_signing_kid,
    signature public.resolver_signature_hex,
    act text,
    act_mutation_id text,
    proposal_id bigint,
    verified_at_ms bigint,
    CONSTRAINT ck_recovery_authorizations_act_bound CHECK ((act IS NULL) = (act_mutation_id IS NULL) AND (act IS NULL) = (verified_at_ms IS NULL)
               AND (act IS NULL OR signature IS NOT NULL)),
    CONSTRAINT ck_recovery_authorizations_act_known CHECK (act IS NULL OR act = ANY (resolver_fact_acts())),
    CONSTRAINT ck_recovery_authorizations_issuer_printable CHECK (issuer IS NULL OR (length(issuer) BETWEEN 1 AND 512 AND issuer !~ '[[:cntrl:]]')),
    CONSTRAINT ck_recovery_authorizations_permission_known CHECK (permission = 'approval.recover'),
    CONSTRAINT ck_recovery_authorizations_signed_whole CHECK ((signature IS NULL) = (signing_kid IS NULL) AND (signature IS NULL) = (issuer IS NULL) AND (signature IS NULL) = (token_kid IS NULL)),
    CONSTRAINT ck_recovery_authorizations_token_kid_printable CHECK (token_kid IS NULL OR (length(token_kid) BETWEEN 1 AND 256 AND token_kid !~ '[[:cntrl:]]'))
);


--
-- Name: recovery_authorizations_authorization_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.recovery_authorizations ALTER COLUMN authorization_id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.recovery_authorizations_authorization_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: recovery_decision_policy; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_decision_policy (
    id smallint NOT NULL,
    max_auth_age_ms bigint NOT NULL,
    proposal_ttl_ms bigint NOT NULL,
    clock_leeway_ms bigint NOT NULL,
    CONSTRAINT ck_recovery_decision_policy_clock_leeway CHECK (clock_leeway_ms BETWEEN 0 AND 300000),
    CONSTRAINT ck_recovery_decision_policy_max_auth_age CHECK (max_auth_age_ms BETWEEN 1000 AND 3600000),
    CONSTRAINT ck_recovery_decision_policy_one_row CHECK (id = 1),
    CONSTRAINT ck_recovery_decision_policy_proposal_ttl CHECK (proposal_ttl_ms BETWEEN 1000 AND 86400000)
);


--
-- Name: recovery_late_evidence; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_late_evidence (
    observation_id public.resolver_id NOT NULL,
    dispatch_id text NOT NULL,
    decision_mutation_id text NOT NULL,
    finding text NOT NULL,
    agrees boolean NOT NULL,
    evidence_digest public.resolver_sha256_hex NOT NULL,
    result_code public.resolver_code NOT NULL,
    observer text NOT NULL,
    observed_at_ms bigint NOT NULL,
    CONSTRAINT ck_recovery_late_evidence_finding_verified CHECK (resolver_finding_outcome(finding) IS NOT NULL)
);


--
-- Name: recovery_late_watches; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_late_watches (
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
    CONSTRAINT ck_recovery_late_watches_outcome_claimed CHECK (decided_outcome IN ('succeeded', 'failed'))
);


--
-- Name: recovery_outcome_consumers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_outcome_consumers (
    consumer public.resolver_id NOT NULL,
    cursor_xid xid8 NOT NULL,
    cursor_position bigint NOT NULL,
    registered_at_ms bigint NOT NULL,
    saved_at_ms bigint NOT NULL
);


--
-- Name: recovery_outcome_listeners; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_outcome_listeners (
    pid integer NOT NULL,
    listening_until_ms bigint NOT NULL
);


--
-- Name: recovery_outcome_reader_scopes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_outcome_reader_scopes (
    role_name text NOT NULL,
    project_id public.resolver_id NOT NULL,
    CONSTRAINT ck_recovery_outcome_reader_scopes_role_name_shape CHECK (length(role_name) BETWEEN 1 AND 63)
);


--
-- Name: recovery_outcomes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_outcomes (
    xid xid8 DEFAULT pg_current_xact_id() NOT NULL,
    seq bigint NOT NULL,
    kind public.resolver_outcome_kind NOT NULL,
    dispatch_id text NOT NULL,
    approval_request_id text NOT NULL,
    project_id text NOT NULL,
    action_type text NOT NULL,
    state text NOT NULL,
    settled_by public.resolver_settled_by,
    finding text,
    result_code text,
    evidence_digest text,
    mutation_id text,
    reason_code text,
    actors text[],
    superseded_by text,
    occurred_at_ms bigint NOT NULL,
    CONSTRAINT ck_recovery_outcomes_settled_terminal CHECK (kind <> 'settled' OR (state = ANY (resolver_terminal_states()) AND settled_by IS NOT NULL)),
    CONSTRAINT ck_recovery_outcomes_superseded_names CHECK ((kind = 'superseded') = (superseded_by IS NOT NULL))
);


--
-- Name: recovery_outcomes_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.recovery_outcomes ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.recovery_outcomes_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: recovery_projects; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_projects (
    project_id text NOT NULL,
    version bigint NOT NULL,
    CONSTRAINT ck_recovery_projects_version_positive CHECK (version >= 1)
);


--
-- Name: recovery_proposals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_proposals (
    proposal_id bigint NOT NULL,
    dispatch_id text NOT NULL,
    mutation_id text NOT NULL,
    outcome text NOT NULL,
    expected_execution_version bigint NOT NULL,
    reason_code public.resolver_code NOT NULL,
    evidence_digest public.resolver_sha256_hex,
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
    close_reason_code public.resolver_code,
    closed_auth_time_ms bigint,
    closed_amr text[],
    issuer text,
    token_kid text,
    signing_kid text,
    signature public.resolver_signature_hex,
    verified_at_ms bigint,
    closed_project_version bigint,
    closed_role_binding_version bigint,
    closed_issuer text,
    closed_token_kid text,
    closed_signing_kid text,
    closed_signature public.resolver_signature_hex,
    closed_verified_at_ms bigint,
    CONSTRAINT ck_recovery_proposals_act_bound CHECK (verified_at_ms IS NULL OR signature IS NOT NULL),
    CONSTRAINT ck_recovery_proposals_closed_as_known CHECK (closed_as IN ('confirmed', 'withdrawn', 'rejected', 'voided', 'expired')),
    CONSTRAINT ck_recovery_proposals_closed_at_with_closed_as CHECK ((closed_as IS NULL) = (closed_at_ms IS NULL)),
    CONSTRAINT ck_recovery_proposals_closed_by_person CHECK (closed_as NOT IN ('confirmed', 'withdrawn', 'rejected')
               OR (closed_by IS NOT NULL AND closed_mutation_id IS NOT NULL
                   AND close_reason_code IS NOT NULL)),
    CONSTRAINT ck_recovery_proposals_closed_signed_whole CHECK ((closed_signature IS NULL) = (closed_signing_kid IS NULL)
               AND (closed_signature IS NULL) = (closed_issuer IS NULL)
               AND (closed_signature IS NULL) = (closed_token_kid IS NULL)
               AND (closed_signature IS NULL) = (closed_verified_at_ms IS NULL)
               AND (closed_signature IS NULL) = (closed_project_version IS NULL)
               AND (closed_signature IS NULL) = (closed_role_binding_version IS NULL)
               AND (closed_signature IS NULL OR closed_as IN ('rejected', 'withdrawn'))),
    CONSTRAINT ck_recovery_proposals_expires_after_proposed CHECK (expires_at_ms > proposed_at_ms),
    CONSTRAINT ck_recovery_proposals_outcome_known CHECK (outcome = ANY (resolver_terminal_states())),
    CONSTRAINT ck_recovery_proposals_second_person CHECK ((closed_as <> 'withdrawn' OR closed_by = proposed_by)
               AND (closed_as NOT IN ('confirmed', 'rejected') OR closed_by <> proposed_by)),
    CONSTRAINT ck_recovery_proposals_signed_whole CHECK ((signature IS NULL) = (signing_kid IS NULL) AND (signature IS NULL) = (issuer IS NULL)
               AND (signature IS NULL) = (token_kid IS NULL))
);


--
-- Name: recovery_proposals_proposal_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.recovery_proposals ALTER COLUMN proposal_id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.recovery_proposals_proposal_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: recovery_prune_runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_prune_runs (
    run_id bigint NOT NULL,
    started_at_ms bigint NOT NULL,
    finished_at_ms bigint,
    last_batch_at_ms bigint,
    cutoff_ms bigint NOT NULL,
    include_audit boolean NOT NULL,
    export_digest public.resolver_sha256_hex,
    batches bigint DEFAULT 0 NOT NULL,
    dispatches_pruned bigint DEFAULT 0 NOT NULL,
    audit_pruned bigint DEFAULT 0 NOT NULL,
    evidence_pruned bigint DEFAULT 0 NOT NULL,
    db_user text NOT NULL,
    actor text,
    audit_first_seq bigint,
    audit_last_seq bigint,
    past_consumers boolean DEFAULT false NOT NULL,
    outcomes_pruned bigint DEFAULT 0 NOT NULL,
    outcomes_unread bigint DEFAULT 0 NOT NULL,
    CONSTRAINT ck_recovery_prune_runs_actor_bounded CHECK (length(actor) <= 128),
    CONSTRAINT ck_recovery_prune_runs_audit_needs_export CHECK (NOT include_audit OR export_digest IS NOT NULL),
    CONSTRAINT ck_recovery_prune_runs_audit_range CHECK ((audit_first_seq IS NULL) = (audit_last_seq IS NULL) AND audit_first_seq <= audit_last_seq)
);


--
-- Name: recovery_prune_runs_run_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.recovery_prune_runs ALTER COLUMN run_id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.recovery_prune_runs_run_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: recovery_pruned_dispatches; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_pruned_dispatches (
    dispatch_id text NOT NULL,
    idempotency_key_sha256 public.resolver_sha256_hex NOT NULL,
    approval_request_id text NOT NULL,
    project_id text NOT NULL,
    action_type text NOT NULL,
    created_at_ms bigint NOT NULL,
    state text,
    closed_by text,
    run_id bigint NOT NULL,
    pruned_at_ms bigint NOT NULL
);


--
-- Name: recovery_role_bindings; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_role_bindings (
    project_id text NOT NULL,
    user_id text NOT NULL,
    permission text NOT NULL,
    version bigint NOT NULL,
    CONSTRAINT ck_recovery_role_bindings_version_positive CHECK (version >= 1)
);


--
-- Name: recovery_two_person_rules; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_two_person_rules (
    action_type_pattern text NOT NULL,
    decision text NOT NULL,
    CONSTRAINT ck_recovery_two_person_rules_decision_known CHECK (resolver_decision_settles(decision) IS NOT NULL),
    CONSTRAINT ck_recovery_two_person_rules_pattern_shape CHECK (action_type_pattern ~ '^([a-z][a-z0-9_.-]{0,63}[*]?|[*])$')
);


--
-- Name: resolver_definitions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resolver_definitions (
    revision text NOT NULL,
    checksum text,
    script text NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);


--
-- Name: resolver_evidence_tables; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resolver_evidence_tables (
    table_name text NOT NULL,
    dispatch_column text NOT NULL,
    provider text NOT NULL
);


--
-- Name: resolver_provider_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.resolver_provider_migrations (
    provider text NOT NULL,
    name text NOT NULL,
    checksum public.resolver_sha256_hex NOT NULL,
    applied_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL
);


--
-- Name: run_origin_facts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_origin_facts (
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
    CONSTRAINT ck_run_origin_facts_state_known CHECK (state IN ('running','succeeded','failed'))
);


--
-- Data for Name: action_receipts; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.action_receipts VALUES ('d-6c422710542b', '{"v": 1, "kid": "demo-a5730e33", "sig": "49c32197a9a70cda4ef9c1cc895f602a37804264c3fc283178d5248118e778f3", "attempt": 1, "outcome": "succeeded", "project_id": "demo", "action_type": "demo.internal", "dispatch_id": "d-6c422710542b", "result_code": "applied", "action_digest": "20dc2bef4ce8a69e9c647dbda117de68728480ad7cc01f092c7ffa15a2899421", "started_at_ms": 1796654727751, "finished_at_ms": 1796654727765, "idempotency_key": "idem-d-6c422710542b", "approval_request_id": "ar-d-6c422710542b", "receipt_identity_digest": "e0f330a113f28d347df5892e3e5c36bf7a7e43f57dceef872ad38d909e6d398e"}', 1796654727768);
INSERT INTO public.action_receipts VALUES ('d-9b2cb8ce22c9', '{"v": 1, "kid": "demo-a5730e33", "sig": "07032488bdfdabc6d13a8324347d5f6199f5d410c55c3f81fc2771adc6bb69f1", "attempt": 1, "outcome": "failed", "project_id": "demo", "action_type": "demo.internal", "dispatch_id": "d-9b2cb8ce22c9", "result_code": "rejected", "action_digest": "6ef52b0dad39d483d3587749451cde4c06a80302b42bb5a55504afe88e3de55c", "started_at_ms": 1796654727776, "finished_at_ms": 1796654727784, "idempotency_key": "idem-d-9b2cb8ce22c9", "approval_request_id": "ar-d-9b2cb8ce22c9", "receipt_identity_digest": "a42a98d5a52f69de9790faa695e28b1b35ef4c8b6ac34fc2161bcc69c6a540cf"}', 1796654727787);
INSERT INTO public.action_receipts VALUES ('d-fffe84b349a1', '{"v": 1, "kid": "not-in-the-ring", "sig": "e5690ef3f97ff2139810116f0d02873ecaa6392d6a6ab2358cf8ba555893f63e", "attempt": 1, "outcome": "succeeded", "project_id": "demo", "action_type": "demo.internal", "dispatch_id": "d-fffe84b349a1", "result_code": "applied", "action_digest": "e9dd334f5743f37ed9e424aadd9d4f2c336df45487e2e8a2d4b725169da5913d", "started_at_ms": 1796654727795, "finished_at_ms": 1796654727801, "idempotency_key": "idem-d-fffe84b349a1", "approval_request_id": "ar-d-fffe84b349a1", "receipt_identity_digest": "575d12b7c34c6a2cb4922773ae97951e45e5b73afe13eac5682828a1d5ca0ff0"}', 1796654727804);


--
-- Data for Name: alembic_version; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.alembic_version VALUES ('0003_schema_0_3_0');


--
-- Data for Name: approved_action_dispatches; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.approved_action_dispatches VALUES ('d-6c422710542b', 'ar-d-6c422710542b', 'demo', 'demo.internal', '20dc2bef4ce8a69e9c647dbda117de68728480ad7cc01f092c7ffa15a2899421', 'idem-d-6c422710542b', 1, NULL, 1796654727737, NULL);
INSERT INTO public.approved_action_dispatches VALUES ('d-9b2cb8ce22c9', 'ar-d-9b2cb8ce22c9', 'demo', 'demo.internal', '6ef52b0dad39d483d3587749451cde4c06a80302b42bb5a55504afe88e3de55c', 'idem-d-9b2cb8ce22c9', 1, NULL, 1796654727773, NULL);
INSERT INTO public.approved_action_dispatches VALUES ('d-3a6374944251', 'ar-d-3a6374944251', 'demo', 'demo.internal', 'ad7302716ba82509c4ccd3715a3afdd8361b522d90a4e05144651d568b89d98f', 'idem-d-3a6374944251', 1, NULL, 1796654727791, NULL);
INSERT INTO public.approved_action_dispatches VALUES ('d-fffe84b349a1', 'ar-d-fffe84b349a1', 'demo', 'demo.internal', 'e9dd334f5743f37ed9e424aadd9d4f2c336df45487e2e8a2d4b725169da5913d', 'idem-d-fffe84b349a1', 1, NULL, 1796654727794, NULL);
INSERT INTO public.approved_action_dispatches VALUES ('d-59c4f415d648', 'ar-d-59c4f415d648', 'demo', 'demo.shell', '2ab8ad89a8c14d57426ddd639f9229bc41ca7cac36f9b48cff352b870a1b9ca7', 'idem-d-59c4f415d648', 1, NULL, 1796654727806, NULL);
INSERT INTO public.approved_action_dispatches VALUES ('d-f8a41186f92f', 'ar-d-f8a41186f92f', 'demo', 'demo.shell', 'd189506636cb12cf7f3e5f9d9bfded7537d3d22e08c4d10a527904d508cd1ea4', 'idem-d-f8a41186f92f', 1, NULL, 1796654727811, NULL);
INSERT INTO public.approved_action_dispatches VALUES ('d-2ae353d54986', 'ar-d-2ae353d54986', 'demo', 'demo.unmapped', 'f321e017fd49eeb58d8541d5130d4838a0c0ae1db1480191837b2dcbffa067c8', 'idem-d-2ae353d54986', 1, NULL, 1796654727813, NULL);
INSERT INTO public.approved_action_dispatches VALUES ('d-b15b5b6a7594', 'ar-d-b15b5b6a7594', 'demo', 'demo.unmapped', '6ba435e5eb0bafe063b5233fa1f38d94aacb289b06e13488d6d18de5760fffbc', 'idem-d-b15b5b6a7594', 1, NULL, 1796654727815, NULL);


--
-- Data for Name: approved_action_executions; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.approved_action_executions VALUES ('d-3a6374944251', 'executing', 'demo-executor', '6230688e-b0c3-48da-afdc-2636930b2d0a', 2, 1, 1796654728793, 1796654727793, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('d-fffe84b349a1', 'executing', 'demo-executor', 'dc9a8839-1dc8-4648-ab3d-75cce4f9dc05', 2, 1, 1796654728795, 1796654727795, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('d-59c4f415d648', 'executing', 'demo-executor', '1b57c9b3-dfe3-4050-a886-dd45ea02dcaa', 2, 1, 1796654728810, 1796654727810, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('d-f8a41186f92f', 'executing', 'demo-executor', '1a25b9a4-60cb-4a20-8144-c77018910116', 2, 1, 1796654728812, 1796654727812, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('d-2ae353d54986', 'executing', 'demo-executor', 'ad31278c-b164-4d2a-a5e2-f8dec9b127a9', 2, 1, 1796654728814, 1796654727814, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('d-b15b5b6a7594', 'executing', 'demo-executor', 'f805791f-3378-42cb-972f-d0d16b2e5b0f', 2, 1, 1796654728816, 1796654727816, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('d-6c422710542b', 'succeeded', 'demo-executor', '897b5edd-d3bd-427d-b65b-7ae203e0252b', 3, 1, 1796654728751, 1796654727751, 1796654729828, 'applied', NULL, '8ce853118e6e1159c1bae295937ba4c68d6d12974ba8b5accdc77fc6aa12ad44');
INSERT INTO public.approved_action_executions VALUES ('d-9b2cb8ce22c9', 'failed', 'demo-executor', 'efe3f775-7722-4aff-8369-29cbda713f90', 3, 1, 1796654728776, 1796654727776, 1796654729828, 'rejected', NULL, 'ff6289e441604d9988a4a4e605792ede7453d941aaa59962f50a680808ab9664');


--
-- Data for Name: approved_action_recovery_controls; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.approved_action_recovery_controls VALUES ('d-2ae353d54986', 'manual', 2, 1796654789819, NULL, NULL, 2, NULL, 'unsupported', 1, 1796654727814, 1796654729828, NULL, NULL, NULL, '{"unsupported": 1}', 1796654729828, 1796654729828, NULL, NULL, 'unsupported', NULL, '{}', NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('d-3a6374944251', 'armed', 2, 1796654730599, NULL, NULL, 2, NULL, 'missing', 1, 1796654727793, NULL, NULL, NULL, NULL, '{"missing": 1}', 1796654729828, 1796654729828, NULL, NULL, NULL, 'no_receipt', '{"no_receipt": 1}', NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('d-59c4f415d648', 'manual', 2, 1796654789819, NULL, NULL, 2, NULL, 'unsupported', 1, 1796654727810, 1796654729828, NULL, NULL, NULL, '{"unsupported": 1}', 1796654729828, 1796654729828, NULL, NULL, 'unsupported', 'manual_only', '{"manual_only": 1}', NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('d-6c422710542b', 'resolved', 3, 1796654789819, NULL, NULL, 2, NULL, 'verified_succeeded', 1, 1796654727751, NULL, 'automatic', 1796654729828, NULL, '{"verified_succeeded": 1}', 1796654729828, 1796654729828, NULL, '8ce853118e6e1159c1bae295937ba4c68d6d12974ba8b5accdc77fc6aa12ad44', NULL, NULL, '{}', NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('d-9b2cb8ce22c9', 'resolved', 3, 1796654789819, NULL, NULL, 2, NULL, 'verified_failed', 1, 1796654727776, NULL, 'automatic', 1796654729828, NULL, '{"verified_failed": 1}', 1796654729828, 1796654729828, NULL, 'ff6289e441604d9988a4a4e605792ede7453d941aaa59962f50a680808ab9664', NULL, NULL, '{}', NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('d-b15b5b6a7594', 'manual', 2, 1796654789819, NULL, NULL, 2, NULL, 'unsupported', 1, 1796654727816, 1796654729828, NULL, NULL, NULL, '{"unsupported": 1}', 1796654729828, 1796654729828, NULL, NULL, 'unsupported', NULL, '{}', NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('d-f8a41186f92f', 'manual', 2, 1796654789819, NULL, NULL, 2, NULL, 'unsupported', 1, 1796654727812, 1796654729828, NULL, NULL, NULL, '{"unsupported": 1}', 1796654729828, 1796654729828, NULL, NULL, 'unsupported', 'manual_only', '{"manual_only": 1}', NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('d-fffe84b349a1', 'manual', 2, 1796654789819, NULL, NULL, 2, NULL, 'conflict', 1, 1796654727795, 1796654729828, NULL, NULL, NULL, '{"conflict": 1}', 1796654729828, 1796654729828, NULL, NULL, 'conflict', 'unknown_kid', '{"unknown_kid": 1}', NULL);


--
-- Data for Name: approved_action_recovery_resolutions; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.approved_action_recovery_resolutions VALUES (1, 'd-6c422710542b', 'auto-ed80145878de40f895c931116c86e2ab-0', 'automatic', 'succeeded', 'verified_succeeded', '8ce853118e6e1159c1bae295937ba4c68d6d12974ba8b5accdc77fc6aa12ad44', 'applied', 2, NULL, NULL, 1796654729828);
INSERT INTO public.approved_action_recovery_resolutions VALUES (2, 'd-9b2cb8ce22c9', 'auto-ed80145878de40f895c931116c86e2ab-1', 'automatic', 'failed', 'verified_failed', 'ff6289e441604d9988a4a4e605792ede7453d941aaa59962f50a680808ab9664', 'rejected', 2, NULL, NULL, 1796654729828);


--
-- Data for Name: ledger_entries; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: package_commit_markers; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: package_install_records; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: package_install_targets; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_audit_chain; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_audit_head; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_audit_head VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000', '0000000000000000000000000000000000000000000000000000000000000000');


--
-- Data for Name: recovery_authorizations; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_decision_policy; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_decision_policy VALUES (1, 300000, 3600000, 30000);


--
-- Data for Name: recovery_late_evidence; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_late_watches; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_outcome_consumers; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_outcome_listeners; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_outcome_reader_scopes; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_outcomes; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_outcomes OVERRIDING SYSTEM VALUE VALUES ('95835', 1, 'settled', 'd-6c422710542b', 'ar-d-6c422710542b', 'demo', 'demo.internal', 'succeeded', 'resolver', 'verified_succeeded', 'applied', '8ce853118e6e1159c1bae295937ba4c68d6d12974ba8b5accdc77fc6aa12ad44', 'auto-ed80145878de40f895c931116c86e2ab-0', NULL, NULL, NULL, 1796654729828);
INSERT INTO public.recovery_outcomes OVERRIDING SYSTEM VALUE VALUES ('95835', 2, 'settled', 'd-9b2cb8ce22c9', 'ar-d-9b2cb8ce22c9', 'demo', 'demo.internal', 'failed', 'resolver', 'verified_failed', 'rejected', 'ff6289e441604d9988a4a4e605792ede7453d941aaa59962f50a680808ab9664', 'auto-ed80145878de40f895c931116c86e2ab-1', NULL, NULL, NULL, 1796654729828);


--
-- Data for Name: recovery_projects; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_proposals; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_prune_runs; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_pruned_dispatches; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_role_bindings; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: recovery_two_person_rules; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: resolver_definitions; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.resolver_definitions VALUES ('0003_schema_0_3_0', 'b23283791c5551d6508de7d4c28125807a28c548d00d55e8648ae3e079120fd0', '-- The domain''s sets, the database clock and identifier shape, and the insert-only trigger of
-- every fact table.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

-- The domain''s sets, each spelled once here and once in resolver/core/domain/sets.py
-- (tests/integration/schema/test_domain_sets.py compares the two). Every check, trigger
-- condition and function reads them from these functions. All are IMMUTABLE: the planner
-- folds a set (no arguments) to its value once per statement, and inlines a mapping (SQL,
-- one expression) into the expression that calls it, so a check or a trigger''s WHEN costs
-- per row what the spelled-out list cost. The sets are plpgsql because the planner folds
-- them by calling them: a plpgsql function is compiled once per session, where a SQL one is
-- parsed and planned again at every fold (once per statement and check).

-- The states an execution never leaves once it reaches one.
CREATE OR REPLACE FUNCTION resolver_terminal_states() RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN ARRAY[''succeeded'', ''failed'', ''blocked''];
END
$$;

-- Every finding kind a provider may report.
CREATE OR REPLACE FUNCTION resolver_finding_kinds() RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN ARRAY[''verified_succeeded'', ''verified_failed'', ''still_running'', ''missing'',
                 ''conflict'', ''unsupported'', ''unavailable''];
END
$$;

-- The terminal state verified evidence settles an execution as; NULL for a finding that
-- verifies nothing.
CREATE OR REPLACE FUNCTION resolver_finding_outcome(p_finding text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_finding WHEN ''verified_succeeded'' THEN ''succeeded''
                          WHEN ''verified_failed'' THEN ''failed'' END
$$;

-- The terminal state each human decision settles an execution as; NULL for anything that is
-- not a decision.
CREATE OR REPLACE FUNCTION resolver_decision_settles(p_decision text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_decision WHEN ''confirm_succeeded'' THEN ''succeeded''
                           WHEN ''confirm_failed'' THEN ''failed''
                           WHEN ''abandon_unknown'' THEN ''blocked'' END
$$;

-- What was approved, for people: the optional summary an executor gives at
-- dispatch creation, {"title": ..., "facts": [{"label": ..., "value": ...}]}. Bounded and
-- low-sensitivity by rule: at most 2048 bytes as JSON, a 1-120 character title, at most 8
-- facts of a 1-40 character label and a 1-200 character value; no control, zero-width or
-- direction-override character; no label that names a secret and no value shaped like one
-- (a PEM block, an HTTP credential, a JWT, credentials in a URL, or 32 and more characters
-- of a key alphabet without a break: a token, a key or a digest; the action''s digest has its
-- own field). No rule reads it. The answer is why a summary is refused, NULL when it is not.
CREATE OR REPLACE FUNCTION resolver_action_summary_problem(p_summary jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    fact jsonb;
    part text;
BEGIN
    IF p_summary IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_summary) <> ''object'' THEN
        RETURN ''must be a JSON object'';
    END IF;
    IF octet_length(p_summary::text) > 2048 THEN
        RETURN ''must be at most 2048 bytes as JSON'';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(p_summary) AS k WHERE k NOT IN (''title'', ''facts'')) THEN
        RETURN ''takes the keys title and facts only'';
    END IF;
    IF jsonb_typeof(p_summary -> ''title'') IS DISTINCT FROM ''string''
       OR char_length(p_summary ->> ''title'') NOT BETWEEN 1 AND 120 THEN
        RETURN ''title must be a string of 1-120 characters'';
    END IF;
    IF p_summary ? ''facts'' AND (jsonb_typeof(p_summary -> ''facts'') <> ''array''
                               OR jsonb_array_length(p_summary -> ''facts'') > 8) THEN
        RETURN ''facts must be an array of at most 8 facts'';
    END IF;
    FOR fact IN SELECT f FROM jsonb_array_elements(coalesce(p_summary -> ''facts'', ''[]'')) AS f LOOP
        IF jsonb_typeof(fact) <> ''object'' THEN
            RETURN ''each fact must be an object {"label": ..., "value": ...}'';
        END IF;
        IF (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(fact) AS k)
               IS DISTINCT FROM ARRAY[''label'', ''value'']
           OR jsonb_typeof(fact -> ''label'') <> ''string'' OR jsonb_typeof(fact -> ''value'') <> ''string''
           OR char_length(fact ->> ''label'') NOT BETWEEN 1 AND 40
           OR char_length(fact ->> ''value'') NOT BETWEEN 1 AND 200 THEN
            RETURN ''each fact must be {"label": 1-40 characters, "value": 1-200 characters}'';
        END IF;
        IF (fact ->> ''label'') ~* ''(passw|secret|token|api.?key|private.?key|credential|authori[sz]ation|cookie)'' THEN
            RETURN ''a fact''''s label names a secret: secrets never go in the summary'';
        END IF;
    END LOOP;
    FOR part IN
        SELECT p_summary ->> ''title''
        UNION ALL
        SELECT x FROM jsonb_array_elements(coalesce(p_summary -> ''facts'', ''[]'')) AS f,
                      LATERAL (VALUES (f ->> ''label''), (f ->> ''value'')) AS v(x)
    LOOP
        IF part ~ ''[[:cntrl:]\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]'' THEN
            RETURN ''takes no control, zero-width or direction-override character'';
        END IF;
        IF part ~* ''(-----BEGIN|^(bearer|basic)\s|eyJ[A-Za-z0-9_-]+\.|://[^/@\s]*:[^/@\s]*@|[A-Za-z0-9+/=_]{32})'' THEN
            RETURN ''a value looks like a secret or a digest (a key, token, credential or 32+ character code): never put one in the summary'';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

-- EXECUTE stays with PUBLIC: it reads nothing, and the table''s CHECK calls it as whoever
-- inserts a dispatch.

-- The one clock every lease and due-time comparison uses. The override exists for tests
-- only; production passes NULL and gets the database''s clock, never a replica''s.
CREATE OR REPLACE FUNCTION resolver_now_ms(override_ms bigint) RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE AS
$$ SELECT COALESCE(override_ms, (extract(epoch from clock_timestamp()) * 1000)::bigint) $$;

-- The one shape of an identifier (dispatch, approval request, project, idempotency key,
-- mutation): 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric. The Python side
-- checks the same pattern, resolver.core.domain.ID_REGEX (test_schema_files.py proves the two
-- agree).
-- Each shape below is a length and character classes, never a bounded repetition
-- (`{0,127}`), which PostgreSQL''s regex engine unrolls: 17 µs a call against 1.3 for an id.
CREATE OR REPLACE FUNCTION resolver_is_id(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT resolver_is_identifier(p_value, 128)
$$;

-- The identifier''s character rule at a given length, for the shapes that share it (an id, a
-- key id). A one-expression SQL function: the planner inlines it, and whatever inlines it.
CREATE OR REPLACE FUNCTION resolver_is_identifier(p_value text, p_max_length integer)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT length(p_value) BETWEEN 1 AND p_max_length AND p_value ~ ''^[A-Za-z0-9]''
       AND p_value !~ ''[^A-Za-z0-9_.:-]''
$$;

-- An action type: `[a-z][a-z0-9_.-]{0,63}`.
CREATE OR REPLACE FUNCTION resolver_is_action_type(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT length(p_value) BETWEEN 1 AND 64 AND p_value ~ ''^[a-z]''
       AND p_value !~ ''[^a-z0-9_.-]''
$$;

-- A lowercase hex sha256 (an action digest, an evidence digest).
CREATE OR REPLACE FUNCTION resolver_is_sha256_hex(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT length(p_value) = 64 AND p_value !~ ''[^0-9a-f]''
$$;

-- A result or reason code: `[a-z0-9_.-]{1,64}`.
CREATE OR REPLACE FUNCTION resolver_is_code(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT length(p_value) BETWEEN 1 AND 64 AND p_value !~ ''[^a-z0-9_.-]''
$$;

-- A signature: 128 lowercase hex digits (an Ed25519 signature).
CREATE OR REPLACE FUNCTION resolver_is_signature_hex(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT length(p_value) = 128 AND p_value !~ ''[^0-9a-f]''
$$;

-- The key id a signed fact names: an identifier of at most 64 characters.
CREATE OR REPLACE FUNCTION resolver_is_signing_kid(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT resolver_is_identifier(p_value, 64)
$$;

-- Executable by PUBLIC by default; the protocol functions run them as the owner. The digest,
-- code, signature and key id shapes are also the checks of their domains (resolver_sha256_hex,
-- resolver_code, resolver_signature_hex, resolver_signing_kid), which run as whoever writes the
-- row, as the domain sets above do: executable by everyone, stated (a database upgraded from a
-- release that had them closed opens them too), and so is the identifier''s rule the key id''s
-- check calls. The id shape is the check of resolver_id too, but stays closed as it always
-- was: grants.sql lets the one role that writes such a column directly, the policy writer,
-- execute it.
REVOKE EXECUTE ON FUNCTION resolver_is_id(text), resolver_is_action_type(text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION resolver_is_sha256_hex(text), resolver_is_code(text),
    resolver_is_signature_hex(text), resolver_is_signing_kid(text),
    resolver_is_identifier(text, integer) TO PUBLIC;

-- The one release of a recovery lease: a new recovery_version (the fence every holder of the
-- old lease fails on) and no owner, token or expiry. Every writer that ends a recovery lease
-- (a renewal, the three commits, a graceful hand-back) assigns these four columns from here:
--   SET (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
--       = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
-- A one-SELECT SQL function: the planner inlines it.
CREATE OR REPLACE FUNCTION resolver_recovery_lease_released(p_recovery_version bigint)
RETURNS TABLE (
    recovery_version bigint, recovery_owner text, recovery_token uuid,
    recovery_lease_expires_at_ms bigint
)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_recovery_version + 1, NULL::text, NULL::uuid, NULL::bigint
$$;

-- Executable by PUBLIC by default; resolver/db/grants.sql grants it to the runtime role (the
-- protocol functions run it as the owner).
REVOKE EXECUTE ON FUNCTION resolver_recovery_lease_released(bigint) FROM PUBLIC;

-- Facts are insert-only: the database itself refuses to rewrite history. A DELETE passes only
-- inside resolver_prune_batch (07_retention.sql): the function must be on the call stack of
-- the statement, which no setting a session can change fakes. A table owner can still
-- disable the trigger (DDL, in the server log): the audit chain''s head kept outside the
-- database is what notices that. Inline in each trigger: a helper function would need
-- EXECUTE for every role that fires it.
CREATE OR REPLACE FUNCTION resolver_reject_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stack text;
BEGIN
    -- Nested, so an UPDATE never evaluates the check (plpgsql does not short-circuit AND).
    IF TG_OP = ''DELETE'' THEN
        GET DIAGNOSTICS stack = PG_CONTEXT;
        IF stack ~ (''(^|\n)PL/pgSQL function ('' || TG_TABLE_SCHEMA
                    || ''\.)?resolver_prune_batch\('') THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION ''% is insert-only: % rejected'', TG_TABLE_NAME, TG_OP
        USING ERRCODE = ''restrict_violation'';
END
$$;

-- The facts a decision records are written only by the SECURITY DEFINER functions that check
-- them (TG_ARGV names them): no role holds INSERT or UPDATE on these tables, and the table
-- owner''s own hand-written statement is refused too, since the named function is not on its
-- call stack. AFTER and per statement: the row''s CHECK constraints answer first, and a page
-- of 64 rows pays for one look at the stack. The owner''s bulk import of history (a restore,
-- a benchmark''s seed: `resolver.import_history`, 04_executor_protocol.sql) may insert; it
-- is the owner''s own, explicit path, like the prune.
CREATE OR REPLACE FUNCTION resolver_guard_definer_write() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stack text;
BEGIN
    IF TG_OP = ''INSERT'' AND resolver_importing_history(TG_RELID) THEN
        RETURN NULL;
    END IF;
    GET DIAGNOSTICS stack = PG_CONTEXT;
    IF NOT EXISTS (
        SELECT 1 FROM unnest(TG_ARGV) AS f
        WHERE stack ~ (''(^|\n)(PL/pgSQL function ('' || TG_TABLE_SCHEMA || ''\.)?'' || f
                       || ''\(|SQL function "'' || f || ''")'')
    ) THEN
        RAISE EXCEPTION ''% of % only through %'', TG_OP, TG_TABLE_NAME,
            array_to_string(TG_ARGV, '' or '')
            USING ERRCODE = ''insufficient_privilege'';
    END IF;
    RETURN NULL;
END
$$;

REVOKE EXECUTE ON FUNCTION resolver_guard_definer_write() FROM PUBLIC;

-- The executor protocol. Every executor transition is a `resolver_…` function (SECURITY
-- DEFINER, search_path pinned) that fences on the database clock and refuses with a SQLSTATE
-- of class RS (docs/executor-protocol.md); triggers reject any write outside the state
-- machine, even from the table owner.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

-- Helpers the protocol functions call (not part of the protocol; no EXECUTE for anyone else).
-- The protocol''s clock: the database clock, or the test clock an override asks for. One SQL
-- expression the planner inlines into each protocol function, so the common call (no
-- override) costs no function call and no search_path switch of its own.
CREATE OR REPLACE FUNCTION resolver_protocol_now_ms(
    p_now_ms bigint
)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN p_now_ms IS NULL THEN resolver_now_ms(NULL)
                ELSE resolver_protocol_test_clock(p_now_ms) END
$$;

CREATE OR REPLACE FUNCTION resolver_protocol_test_clock(
    p_now_ms bigint
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
BEGIN
    -- The clock override is the test clock: only the schema owner''s own sessions (the
    -- test suites) may move time; an executor role gets the database clock or a refusal.
    IF p_now_ms IS NOT NULL AND NOT pg_has_role(session_user, current_user, ''MEMBER'') THEN
        RAISE EXCEPTION ''p_now_ms (the test clock) is refused for role %'', session_user
            USING ERRCODE = ''RS005'',
                  HINT = ''pass NULL: the protocol runs on the database clock'';
    END IF;
    RETURN resolver_now_ms(p_now_ms);
END
$$;

-- The lease arguments'' rule, one expression inlined where a function reads it: an owner of 1
-- to 128 characters, a lease of 1 ms to one day.
CREATE OR REPLACE FUNCTION resolver_protocol_lease_ok(
    p_owner text, p_lease_ms bigint
)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(length(p_owner) BETWEEN 1 AND 128 AND p_lease_ms BETWEEN 1 AND 86400000,
                    false)
$$;

-- Says which lease argument breaks the rule (called only when one does).
CREATE OR REPLACE FUNCTION resolver_protocol_check_lease(
    p_owner text, p_lease_ms bigint
)
RETURNS void
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER AS $$
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, 1) THEN
        RAISE EXCEPTION ''p_owner must be 1-128 characters'' USING ERRCODE = ''RS005'';
    END IF;
    IF NOT resolver_protocol_lease_ok(''-'', p_lease_ms) THEN
        RAISE EXCEPTION ''p_lease_ms must be between 1 and 86400000 (one day)''
            USING ERRCODE = ''RS005'';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION resolver_protocol_refuse(
    p_step text, p_dispatch_id text, p_owner text, p_token uuid, p_version bigint,
    p_now_ms bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
DECLARE
    seen approved_action_executions%ROWTYPE;
BEGIN
    -- Explains a fenced write that matched no row: which fence did not hold.
    SELECT * INTO seen FROM approved_action_executions AS e
    WHERE e.dispatch_id = p_dispatch_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION ''dispatch % has no execution'', quote_literal(p_dispatch_id)
            USING ERRCODE = ''RS004'';
    END IF;
    -- A takeover always issues a new token: a stale version under the caller''s own token is
    -- its own renew moving on, not a takeover.
    IF seen.state = ''leased'' AND seen.version <> p_version AND seen.token IS DISTINCT FROM p_token THEN
        RAISE EXCEPTION ''lease on % was taken over (attempt %): % fence lost'',
            quote_literal(p_dispatch_id), seen.attempt, p_step
            USING ERRCODE = ''RS002'', HINT = ''stop: never start the side effect'';
    END IF;
    IF seen.version = p_version AND (seen.owner, seen.token) IS DISTINCT FROM (p_owner, p_token) THEN
        RAISE EXCEPTION ''% of % rejected: the owner/token fence does not hold'',
            p_step, quote_literal(p_dispatch_id)
            USING ERRCODE = ''RS001'';
    END IF;
    IF seen.state = ''leased'' AND seen.version <> p_version
       AND (seen.owner, seen.token) = (p_owner, p_token) THEN
        RAISE EXCEPTION ''% of % at version % rejected: a stale version, the execution is % at version % (a later renew moved it on)'',
            p_step, quote_literal(p_dispatch_id), p_version, seen.state, seen.version
            USING ERRCODE = ''RS001'',
                  HINT = ''pass the version the last call returned; stop a heartbeat before the mutation''''s transaction'';
    END IF;
    -- Receipts are fenced on the live lease: once recovery may settle the execution, no
    -- receipt (and so no mutation in the same transaction) may commit.
    IF p_step = ''receipt'' AND seen.state = ''executing'' AND seen.lease_expires_at_ms <= p_now_ms THEN
        RAISE EXCEPTION ''lease on % expired at % ms (now % ms): a receipt needs a live lease; roll back the mutation'',
            quote_literal(p_dispatch_id), seen.lease_expires_at_ms, p_now_ms
            USING ERRCODE = ''RS002'',
                  HINT = ''renew before the mutation''''s transaction; nothing of this transaction commits'';
    END IF;
    IF p_step = ''start'' AND seen.state = ''leased'' THEN
        RAISE EXCEPTION ''lease on % expired before the start barrier (at % ms, now % ms)'',
            quote_literal(p_dispatch_id), seen.lease_expires_at_ms, p_now_ms
            USING ERRCODE = ''RS002'', HINT = ''lease again; never start the side effect'';
    END IF;
    IF p_step = ''start'' THEN
        RAISE EXCEPTION ''dispatch % is already % (version %): the start fence does not hold'',
            quote_literal(p_dispatch_id), seen.state, seen.version
            USING ERRCODE = ''RS001'';
    END IF;
    RAISE EXCEPTION ''% of % at version % rejected: the version/state fence does not hold, now % at version %'',
        p_step, quote_literal(p_dispatch_id), p_version, seen.state, seen.version
        USING ERRCODE = ''RS001'';
END
$$;

-- The protocol: each function is SECURITY DEFINER with its search_path pinned (below), fences
-- inside the database on the database clock, and refuses with SQLSTATE RS001 fence conflict,
-- RS002 lease lost, RS003 not leasable, RS004 not found, RS005 invalid input (RS006: a
-- state-machine trigger refused a write). The completion, resolver_execution_complete, is one
-- of the three commits and lives beside the other two in 08_commits.sql.
--
-- Each answers one row or raises, and says so (ROWS 1): a statement that composes calls (the
-- SDKs lease, cross the barrier and read the receipt''s identity in one, each call LATERAL to
-- the one before) is planned as the one row it is, where the default estimate of a thousand
-- rows per call multiplies into a plan costly enough to be compiled (JIT) at every call.
--
-- A signature never changes in place (docs/executor-protocol.md, Versioning): the action
-- summary came with resolver_dispatch_create_v2, beside 0.1.0''s eight arguments, which 0.3.0
-- dropped.
CREATE OR REPLACE FUNCTION resolver_dispatch_create_v2(
    p_dispatch_id text, p_approval_request_id text, p_project_id text, p_action_type text,
    p_action_digest text, p_idempotency_key text, p_schema_version integer DEFAULT 1,
    p_supersedes_dispatch_id text DEFAULT NULL, p_action_summary jsonb DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, created boolean, created_at_ms bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    field text;
    existing approved_action_dispatches%ROWTYPE;
    problem text;
BEGIN
    -- The four ids in one expression; the loop below only names the first bad one.
    IF NOT coalesce(resolver_is_id(p_dispatch_id) AND resolver_is_id(p_approval_request_id)
                    AND resolver_is_id(p_project_id) AND resolver_is_id(p_idempotency_key),
                    false) THEN
        FOREACH field IN ARRAY ARRAY[''p_dispatch_id'', ''p_approval_request_id'',
                                     ''p_project_id'', ''p_idempotency_key''] LOOP
            IF NOT coalesce(resolver_is_id(CASE field
                    WHEN ''p_dispatch_id'' THEN p_dispatch_id
                    WHEN ''p_approval_request_id'' THEN p_approval_request_id
                    WHEN ''p_project_id'' THEN p_project_id
                    ELSE p_idempotency_key END), false) THEN
                RAISE EXCEPTION ''% must be 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric'', field
                    USING ERRCODE = ''RS005'';
            END IF;
        END LOOP;
    END IF;
    IF NOT coalesce(resolver_is_action_type(p_action_type), false) THEN
        RAISE EXCEPTION ''p_action_type must match [a-z][a-z0-9_.-]{0,63}''
            USING ERRCODE = ''RS005'';
    END IF;
    IF NOT coalesce(resolver_is_sha256_hex(p_action_digest), false) THEN
        RAISE EXCEPTION ''p_action_digest must be a lowercase hex sha256''
            USING ERRCODE = ''RS005'';
    END IF;
    IF p_schema_version IS NULL OR p_schema_version < 1 THEN
        RAISE EXCEPTION ''p_schema_version must be >= 1'' USING ERRCODE = ''RS005'';
    END IF;
    -- What was approved, for people: optional; an executor that does not
    -- pass it records none. Refused with the rule it breaks, never with its content.
    problem := resolver_action_summary_problem(p_action_summary);
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION ''p_action_summary %'', problem
            USING ERRCODE = ''RS005'',
                  HINT = ''a title and up to 8 labelled facts for people; never secrets, tool arguments or raw responses'';
    END IF;
    -- Nested, so a dispatch that supersedes nothing (nearly all) runs no query for it.
    IF p_supersedes_dispatch_id IS NOT NULL THEN
        IF p_supersedes_dispatch_id = p_dispatch_id
           OR NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS s
                          WHERE s.dispatch_id = p_supersedes_dispatch_id) THEN
            RAISE EXCEPTION ''supersedes_dispatch_id % names no dispatch'', quote_literal(p_supersedes_dispatch_id)
                USING ERRCODE = ''RS005'';
        END IF;
    END IF;
    INSERT INTO approved_action_dispatches AS d (
        dispatch_id, approval_request_id, project_id, action_type, action_digest,
        idempotency_key, schema_version, supersedes_dispatch_id, action_summary)
    VALUES (p_dispatch_id, p_approval_request_id, p_project_id, p_action_type,
            p_action_digest, p_idempotency_key, p_schema_version, p_supersedes_dispatch_id,
            p_action_summary)
    ON CONFLICT DO NOTHING
    RETURNING d.dispatch_id, true, d.created_at_ms INTO dispatch_id, created, created_at_ms;
    IF FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- An exact re-create is the same fact; anything else reuses an id for a new action.
    SELECT * INTO existing FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = p_dispatch_id OR d.idempotency_key = p_idempotency_key
    ORDER BY d.dispatch_id = p_dispatch_id DESC
    LIMIT 1;
    IF (existing.dispatch_id, existing.approval_request_id, existing.project_id,
        existing.action_type, existing.action_digest, existing.idempotency_key,
        existing.schema_version::integer)
           IS NOT DISTINCT FROM
       (p_dispatch_id, p_approval_request_id, p_project_id, p_action_type,
        p_action_digest, p_idempotency_key, p_schema_version)
       AND existing.supersedes_dispatch_id IS NOT DISTINCT FROM p_supersedes_dispatch_id
       AND existing.action_summary IS NOT DISTINCT FROM p_action_summary THEN
        dispatch_id := existing.dispatch_id;
        created := false;
        created_at_ms := existing.created_at_ms;
        RETURN NEXT;
        RETURN;
    END IF;
    RAISE EXCEPTION ''dispatch % or idempotency key % is already recorded with a different identity; a new action needs a new dispatch id and idempotency key'',
        quote_literal(p_dispatch_id), quote_literal(p_idempotency_key)
        USING ERRCODE = ''RS005'';
END
$$;

CREATE OR REPLACE FUNCTION resolver_execution_lease(
    p_dispatch_id text, p_owner text, p_lease_ms bigint, p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, owner text, token uuid, version bigint, attempt integer,
    lease_expires_at_ms bigint, state text
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    seen approved_action_executions%ROWTYPE;
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, p_lease_ms) THEN
        PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- First lease: an INSERT for an existing dispatch, checked in the statement. Not an
    -- upsert: INSERT ... ON CONFLICT DO UPDATE fires the table''s statement-level UPDATE
    -- triggers (settled-closed, proposals) even when it inserts.
    INSERT INTO approved_action_executions AS e (
        dispatch_id, state, owner, token, version, attempt, lease_expires_at_ms)
    SELECT d.dispatch_id, ''leased'', p_owner, gen_random_uuid(), 1, 1, now_ms + p_lease_ms
    FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = p_dispatch_id
    ON CONFLICT (dispatch_id) DO NOTHING
    RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
              e.lease_expires_at_ms, e.state
    INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state;
    IF NOT FOUND THEN
        -- Takeover of a `leased` execution whose lease expired (it never crossed the
        -- barrier, so running it again is safe). `executing` never leases again.
        UPDATE approved_action_executions AS e
        SET owner = p_owner,
            token = gen_random_uuid(),
            version = e.version + 1,
            attempt = e.attempt + 1,
            lease_expires_at_ms = now_ms + p_lease_ms
        WHERE e.dispatch_id = p_dispatch_id
          AND e.state = ''leased'' AND e.lease_expires_at_ms <= now_ms
        RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
                  e.lease_expires_at_ms, e.state
        INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state;
    END IF;
    IF FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS d
                   WHERE d.dispatch_id = p_dispatch_id) THEN
        RAISE EXCEPTION ''dispatch % does not exist'', quote_literal(p_dispatch_id)
            USING ERRCODE = ''RS004'';
    END IF;
    SELECT * INTO seen FROM approved_action_executions AS e
    WHERE e.dispatch_id = p_dispatch_id;
    IF seen.state = ''leased'' THEN
        RAISE EXCEPTION ''dispatch % is leased by % until its lease expires (at % ms, now % ms)'',
            quote_literal(p_dispatch_id), quote_literal(seen.owner),
            seen.lease_expires_at_ms, now_ms
            USING ERRCODE = ''RS003'', HINT = ''retry after the lease expires'';
    END IF;
    RAISE EXCEPTION ''dispatch % is %: past the start barrier only recovery or a human may settle it'',
        quote_literal(p_dispatch_id), seen.state
        USING ERRCODE = ''RS003'';
END
$$;

CREATE OR REPLACE FUNCTION resolver_execution_start(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_lease_ms bigint,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, owner text, token uuid, version bigint, attempt integer,
    lease_expires_at_ms bigint, state text, started_at_ms bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, p_lease_ms) THEN
        PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- The start barrier: leased -> executing and the control armed, one statement. Lock
    -- order: the execution row (the UPDATE, whose rows the INSERT reads), then the control.
    WITH started AS (
        UPDATE approved_action_executions AS e
        SET state = ''executing'',
            version = e.version + 1,
            started_at_ms = now_ms,
            lease_expires_at_ms = now_ms + p_lease_ms
        WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
          AND e.version = p_version AND e.state = ''leased'' AND e.lease_expires_at_ms > now_ms
        RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
                  e.lease_expires_at_ms, e.state, e.started_at_ms
    ),
    armed AS (
        INSERT INTO approved_action_recovery_controls (
            dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms)
        SELECT s.dispatch_id, ''armed'', s.version, s.lease_expires_at_ms, s.started_at_ms
        FROM started AS s
    )
    SELECT s.dispatch_id, s.owner, s.token, s.version, s.attempt, s.lease_expires_at_ms,
           s.state, s.started_at_ms
    INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state,
         started_at_ms
    FROM started AS s;
    IF NOT FOUND THEN
        PERFORM resolver_protocol_refuse(
            ''start'', p_dispatch_id, p_owner, p_token, p_version, now_ms);
    END IF;
    RETURN NEXT;
END
$$;

CREATE OR REPLACE FUNCTION resolver_execution_renew(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_lease_ms bigint,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, owner text, token uuid, version bigint, attempt integer,
    lease_expires_at_ms bigint, state text, controls_rearmed integer
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    was text;
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, p_lease_ms) THEN
        PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    UPDATE approved_action_executions AS e
    SET version = e.version + 1,
        lease_expires_at_ms = now_ms + p_lease_ms
    WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
      AND e.version = p_version AND e.state IN (''leased'', ''executing'')
    RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
              e.lease_expires_at_ms, e.state
    INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state;
    IF NOT FOUND THEN
        PERFORM resolver_protocol_refuse(
            ''renew'', p_dispatch_id, p_owner, p_token, p_version, now_ms);
    END IF;
    -- The control follows: new execution_version, recovery lease revoked
    -- (recovery_version+1), next scan pushed to the new expiry, and a manual control
    -- re-armed (the executor is alive after all). Lock order: the execution (above), then
    -- the control, read first so that only a manual -> armed change counts as re-armed.
    SELECT c.status INTO was FROM approved_action_recovery_controls AS c
    WHERE c.dispatch_id = p_dispatch_id AND c.status IN (''armed'', ''manual'')
    FOR UPDATE;
    UPDATE approved_action_recovery_controls AS c
    SET execution_version = version,
        status = ''armed'',
        manual_at_ms = NULL,
        (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
            = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version)),
        next_scan_at_ms = lease_expires_at_ms
    WHERE c.dispatch_id = p_dispatch_id AND c.status IN (''armed'', ''manual'');
    controls_rearmed := CASE WHEN was = ''manual'' THEN 1 ELSE 0 END;
    RETURN NEXT;
END
$$;

CREATE OR REPLACE FUNCTION resolver_receipt_identity(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    schema_version integer, dispatch_id text, approval_request_id text, project_id text,
    action_type text, action_digest text, idempotency_key text, attempt integer,
    started_at_ms bigint, db_now_ms bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
BEGIN
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- FOR SHARE keeps a resolver or a human from settling the execution until the
    -- caller''s transaction (the mutation and its receipt) commits or rolls back; the live
    -- lease is checked here, at the write, and again at commit (resolver_check_receipt_lease).
    RETURN QUERY
    SELECT d.schema_version::integer, d.dispatch_id, d.approval_request_id, d.project_id,
           d.action_type, d.action_digest::text, d.idempotency_key, e.attempt, e.started_at_ms,
           now_ms
    FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
      AND e.version = p_version AND e.state = ''executing'' AND e.lease_expires_at_ms > now_ms
    FOR SHARE OF e;
    IF NOT FOUND THEN
        PERFORM resolver_protocol_refuse(
            ''receipt'', p_dispatch_id, p_owner, p_token, p_version, now_ms);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION resolver_receipt_write(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_receipt jsonb
)
RETURNS TABLE (
    dispatch_id text, written_at_ms bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint := resolver_now_ms(NULL);
    identity jsonb;
    field text;
BEGIN
    -- One statement checks everything a receipt is written under: the fence and the live
    -- lease of resolver_receipt_identity (the execution locked FOR SHARE the same way), a JSON
    -- object whose integers are JSON numbers (drivers hand bigints back as strings), naming
    -- this execution field by field. Shape and signature are the provider''s to verify when it
    -- reads (a tampered receipt is a `conflict` there, never success).
    INSERT INTO action_receipts AS a (dispatch_id, receipt)
    SELECT e.dispatch_id, p_receipt
    FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
      AND e.version = p_version AND e.state = ''executing'' AND e.lease_expires_at_ms > now_ms
      AND jsonb_typeof(p_receipt) = ''object''
      AND coalesce(jsonb_typeof(p_receipt -> ''v''), ''number'') = ''number''
      AND coalesce(jsonb_typeof(p_receipt -> ''attempt''), ''number'') = ''number''
      AND coalesce(jsonb_typeof(p_receipt -> ''started_at_ms''), ''number'') = ''number''
      AND coalesce(jsonb_typeof(p_receipt -> ''finished_at_ms''), ''number'') = ''number''
      AND p_receipt -> ''dispatch_id'' = to_jsonb(d.dispatch_id)
      AND p_receipt -> ''approval_request_id'' = to_jsonb(d.approval_request_id)
      AND p_receipt -> ''project_id'' = to_jsonb(d.project_id)
      AND p_receipt -> ''action_type'' = to_jsonb(d.action_type)
      AND p_receipt -> ''action_digest'' = to_jsonb(d.action_digest)
      AND p_receipt -> ''idempotency_key'' = to_jsonb(d.idempotency_key)
      AND p_receipt -> ''attempt'' = to_jsonb(e.attempt)
      AND p_receipt -> ''started_at_ms'' = to_jsonb(e.started_at_ms)
    FOR SHARE OF e
    RETURNING a.dispatch_id, a.written_at_ms INTO dispatch_id, written_at_ms;
    IF FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- Written nothing: say why, in the order the checks are documented. A fence that does
    -- not hold is refused by resolver_receipt_identity itself.
    SELECT to_jsonb(i) INTO identity FROM resolver_receipt_identity(
        p_dispatch_id, p_owner, p_token, p_version, NULL) AS i;
    IF p_receipt IS NULL OR jsonb_typeof(p_receipt) <> ''object'' THEN
        RAISE EXCEPTION ''p_receipt must be a JSON object (receipt v1)''
            USING ERRCODE = ''RS005'';
    END IF;
    FOREACH field IN ARRAY ARRAY[''v'', ''attempt'', ''started_at_ms'', ''finished_at_ms''] LOOP
        IF p_receipt ? field AND jsonb_typeof(p_receipt -> field) <> ''number'' THEN
            RAISE EXCEPTION ''receipt field % must be a JSON integer, not a JSON %'', field,
                jsonb_typeof(p_receipt -> field)
                USING ERRCODE = ''RS005'',
                      HINT = ''convert the bigint your driver returned as a string (Number() in JavaScript)'';
        END IF;
    END LOOP;
    FOREACH field IN ARRAY ARRAY[''dispatch_id'', ''approval_request_id'', ''project_id'',
                                 ''action_type'', ''action_digest'', ''idempotency_key'',
                                 ''attempt'', ''started_at_ms''] LOOP
        IF (p_receipt -> field) IS DISTINCT FROM (identity -> field) THEN
            RAISE EXCEPTION ''receipt field % does not match dispatch %'', field,
                quote_literal(p_dispatch_id)
                USING ERRCODE = ''RS005'';
        END IF;
    END LOOP;
    -- Every check passes now: the execution moved on between the write and these reads.
    RAISE EXCEPTION ''receipt of % was not written: its execution changed while it was written'',
        quote_literal(p_dispatch_id)
        USING ERRCODE = ''RS001'';
END
$$;

-- A bulk import of history (a benchmark''s seed, a restore) by the tables'' owner may write rows
-- the functions would write one transition at a time: with `resolver.import_history` set to
-- `on` in its transaction, the insert guards and the receipt''s lease check let it through.
-- Nobody else can: the flag counts only for a member of the owning role.
CREATE OR REPLACE FUNCTION resolver_importing_history(p_table regclass) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting(''resolver.import_history'', true), '''') = ''on''
       AND pg_has_role(session_user, (SELECT c.relowner FROM pg_class AS c WHERE c.oid = p_table),
                       ''MEMBER'')
$$;

-- An execution is born `leased` at version 1 (resolver_execution_lease writes it so), a control
-- `armed` (by the start barrier); inserting either in a later state would skip the state machine.
CREATE OR REPLACE FUNCTION resolver_guard_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF resolver_importing_history(TG_RELID) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION ''%: INSERT of % rejected (%)'', TG_TABLE_NAME, NEW.dispatch_id,
        CASE TG_TABLE_NAME
            WHEN ''approved_action_executions''
                THEN ''an execution is born leased, at version 1 and attempt 1, with no start or outcome''
            ELSE ''a control is born armed by the start barrier, with no recovery lease''
        END
        USING ERRCODE = ''RS006'',
              HINT = ''executors write executions and controls only through the resolver_execution_* functions'';
END
$$;

-- At commit, a receipt''s execution must still hold a live lease: a receipt written while the
-- lease was live but committed after it expired (a slow transaction) rolls back with the
-- mutation in its transaction, instead of landing beside a human''s decision on the same
-- version. Only an `executing` execution is checked (a provider''s evidence may predate one).
CREATE OR REPLACE FUNCTION resolver_check_receipt_lease() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    expires bigint;
    now_ms bigint;
BEGIN
    SELECT e.lease_expires_at_ms INTO expires FROM approved_action_executions AS e
    WHERE e.dispatch_id = NEW.dispatch_id AND e.state = ''executing'';
    now_ms := resolver_now_ms(NULL);
    IF FOUND AND expires <= now_ms AND NOT resolver_importing_history(TG_RELID) THEN
        RAISE EXCEPTION ''the receipt of % would commit after its execution lease expired (at % ms, now % ms): the transaction rolls back'',
            quote_literal(NEW.dispatch_id), expires, now_ms
            USING ERRCODE = ''RS002'',
                  HINT = ''renew before the mutation''''s transaction; nothing of this transaction committed'';
    END IF;
    RETURN NULL;
END
$$;

-- Functions are executable by PUBLIC by default; resolver/db/grants.sql grants the protocol
-- to the executor role. The helpers (resolver_protocol_*) are nobody else''s to call.
REVOKE EXECUTE ON FUNCTION
    resolver_protocol_now_ms(bigint),
    resolver_protocol_test_clock(bigint),
    resolver_protocol_lease_ok(text, bigint),
    resolver_protocol_check_lease(text, bigint),
    resolver_protocol_refuse(text, text, text, uuid, bigint, bigint),
    resolver_dispatch_create_v2(text, text, text, text, text, text, integer, text, jsonb),
    resolver_execution_lease(text, text, bigint, bigint),
    resolver_execution_start(text, text, uuid, bigint, bigint, bigint),
    resolver_execution_renew(text, text, uuid, bigint, bigint, bigint),
    resolver_receipt_identity(text, text, uuid, bigint, bigint),
    resolver_receipt_write(text, text, uuid, bigint, jsonb)
FROM PUBLIC;

-- Names the rule a write broke (the triggers below call it only then).
CREATE OR REPLACE FUNCTION resolver_guard_execution() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    rule text;
BEGIN
    rule := CASE
        WHEN OLD.state = ANY (resolver_terminal_states()) THEN ''a terminal execution never changes''
        WHEN NEW.dispatch_id <> OLD.dispatch_id THEN ''an execution keeps its dispatch_id''
        WHEN OLD.state = ''executing'' AND NEW.state = ''leased''
            THEN ''executing never returns to leased''
        WHEN NOT (NEW.state = OLD.state OR (OLD.state = ''leased'' AND NEW.state = ''executing'')
                  OR (OLD.state = ''executing'' AND NEW.state = ANY (resolver_terminal_states())))
            THEN ''only leased -> executing -> terminal (the start barrier cannot be skipped)''
        WHEN NEW.version < OLD.version OR NEW.attempt < OLD.attempt
            THEN ''version and attempt never decrease''
        WHEN NEW.version = OLD.version AND NEW.lease_expires_at_ms > OLD.lease_expires_at_ms
            THEN ''a lease is extended only with a version bump''
        WHEN NEW.version = OLD.version
            THEN ''a state, owner or token change needs a version bump''
        ELSE ''started_at_ms is set once, at the start barrier''
    END;
    RAISE EXCEPTION ''approved_action_executions %: % rejected (%)'', NEW.dispatch_id, TG_OP, rule
        USING ERRCODE = ''RS006'',
              HINT = ''executors change executions only through the resolver_execution_* functions'';
END
$$;

CREATE OR REPLACE FUNCTION resolver_guard_control() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    rule text;
BEGIN
    rule := CASE
        WHEN OLD.status = ''resolved'' THEN ''a resolved control never reopens or changes''
        WHEN NEW.dispatch_id <> OLD.dispatch_id THEN ''a control keeps its dispatch_id''
        WHEN NEW.execution_version < OLD.execution_version
          OR NEW.recovery_version < OLD.recovery_version
            THEN ''execution_version and recovery_version never decrease''
        ELSE ''a recovery lease changes only with a recovery_version bump''
    END;
    RAISE EXCEPTION ''approved_action_recovery_controls %: % rejected (%)'',
        NEW.dispatch_id, TG_OP, rule
        USING ERRCODE = ''RS006'',
              HINT = ''controls change only through the resolver_execution_* functions and the resolver'';
END
$$;

-- At commit, every open control follows its execution''s version: a renew or completion that
-- forgot the control (a hand-written executor) fails instead of leaving recovery a stale fence.
CREATE OR REPLACE FUNCTION resolver_check_control_in_step() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    control_version bigint;
    execution_version bigint;
BEGIN
    SELECT c.execution_version, e.version INTO control_version, execution_version
    FROM approved_action_recovery_controls AS c
    JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE c.dispatch_id = NEW.dispatch_id AND c.status <> ''resolved'';
    IF FOUND AND control_version <> execution_version THEN
        RAISE EXCEPTION ''dispatch %: an open control''''s execution_version (%) must equal its execution''''s version (%) at commit'',
            NEW.dispatch_id, control_version, execution_version
            USING ERRCODE = ''RS006'',
                  HINT = ''update the control in the same transaction (resolver_execution_renew does)'';
    END IF;
    RETURN NULL;
END
$$;

-- A terminal transition must close its control in the same statement (the functions and the
-- resolver''s commits do, in one statement). Checked once per statement over its transition
-- table, so settling a page of 64 costs one set-based lookup, not 64 deferred row checks.
CREATE OR REPLACE FUNCTION resolver_check_settled_closed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    left_open text;
BEGIN
    -- A semi-join from the settled rows to the controls'' primary key. The planner knows how
    -- many rows the statement settled: for one (every completion) a single key probe is the
    -- plan, on tables never analyzed too. (An `= ANY (array)` over the controls was planned
    -- there as a scan of every control, and a long-lived session kept that plan as the table
    -- grew.) A statement that settles nothing (the start barrier, a renewal) reads no control.
    SELECT n.dispatch_id INTO left_open
    FROM settled AS n
    WHERE n.state = ANY (resolver_terminal_states())
      AND EXISTS (SELECT 1 FROM approved_action_recovery_controls AS c
                  WHERE c.dispatch_id = n.dispatch_id AND c.status <> ''resolved'')
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION ''dispatch %: an open control''''s execution_version must equal its execution''''s version; a terminal execution''''s control is closed by the same statement'',
            left_open
            USING ERRCODE = ''RS006'',
                  HINT = ''settle through resolver_execution_complete (or close the control in the same statement)'';
    END IF;
    RETURN NULL;
END
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_guard_execution(),
    resolver_guard_control(),
    resolver_check_control_in_step(),
    resolver_check_settled_closed(),
    resolver_check_receipt_lease(),
    resolver_guard_insert(),
    resolver_importing_history(regclass)
FROM PUBLIC;

-- The commit-time checks read both tables whoever commits (an executor reaches them only
-- through the functions above).
ALTER FUNCTION resolver_check_control_in_step() SECURITY DEFINER;

ALTER FUNCTION resolver_check_settled_closed() SECURITY DEFINER;

-- Each function resolves names through a search_path pinned to the migrated schema, with
-- pg_temp last so a caller''s temporary table can never shadow a protocol table.
DO $$
DECLARE
    fn text;
BEGIN
    -- (Not the inlined helpers, resolver_protocol_now_ms and resolver_protocol_lease_ok: a
    -- pinned search_path would keep the planner from inlining them. They run inside the
    -- protocol functions'' own pinned search_path.)
    FOREACH fn IN ARRAY ARRAY[
        ''resolver_protocol_test_clock(bigint)'',
        ''resolver_protocol_check_lease(text, bigint)'',
        ''resolver_protocol_refuse(text, text, text, uuid, bigint, bigint)'',
        ''resolver_dispatch_create_v2(text, text, text, text, text, text, integer, text, jsonb)'',
        ''resolver_execution_lease(text, text, bigint, bigint)'',
        ''resolver_execution_start(text, text, uuid, bigint, bigint, bigint)'',
        ''resolver_execution_renew(text, text, uuid, bigint, bigint, bigint)'',
        ''resolver_receipt_identity(text, text, uuid, bigint, bigint)'',
        ''resolver_receipt_write(text, text, uuid, bigint, jsonb)'',
        ''resolver_guard_execution()'',
        ''resolver_guard_control()'',
        ''resolver_check_control_in_step()'',
        ''resolver_check_settled_closed()'',
        ''resolver_check_receipt_lease()'',
        ''resolver_guard_insert()'',
        ''resolver_importing_history(regclass)''
    ] LOOP
        EXECUTE format(''ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp'',
                       fn, current_schema());
    END LOOP;
END
$$;

-- The acts a person''s signed fact may name, each consumed by the one function that records it:
-- a decision alone (decide), the first of two (propose) and the second (confirm) by
-- resolver_commit_manual; ending a proposal without a decision (reject, withdraw) by
-- resolver_proposal_close. Python keeps the same set (resolver.core.domain.Act; a test compares
-- the two).
CREATE OR REPLACE FUNCTION resolver_fact_acts() RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN ARRAY[''decide'', ''propose'', ''confirm'', ''reject'', ''withdraw''];
END
$$;

-- The canonical content of an audit link: resolver_commit_manual and resolver_proposal_close
-- write it, `resolver audit verify` rebuilds it from the stored facts with the same functions,
-- so the two agree only while the facts are unchanged. json, not jsonb: the text keeps this
-- order.
-- One person''s authorization fact. A signed fact adds who vouched for it (the token''s issuer
-- and key id) and the API''s Ed25519 signature with its key id; a fact that names its act
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
        ''user_id'', p_user_id, ''permission'', p_permission, ''project_id'', p_project_id,
        ''project_version'', p_project_version, ''role_binding_version'', p_role_binding_version,
        ''auth_time_ms'', p_auth_time_ms, ''amr'', p_amr, ''authorized_at_ms'', p_authorized_at_ms)
    WHEN p_act IS NULL THEN json_build_object(
        ''user_id'', p_user_id, ''permission'', p_permission, ''project_id'', p_project_id,
        ''project_version'', p_project_version, ''role_binding_version'', p_role_binding_version,
        ''auth_time_ms'', p_auth_time_ms, ''amr'', p_amr, ''authorized_at_ms'', p_authorized_at_ms,
        ''issuer'', p_issuer, ''token_kid'', p_token_kid, ''signing_kid'', p_signing_kid,
        ''signature'', p_signature)
    ELSE json_build_object(
        ''user_id'', p_user_id, ''permission'', p_permission, ''project_id'', p_project_id,
        ''project_version'', p_project_version, ''role_binding_version'', p_role_binding_version,
        ''auth_time_ms'', p_auth_time_ms, ''amr'', p_amr, ''authorized_at_ms'', p_authorized_at_ms,
        ''issuer'', p_issuer, ''token_kid'', p_token_kid, ''signing_kid'', p_signing_kid,
        ''signature'', p_signature, ''act'', p_act, ''mutation_id'', p_act_mutation_id,
        ''proposal_id'', p_proposal_id, ''verified_at_ms'', p_verified_at_ms) END
$$;

-- The proposal a link''s act confirms or closes, as the link carries it: which proposal, what
-- it proposed, who, when, until when.
CREATE OR REPLACE FUNCTION resolver_audit_proposal(
    p_proposal_id bigint, p_mutation_id text, p_outcome text,
    p_expected_execution_version bigint, p_evidence_digest text, p_reason_code text,
    p_proposed_by text, p_proposed_at_ms bigint, p_expires_at_ms bigint)
RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT json_build_object(
        ''proposal_id'', p_proposal_id, ''mutation_id'', p_mutation_id, ''outcome'', p_outcome,
        ''expected_execution_version'', p_expected_execution_version,
        ''evidence_digest'', p_evidence_digest, ''reason_code'', p_reason_code,
        ''proposed_by'', p_proposed_by, ''proposed_at_ms'', p_proposed_at_ms,
        ''expires_at_ms'', p_expires_at_ms)
$$;

-- A decision''s link: the resolution and its authorization facts; since facts name their act
-- (v2), also the event (`decide`, or `confirm` of a proposal) and the proposal it confirmed.
CREATE OR REPLACE FUNCTION resolver_audit_content(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text,
    p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text,
    p_reason_code text, p_resolved_at_ms bigint, p_authorizations json, p_event text,
    p_proposal json)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_event IS NULL THEN json_build_object(
        ''v'', 1, ''dispatch_id'', p_dispatch_id, ''mutation_id'', p_mutation_id,
        ''source'', ''manual'', ''outcome'', p_outcome, ''overridden_finding'', p_finding,
        ''evidence_digest'', p_evidence_digest,
        ''expected_execution_version'', p_expected_execution_version,
        ''actor_user_id'', p_actor_user_id, ''reason_code'', p_reason_code,
        ''resolved_at_ms'', p_resolved_at_ms, ''authorizations'', p_authorizations)::text
    ELSE json_build_object(
        ''v'', 2, ''event'', p_event, ''dispatch_id'', p_dispatch_id, ''mutation_id'', p_mutation_id,
        ''source'', ''manual'', ''outcome'', p_outcome, ''overridden_finding'', p_finding,
        ''evidence_digest'', p_evidence_digest,
        ''expected_execution_version'', p_expected_execution_version,
        ''actor_user_id'', p_actor_user_id, ''reason_code'', p_reason_code,
        ''resolved_at_ms'', p_resolved_at_ms, ''proposal'', p_proposal,
        ''authorizations'', p_authorizations)::text END
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
               CASE WHEN bool_or(a.act = ''confirm'') THEN ''confirm''
                    WHEN bool_or(a.act IS NOT NULL) THEN ''decide'' END AS event,
               max(a.proposal_id) FILTER (WHERE a.act = ''confirm'') AS proposal_id
        FROM recovery_authorizations AS a WHERE a.mutation_id = r.mutation_id) AS f
    WHERE r.mutation_id = p_mutation_id AND r.source = ''manual''
$$;

-- The content of the link of the reject or withdraw `p_mutation_id`: the proposal it ended,
-- the proposer''s fact and the closer''s; NULL once retention removed the proposal.
CREATE OR REPLACE FUNCTION resolver_audit_close(p_mutation_id text)
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        ''v'', 2, ''event'', c.act, ''dispatch_id'', p.dispatch_id,
        ''mutation_id'', p.closed_mutation_id, ''reason_code'', p.close_reason_code,
        ''closed_at_ms'', p.closed_at_ms,
        ''proposal'', resolver_audit_proposal(
            p.proposal_id, p.mutation_id, p.outcome, p.expected_execution_version,
            p.evidence_digest, p.reason_code, p.proposed_by, p.proposed_at_ms,
            p.expires_at_ms),
        ''authorizations'', json_build_array(
            resolver_audit_authorization(
                p.proposed_by, ''approval.recover'', p.project_id, p.project_version,
                p.role_binding_version, p.auth_time_ms, p.amr, p.proposed_at_ms, p.issuer,
                p.token_kid, p.signing_kid, p.signature,
                CASE WHEN p.verified_at_ms IS NOT NULL THEN ''propose'' END,
                CASE WHEN p.verified_at_ms IS NOT NULL THEN p.mutation_id END, NULL,
                p.verified_at_ms),
            resolver_audit_authorization(
                p.closed_by, ''approval.recover'', p.project_id, p.closed_project_version,
                p.closed_role_binding_version, p.closed_auth_time_ms, p.closed_amr,
                p.closed_at_ms, p.closed_issuer, p.closed_token_kid, p.closed_signing_kid,
                p.closed_signature,
                CASE WHEN p.closed_verified_at_ms IS NOT NULL THEN c.act END,
                CASE WHEN p.closed_verified_at_ms IS NOT NULL THEN p.closed_mutation_id END,
                CASE WHEN p.closed_verified_at_ms IS NOT NULL THEN p.proposal_id END,
                p.closed_verified_at_ms)))::text
    FROM recovery_proposals AS p
    CROSS JOIN LATERAL (
        SELECT CASE p.closed_as WHEN ''rejected'' THEN ''reject'' ELSE ''withdraw'' END AS act) AS c
    WHERE p.closed_mutation_id = p_mutation_id AND p.closed_as IN (''rejected'', ''withdrawn'')
$$;

-- Appends one link after the head: moving the one head row takes its lock, so concurrent acts
-- link one after another; after a wait, READ COMMITTED re-reads the head that committed first
-- and this link''s hash is computed from it. The head is the last row locked: the lock order
-- (execution, control, inserts, head) is the same for every writer. Run only inside the two
-- functions that record a person''s act (the guards on the chain and the head look for them).
CREATE OR REPLACE FUNCTION resolver_audit_append(
    p_mutation_id text, p_dispatch_id text, p_content text, p_recorded_at_ms bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    WITH head AS (
        UPDATE recovery_audit_head AS h
        SET seq = h.seq + 1,
            prev_hash = h.hash,
            hash = encode(sha256(convert_to(h.hash || p_content, ''UTF8'')), ''hex'')
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

-- The bounds an act is held to: the policy writer''s row, or tighter ones the caller asks for
-- (NULL: the policy''s). A looser bound is refused (RS005): the database, not the caller, sets
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
        RAISE EXCEPTION ''recovery_decision_policy has no row: no act can be bounded''
            USING ERRCODE = ''RS005'';
    END IF;
    IF p_max_auth_age_ms > policy.max_auth_age_ms OR p_max_auth_age_ms < 0 THEN
        RAISE EXCEPTION ''p_max_auth_age_ms % is looser than the policy''''s % ms'',
            p_max_auth_age_ms, policy.max_auth_age_ms
            USING ERRCODE = ''RS005'', HINT = ''pass NULL or a tighter bound'';
    END IF;
    IF p_proposal_ttl_ms > policy.proposal_ttl_ms OR p_proposal_ttl_ms < 1000 THEN
        RAISE EXCEPTION ''p_proposal_ttl_ms % is not within 1 s and the policy''''s % ms'',
            p_proposal_ttl_ms, policy.proposal_ttl_ms
            USING ERRCODE = ''RS005'', HINT = ''pass NULL or a tighter bound'';
    END IF;
    max_auth_age_ms := coalesce(p_max_auth_age_ms, policy.max_auth_age_ms);
    proposal_ttl_ms := coalesce(p_proposal_ttl_ms, policy.proposal_ttl_ms);
    clock_leeway_ms := policy.clock_leeway_ms;
    RETURN NEXT;
END
$$;

-- What every signed fact must carry before anything is read: a strong authentication method,
-- the API''s signature with its key id, the token''s issuer and key id, and when the API
-- verified the token (RS005 otherwise).
CREATE OR REPLACE FUNCTION resolver_fact_shape(
    p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text,
    p_verified_at_ms bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT resolver_strong_amr(p_amr) THEN
        RAISE EXCEPTION ''p_amr must name a strong authentication method'' USING ERRCODE = ''RS005'';
    END IF;
    IF NOT coalesce(resolver_is_signature_hex(p_signature)
                    AND resolver_is_signing_kid(p_signing_kid)
                    AND length(p_issuer) BETWEEN 1 AND 512 AND p_issuer !~ ''[[:cntrl:]]''
                    AND length(p_token_kid) BETWEEN 1 AND 256
                    AND p_token_kid !~ ''[[:cntrl:]]''
                    AND p_verified_at_ms IS NOT NULL, false) THEN
        RAISE EXCEPTION ''an act needs its signed fact (p_issuer, p_token_kid, p_signing_kid, p_signature, p_verified_at_ms)''
            USING ERRCODE = ''RS005'';
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
        RAISE EXCEPTION ''mutation id % was already recorded: a signed fact is consumed once'',
            quote_literal(p_mutation_id) USING ERRCODE = ''RS007'';
    END IF;
    IF EXISTS (SELECT 1 FROM recovery_authorizations AS a WHERE a.signature = p_signature)
       OR EXISTS (SELECT 1 FROM recovery_proposals AS rp WHERE rp.signature = p_signature)
       OR EXISTS (SELECT 1 FROM recovery_proposals AS rp
                  WHERE rp.closed_signature = p_signature) THEN
        RAISE EXCEPTION ''this signature was already recorded: a signed fact is consumed once''
            USING ERRCODE = ''RS007'';
    END IF;
END
$$;

-- A fact is fresh: the API verified its token (and read the database clock) at most the
-- policy''s leeway away from now. An old fact replayed later is refused (RS007).
CREATE OR REPLACE FUNCTION resolver_fact_fresh(
    p_verified_at_ms bigint, p_now_ms bigint, p_clock_leeway_ms bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_verified_at_ms NOT BETWEEN p_now_ms - p_clock_leeway_ms
                                AND p_now_ms + p_clock_leeway_ms THEN
        RAISE EXCEPTION ''the fact was verified at % ms, more than % ms from the database clock (%)'',
            p_verified_at_ms, p_clock_leeway_ms, p_now_ms USING ERRCODE = ''RS007'';
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
          AND (r.action_type_pattern IN (p_action_type, ''*'')
               OR (right(r.action_type_pattern, 1) = ''*''
                   AND left(p_action_type, length(r.action_type_pattern) - 1)
                       = left(r.action_type_pattern, -1))))
$$;

-- A proposal is closed once: only the closing columns of an open row may change.
CREATE OR REPLACE FUNCTION resolver_proposal_close_once() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    closing constant text[] := ARRAY[''closed_as'', ''closed_at_ms'', ''closed_by'',
                                     ''closed_mutation_id'', ''close_reason_code'',
                                     ''closed_auth_time_ms'', ''closed_amr'',
                                     ''closed_project_version'', ''closed_role_binding_version'',
                                     ''closed_issuer'', ''closed_token_kid'', ''closed_signing_kid'',
                                     ''closed_signature'', ''closed_verified_at_ms''];
BEGIN
    IF OLD.closed_as IS NOT NULL OR NEW.closed_as IS NULL
       OR (to_jsonb(NEW) - closing) IS DISTINCT FROM (to_jsonb(OLD) - closing) THEN
        RAISE EXCEPTION ''recovery_proposals: a proposal is closed once and never edited''
            USING ERRCODE = ''restrict_violation'';
    END IF;
    RETURN NEW;
END
$$;

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
    SET closed_as = ''voided'', closed_at_ms = resolver_now_ms(NULL),
        close_reason_code = ''execution_changed''
    FROM changed AS n
    WHERE p.dispatch_id = n.dispatch_id AND p.closed_as IS NULL
      AND p.expected_execution_version <> n.version;
    RETURN NULL;
END
$$;

REVOKE EXECUTE ON FUNCTION resolver_proposal_close_once(), resolver_proposals_void() FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format(''ALTER FUNCTION resolver_proposals_void() ''
                   ''SET search_path = pg_catalog, %I, pg_temp'', current_schema());
END
$$;

-- Strong authentication: the `amr` values that count as a second factor. The Python side
-- keeps the same set (resolver.human.manual.STRONG_AMR; a test compares the two).
CREATE OR REPLACE FUNCTION resolver_strong_amr(p_amr text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(p_amr && ARRAY[''mfa'', ''hwk'', ''swk'', ''otp'', ''fido'']::text[], false)
$$;

-- The rule in the schema, whatever wrote the rows: at commit, a manual resolution carries
-- signed authorization facts of as many different people as the rules require (one, or two),
-- each strongly authenticated and still bound to the permission on the dispatch''s project at
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
        RETURN NULL;  -- the owner''s import of history recorded elsewhere
    END IF;
    SELECT d.action_type, d.project_id INTO v_action_type, v_project_id
    FROM approved_action_dispatches AS d WHERE d.dispatch_id = NEW.dispatch_id;
    SELECT count(DISTINCT a.user_id) INTO v_people
    FROM recovery_authorizations AS a
    JOIN recovery_role_bindings AS b
      ON b.project_id = a.project_id AND b.user_id = a.user_id
     AND b.permission = ''approval.recover'' AND b.version = a.role_binding_version
    JOIN recovery_projects AS p
      ON p.project_id = a.project_id AND p.version = a.project_version
    WHERE a.mutation_id = NEW.mutation_id AND a.project_id = v_project_id
      AND a.signature IS NOT NULL AND resolver_strong_amr(a.amr);
    v_needed := CASE WHEN resolver_needs_two_people(v_action_type, NEW.outcome) THEN 2
                     ELSE 1 END;
    IF v_people < v_needed THEN
        RAISE EXCEPTION ''dispatch % needs % people for this decision: its resolution has % signed authorizations of currently bound, strongly authenticated people'',
            quote_literal(NEW.dispatch_id), v_needed, v_people
            USING ERRCODE = ''check_violation'',
                  CONSTRAINT = ''ck_recovery_resolutions_two_people'';
    END IF;
    RETURN NULL;
END
$$;

REVOKE EXECUTE ON FUNCTION resolver_needs_two_people(text, text), resolver_two_people_present(),
    resolver_strong_amr(text[])
FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format(''ALTER FUNCTION resolver_two_people_present() ''
                   ''SET search_path = pg_catalog, %I, pg_temp'', current_schema());
END
$$;

-- A manual decision opens its watch in the decision''s own transaction, without touching the
-- manual commit. Not for an abandon (`blocked` claims no outcome to contradict) nor when the
-- finding it overrode was `unsupported` (no automatic provider can look).
CREATE OR REPLACE FUNCTION resolver_open_late_watch() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO recovery_late_watches (
        dispatch_id, decision_mutation_id, decided_outcome, decided_at_ms, next_scan_at_ms)
    VALUES (NEW.dispatch_id, NEW.mutation_id, NEW.outcome, NEW.resolved_at_ms,
            NEW.resolved_at_ms);
    RETURN NULL;
END
$$;

-- The record of one claimed page of watches (see queries.sql, late_watch_record): fenced on
-- the watch''s token, its being open and inside the window on the database clock. A verified
-- finding inserts the late evidence and closes the watch; `unsupported` closes it (the
-- provider can never tell); anything else schedules the next look. Answers each fenced
-- dispatch id with the observation it took, whether it recorded evidence, and whether that
-- evidence agrees. A watch named twice (a stale and a fresh claim) is fenced once, on the
-- token it holds. SECURITY DEFINER: the replicas hold no INSERT on late
-- evidence, so this fenced record is their only way to write it.
CREATE OR REPLACE FUNCTION resolver_record_late_evidence(
    p_items json, p_owner text, p_window_ms bigint, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, observation_id text, recorded boolean, agrees boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER AS $$
    -- The clock rule first, whatever the items: a refused override is refused even when no
    -- watch matches (the query below reads its clock only once a watch is found).
    SELECT resolver_protocol_now_ms(p_now_ms);
    WITH now AS (SELECT resolver_protocol_now_ms(p_now_ms) AS ms),
    item AS (
        SELECT * FROM json_to_recordset(p_items) AS i(
            dispatch_id text, watch_token uuid, finding text, evidence_digest text,
            result_code text, observation_id text, delay_ms bigint)
    ),
    -- SKIP LOCKED, like the automatic commit: a watch another transaction holds is left out
    -- (a lost fence); it is claimed again once its lease lapses.
    locked AS (
        SELECT w.dispatch_id, w.watch_token, w.decision_mutation_id, w.decided_outcome
        FROM recovery_late_watches AS w
        JOIN item AS i ON i.dispatch_id = w.dispatch_id AND i.watch_token = w.watch_token
        WHERE w.closed_at_ms IS NULL
          AND w.decided_at_ms + p_window_ms > (SELECT ms FROM now)
        ORDER BY w.dispatch_id
        FOR UPDATE OF w SKIP LOCKED
    ),
    fenced AS (
        SELECT DISTINCT ON (l.dispatch_id)
               l.dispatch_id, l.decision_mutation_id, l.decided_outcome,
               i.finding, i.evidence_digest, i.result_code, i.observation_id, i.delay_ms,
               resolver_finding_outcome(i.finding) IS NOT NULL AS verified,
               i.finding = ''verified_'' || l.decided_outcome AS agrees
        FROM locked AS l
        JOIN item AS i ON i.dispatch_id = l.dispatch_id AND i.watch_token = l.watch_token
        ORDER BY l.dispatch_id, i.observation_id
    ),
    evidence AS (
        INSERT INTO recovery_late_evidence (
            observation_id, dispatch_id, decision_mutation_id, finding, agrees,
            evidence_digest, result_code, observer, observed_at_ms)
        SELECT f.observation_id, f.dispatch_id, f.decision_mutation_id, f.finding, f.agrees,
               f.evidence_digest, f.result_code, p_owner, now.ms
        FROM fenced AS f, now
        WHERE f.verified
    ),
    watch AS (
        UPDATE recovery_late_watches AS w
        SET watch_owner = NULL,
            watch_token = NULL,
            observations = w.observations + 1,
            last_observed_at_ms = now.ms,
            next_scan_at_ms = now.ms + greatest(coalesce(f.delay_ms, 0), 0),
            closed_at_ms = CASE WHEN f.verified OR f.finding = ''unsupported'' THEN now.ms END,
            closed_reason = CASE WHEN f.verified THEN ''observed''
                                 WHEN f.finding = ''unsupported'' THEN ''unsupported'' END
        FROM fenced AS f, now
        WHERE w.dispatch_id = f.dispatch_id
    )
    SELECT f.dispatch_id, f.observation_id, f.verified, CASE WHEN f.verified THEN f.agrees END
    FROM fenced AS f
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_open_late_watch(),
    resolver_record_late_evidence(json, text, bigint, bigint)
FROM PUBLIC;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        ''resolver_open_late_watch()'',
        ''resolver_record_late_evidence(json, text, bigint, bigint)''
    ] LOOP
        EXECUTE format(''ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp'',
                       fn, current_schema());
    END LOOP;
END
$$;

-- Retention: resolver_prune_batch prunes settled dispatches (the only way past the
-- insert-only triggers, which look for it on the call stack) and what else keeps retention
-- safe.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

-- A resolution outlives its execution under retention: an identity that was settled must never
-- get a new execution (a lease, whatever writes it), or an approved action could run twice.
CREATE OR REPLACE FUNCTION resolver_refuse_settled_lease() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    -- Only when no execution exists: INSERT ... ON CONFLICT (the lease) fires this before the
    -- conflict check, and a settled execution that still exists is the lease''s to refuse
    -- (RS003, past the start barrier).
    IF EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS r
               WHERE r.dispatch_id = NEW.dispatch_id)
       AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                       WHERE e.dispatch_id = NEW.dispatch_id) THEN
        RAISE EXCEPTION ''dispatch % was settled by a resolution (its execution was pruned): it is never leased again; a new action needs a new dispatch'',
            quote_literal(NEW.dispatch_id)
            USING ERRCODE = ''restrict_violation'';
    END IF;
    RETURN NEW;
END
$$;

-- p_past_consumers: prune outcome records a registered consumer has not read yet (counted as
-- outcomes_unread); without it a dispatch with such a record is held back for a later run.
CREATE OR REPLACE FUNCTION resolver_prune_begin(
    p_cutoff_ms bigint, p_include_audit boolean, p_export_digest text, p_actor text,
    p_past_consumers boolean DEFAULT false)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_run_id bigint;
BEGIN
    IF p_cutoff_ms IS NULL OR p_cutoff_ms > resolver_now_ms(NULL) THEN
        RAISE EXCEPTION ''prune cut-off must be a time in the past''
            USING ERRCODE = ''invalid_parameter_value'';
    END IF;
    IF p_export_digest IS NOT NULL AND NOT resolver_is_sha256_hex(p_export_digest) THEN
        RAISE EXCEPTION ''an export digest is a lowercase hex sha256''
            USING ERRCODE = ''invalid_parameter_value'';
    END IF;
    IF coalesce(p_include_audit, true) AND p_export_digest IS NULL THEN
        RAISE EXCEPTION ''pruning audit facts requires the sha256 of their export''
            USING ERRCODE = ''invalid_parameter_value'';
    END IF;
    INSERT INTO recovery_prune_runs (started_at_ms, cutoff_ms, include_audit, export_digest,
                                     db_user, actor, past_consumers)
    VALUES (resolver_now_ms(NULL), p_cutoff_ms, p_include_audit, p_export_digest,
            session_user, left(p_actor, 128), coalesce(p_past_consumers, false))
    RETURNING run_id INTO v_run_id;
    RETURN v_run_id;
END
$$;

-- One batch: lock what it may take (SKIP LOCKED, never waits on a row another transaction
-- holds), re-check every rule under the lock, delete, count. All or nothing per dispatch.
CREATE OR REPLACE FUNCTION resolver_prune_batch(p_run_id bigint, p_limit integer, p_dispatch_ids text[])
RETURNS TABLE (dispatches bigint, audit bigint, evidence bigint, remnants bigint,
               outcomes bigint, outcomes_unread bigint)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_unread_xid xid8;
    v_unread_seq bigint;
    v_outcomes bigint;
    v_outcomes_unread bigint;
    r recovery_prune_runs;
    v_settled text[];
    v_remnants text[] := ''{}'';
    v_rows text[];
    v_audit text[];
    v_evidence bigint := 0;
    v_n bigint;
    v_first_seq bigint;
    v_last_seq bigint;
    v_table record;
BEGIN
    SELECT * INTO r FROM recovery_prune_runs WHERE run_id = p_run_id FOR NO KEY UPDATE;
    IF NOT FOUND OR r.finished_at_ms IS NOT NULL THEN
        RAISE EXCEPTION ''prune run % is not open'', p_run_id USING ERRCODE = ''no_data_found'';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION ''prune batch size must be between 1 and 10000''
            USING ERRCODE = ''invalid_parameter_value'';
    END IF;
    -- Deleting only what was exported: a run with an export names its dispatches.
    IF r.export_digest IS NOT NULL AND p_dispatch_ids IS NULL THEN
        RAISE EXCEPTION ''a run with an export prunes only the dispatches it exported''
            USING ERRCODE = ''invalid_parameter_value'';
    END IF;
    IF cardinality(p_dispatch_ids) > p_limit THEN
        RAISE EXCEPTION ''more dispatch ids than the batch size''
            USING ERRCODE = ''invalid_parameter_value'';
    END IF;

    -- The slowest registered consumer''s cursor: every outcome record after it is unread by
    -- someone. Unless the run goes past consumers, a dispatch with such a record waits for a
    -- later run (a consumer registered while this batch runs is protected from its commit on).
    SELECT c.cursor_xid, c.cursor_position INTO v_unread_xid, v_unread_seq
    FROM recovery_outcome_consumers AS c
    ORDER BY c.cursor_xid, c.cursor_position
    LIMIT 1;

    -- Settled: terminal execution, resolved control, both older than the cut-off. Locks the
    -- execution, the control and the identity; anything held elsewhere waits for a later run.
    IF p_dispatch_ids IS NULL THEN
        SELECT coalesce(array_agg(s.dispatch_id), ''{}'') INTO v_settled FROM (
            SELECT c.dispatch_id
            FROM approved_action_recovery_controls AS c
            JOIN approved_action_executions AS e USING (dispatch_id)
            JOIN approved_action_dispatches AS d USING (dispatch_id)
            WHERE c.status = ''resolved'' AND c.closed_at_ms < r.cutoff_ms
              AND e.state = ANY (resolver_terminal_states()) AND e.finished_at_ms < r.cutoff_ms
              AND (r.past_consumers OR v_unread_xid IS NULL OR NOT EXISTS (
                      SELECT 1 FROM recovery_outcomes AS o
                      WHERE o.dispatch_id = c.dispatch_id
                        AND (o.xid, o.seq) > (v_unread_xid, v_unread_seq)))
            ORDER BY c.closed_at_ms, c.dispatch_id
            LIMIT p_limit
            FOR UPDATE OF e, c, d SKIP LOCKED) AS s;
    ELSE
        SELECT coalesce(array_agg(s.dispatch_id), ''{}'') INTO v_settled FROM (
            SELECT c.dispatch_id
            FROM approved_action_recovery_controls AS c
            JOIN approved_action_executions AS e USING (dispatch_id)
            JOIN approved_action_dispatches AS d USING (dispatch_id)
            WHERE c.dispatch_id = ANY (p_dispatch_ids)
              AND c.status = ''resolved'' AND c.closed_at_ms < r.cutoff_ms
              AND e.state = ANY (resolver_terminal_states()) AND e.finished_at_ms < r.cutoff_ms
              AND (r.past_consumers OR v_unread_xid IS NULL OR NOT EXISTS (
                      SELECT 1 FROM recovery_outcomes AS o
                      WHERE o.dispatch_id = c.dispatch_id
                        AND (o.xid, o.seq) > (v_unread_xid, v_unread_seq)))
            FOR UPDATE OF e, c, d SKIP LOCKED) AS s;
    END IF;

    -- Audit remnants (include-audit only): identity and resolution, or the links of its
    -- proposals'' rejects and withdrawals, left by an earlier prune. A resolution proves the
    -- dispatch was settled; no execution means nothing can run it.
    IF r.include_audit THEN
        SELECT coalesce(array_agg(s.dispatch_id), ''{}'') INTO v_remnants FROM (
            SELECT d.dispatch_id
            FROM approved_action_dispatches AS d
            WHERE d.dispatch_id = ANY (p_dispatch_ids)
              AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                              WHERE e.dispatch_id = d.dispatch_id)
              AND (EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS res
                           WHERE res.dispatch_id = d.dispatch_id
                             AND res.resolved_at_ms < r.cutoff_ms)
                   OR EXISTS (SELECT 1 FROM recovery_proposals AS p
                              JOIN recovery_audit_chain AS l
                                ON l.mutation_id = p.closed_mutation_id
                              WHERE p.dispatch_id = d.dispatch_id
                                AND p.closed_as IN (''rejected'', ''withdrawn'')
                                AND l.recorded_at_ms < r.cutoff_ms))
              AND (r.past_consumers OR v_unread_xid IS NULL OR NOT EXISTS (
                      SELECT 1 FROM recovery_outcomes AS o
                      WHERE o.dispatch_id = d.dispatch_id
                        AND (o.xid, o.seq) > (v_unread_xid, v_unread_seq)))
            FOR UPDATE OF d SKIP LOCKED) AS s;
    END IF;

    -- What stays findable of each dispatch this batch prunes, before its
    -- rows go: a remnant pruned again keeps the state and closure its first run recorded.
    INSERT INTO recovery_pruned_dispatches AS t (
        dispatch_id, idempotency_key_sha256, approval_request_id, project_id, action_type,
        created_at_ms, state, closed_by, run_id, pruned_at_ms)
    SELECT d.dispatch_id, encode(sha256(convert_to(d.idempotency_key, ''UTF8'')), ''hex''),
           d.approval_request_id, d.project_id, d.action_type, d.created_at_ms, e.state,
           c.closed_by, p_run_id, resolver_now_ms(NULL)
    FROM approved_action_dispatches AS d
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    WHERE d.dispatch_id = ANY (v_settled || v_remnants)
    ON CONFLICT (dispatch_id) DO UPDATE
    SET run_id = EXCLUDED.run_id,
        pruned_at_ms = EXCLUDED.pruned_at_ms,
        state = coalesce(EXCLUDED.state, t.state),
        closed_by = coalesce(EXCLUDED.closed_by, t.closed_by);
    -- The records'' own retention: one period after their prune, at most a batch''s worth.
    DELETE FROM recovery_pruned_dispatches AS t
    WHERE t.dispatch_id IN (SELECT o.dispatch_id FROM recovery_pruned_dispatches AS o
                            WHERE o.pruned_at_ms < r.cutoff_ms
                            ORDER BY o.pruned_at_ms, o.dispatch_id
                            LIMIT p_limit
                            FOR UPDATE SKIP LOCKED);

    -- The fact triggers let these deletes through because this function is on their call
    -- stack (resolver_reject_mutation); nothing a session sets opens them.
    DELETE FROM approved_action_recovery_controls WHERE dispatch_id = ANY (v_settled);
    DELETE FROM approved_action_executions WHERE dispatch_id = ANY (v_settled);
    DELETE FROM action_receipts WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    -- Each provider''s own evidence tables, as `resolver migrate` registered them from what the
    -- installed providers declare: their rows of these dispatches go too.
    FOR v_table IN
        SELECT t.table_name, t.dispatch_column FROM resolver_evidence_tables AS t
        ORDER BY t.table_name
    LOOP
        EXECUTE format(''DELETE FROM %I WHERE %I = ANY ($1)'',
                       v_table.table_name, v_table.dispatch_column)
            USING v_settled || v_remnants;
        GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    END LOOP;
    -- The outcome records go with the execution they report; those after the slowest
    -- consumer''s cursor (only a run past consumers takes them) are counted apart.
    WITH gone AS (
        DELETE FROM recovery_outcomes AS o WHERE o.dispatch_id = ANY (v_settled || v_remnants)
        RETURNING o.xid, o.seq
    )
    SELECT count(*),
           count(*) FILTER (WHERE v_unread_xid IS NOT NULL
                              AND (g.xid, g.seq) > (v_unread_xid, v_unread_seq))
    INTO v_outcomes, v_outcomes_unread
    FROM gone AS g;

    -- Identity rows go when nothing audits them (no decision, and no reject or withdraw of
    -- a proposal: closed by the executor''s own completion) or when the audit facts go too; a
    -- dispatch a newer one supersedes keeps its identity. Its proposals go with it (ON DELETE
    -- CASCADE), so a kept identity keeps the facts its links are rebuilt from.
    SELECT coalesce(array_agg(d.dispatch_id), ''{}'') INTO v_rows
    FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = ANY (v_settled || v_remnants)
      AND (r.include_audit
           OR (NOT EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS res
                           WHERE res.dispatch_id = d.dispatch_id)
               AND NOT EXISTS (SELECT 1 FROM recovery_proposals AS p
                               JOIN recovery_audit_chain AS l
                                 ON l.mutation_id = p.closed_mutation_id
                               WHERE p.dispatch_id = d.dispatch_id
                                 AND p.closed_as IN (''rejected'', ''withdrawn''))))
      AND NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS n
                      WHERE n.supersedes_dispatch_id = d.dispatch_id);
    SELECT coalesce(array_agg(d.dispatch_id), ''{}'') INTO v_audit
    FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = ANY (v_rows)
      AND (EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS res
                   WHERE res.dispatch_id = d.dispatch_id)
           OR EXISTS (SELECT 1 FROM recovery_proposals AS p
                      JOIN recovery_audit_chain AS l ON l.mutation_id = p.closed_mutation_id
                      WHERE p.dispatch_id = d.dispatch_id
                        AND p.closed_as IN (''rejected'', ''withdrawn'')));

    DELETE FROM recovery_authorizations AS a
    USING approved_action_recovery_resolutions AS res
    WHERE a.mutation_id = res.mutation_id AND res.dispatch_id = ANY (v_audit);
    -- Their audit links go with them (the decision''s, and those of its proposals'' rejects and
    -- withdrawals): the export carries each link, so `resolver audit verify --export` still
    -- walks the whole chain. The run records the range of links it removed: a link is
    -- accepted as pruned only inside the range of the run whose export carries it.
    WITH decisions AS (
        DELETE FROM recovery_audit_chain AS l
        USING approved_action_recovery_resolutions AS res
        WHERE l.mutation_id = res.mutation_id AND res.dispatch_id = ANY (v_audit)
        RETURNING l.seq
    ),
    closes AS (
        DELETE FROM recovery_audit_chain AS l
        USING recovery_proposals AS p
        WHERE l.mutation_id = p.closed_mutation_id AND p.dispatch_id = ANY (v_audit)
          AND p.closed_as IN (''rejected'', ''withdrawn'')
        RETURNING l.seq
    )
    SELECT min(seq), max(seq) INTO v_first_seq, v_last_seq
    FROM (SELECT seq FROM decisions UNION ALL SELECT seq FROM closes) AS removed;
    -- Late evidence and its watch go by ON DELETE CASCADE from the resolution.
    DELETE FROM approved_action_recovery_resolutions WHERE dispatch_id = ANY (v_audit);
    DELETE FROM approved_action_dispatches WHERE dispatch_id = ANY (v_rows);

    dispatches := cardinality(v_settled);
    audit := cardinality(v_audit);
    evidence := v_evidence;
    remnants := cardinality(ARRAY(SELECT unnest(v_remnants) INTERSECT SELECT unnest(v_rows)));
    outcomes := v_outcomes;
    outcomes_unread := v_outcomes_unread;
    UPDATE recovery_prune_runs
    SET batches = batches + 1,
        outcomes_pruned = outcomes_pruned + v_outcomes,
        outcomes_unread = recovery_prune_runs.outcomes_unread + v_outcomes_unread,
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

CREATE OR REPLACE FUNCTION resolver_prune_finish(p_run_id bigint)
RETURNS TABLE (dispatches_pruned bigint, audit_pruned bigint, evidence_pruned bigint)
LANGUAGE sql SECURITY DEFINER AS $$
    UPDATE recovery_prune_runs
    SET finished_at_ms = resolver_now_ms(NULL)
    WHERE run_id = p_run_id AND finished_at_ms IS NULL
    RETURNING dispatches_pruned, audit_pruned, evidence_pruned
$$;

-- What a run would take, for --dry-run and the export: one JSON document per dispatch with
-- its identity, terminal state, resolution and authorization (no evidence, no secrets).
-- `authorization` is the deciding person''s fact; `authorizations` every
-- person''s, two for a two-person decision, so the export still holds one line per dispatch.
CREATE OR REPLACE FUNCTION resolver_prune_candidates(
    p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer,
    p_past_consumers boolean DEFAULT false)
RETURNS TABLE (dispatch_id text, audited boolean, record jsonb)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    WITH unread AS (
        -- The slowest registered consumer''s cursor, unless the run goes past consumers.
        SELECT c.cursor_xid AS xid, c.cursor_position AS seq
        FROM recovery_outcome_consumers AS c
        WHERE NOT coalesce(p_past_consumers, false)
        ORDER BY c.cursor_xid, c.cursor_position
        LIMIT 1
    ),
    ids AS (
        (SELECT c.dispatch_id
         FROM approved_action_recovery_controls AS c
         JOIN approved_action_executions AS e USING (dispatch_id)
         WHERE c.dispatch_id > p_after
           AND c.status = ''resolved'' AND c.closed_at_ms < p_cutoff_ms
           AND e.state = ANY (resolver_terminal_states()) AND e.finished_at_ms < p_cutoff_ms
           AND NOT EXISTS (SELECT 1 FROM recovery_outcomes AS o, unread AS u
                           WHERE o.dispatch_id = c.dispatch_id AND (o.xid, o.seq) > (u.xid, u.seq))
         ORDER BY c.dispatch_id
         LIMIT least(p_limit, 10000))
        UNION ALL
        (SELECT res.dispatch_id
         FROM approved_action_recovery_resolutions AS res
         WHERE p_include_audit AND res.dispatch_id > p_after
           AND res.resolved_at_ms < p_cutoff_ms
           AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                           WHERE e.dispatch_id = res.dispatch_id)
           AND NOT EXISTS (SELECT 1 FROM recovery_outcomes AS o, unread AS u
                           WHERE o.dispatch_id = res.dispatch_id AND (o.xid, o.seq) > (u.xid, u.seq))
         ORDER BY res.dispatch_id
         LIMIT least(p_limit, 10000))
        UNION ALL
        -- Identities kept only by the links of their proposals'' rejects and withdrawals.
        (SELECT DISTINCT p.dispatch_id
         FROM recovery_proposals AS p
         JOIN recovery_audit_chain AS l ON l.mutation_id = p.closed_mutation_id
         WHERE p_include_audit AND p.dispatch_id > p_after
           AND p.closed_as IN (''rejected'', ''withdrawn'')
           AND l.recorded_at_ms < p_cutoff_ms
           AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                           WHERE e.dispatch_id = p.dispatch_id)
           AND NOT EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS res
                           WHERE res.dispatch_id = p.dispatch_id)
           AND NOT EXISTS (SELECT 1 FROM recovery_outcomes AS o, unread AS u
                           WHERE o.dispatch_id = p.dispatch_id AND (o.xid, o.seq) > (u.xid, u.seq))
         ORDER BY p.dispatch_id
         LIMIT least(p_limit, 10000))
    ),
    page AS (SELECT i.dispatch_id FROM ids AS i ORDER BY i.dispatch_id
             LIMIT least(p_limit, 10000))
    SELECT d.dispatch_id, res.dispatch_id IS NOT NULL OR cl.links IS NOT NULL,
           jsonb_build_object(
               ''v'', 1,
               ''dispatch'', to_jsonb(d),
               ''execution'', CASE WHEN e.dispatch_id IS NOT NULL THEN jsonb_build_object(
                   ''state'', e.state, ''attempt'', e.attempt, ''version'', e.version,
                   ''started_at_ms'', e.started_at_ms, ''finished_at_ms'', e.finished_at_ms,
                   ''result_code'', e.result_code,
                   ''completion_mutation_id'', e.completion_mutation_id,
                   ''evidence_digest'', e.evidence_digest,
                   ''closed_by'', c.closed_by, ''closed_at_ms'', c.closed_at_ms) END,
               ''resolution'', to_jsonb(res),
               ''authorization'', (SELECT to_jsonb(a) FROM recovery_authorizations AS a
                                 WHERE a.mutation_id = res.mutation_id
                                   AND a.user_id = res.actor_user_id),
               ''authorizations'', (SELECT jsonb_agg(to_jsonb(a) ORDER BY a.user_id)
                                  FROM recovery_authorizations AS a
                                  WHERE a.mutation_id = res.mutation_id),
               -- Migration 0015: the decision''s audit link, so a pruned range of the chain
               -- stays verifiable from the export, and the late evidence beside it.
               ''audit_link'', (SELECT jsonb_build_object(
                                  ''seq'', l.seq, ''mutation_id'', l.mutation_id,
                                  ''dispatch_id'', l.dispatch_id, ''content'', l.content,
                                  ''prev_hash'', l.prev_hash, ''hash'', l.hash,
                                  ''recorded_at_ms'', l.recorded_at_ms)
                              FROM recovery_audit_chain AS l
                              WHERE l.mutation_id = res.mutation_id),
               ''late_evidence'', (SELECT to_jsonb(le) FROM recovery_late_evidence AS le
                                 WHERE le.dispatch_id = res.dispatch_id))
           -- The links of its proposals'' rejects and withdrawals, in chain order, so the
           -- pruned range stays verifiable from the export (only when there are any: a
           -- record without keeps its former shape).
           || CASE WHEN cl.links IS NULL THEN ''{}''::jsonb
                   ELSE jsonb_build_object(''close_links'', cl.links) END
    FROM page AS p
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_resolutions AS res ON res.dispatch_id = d.dispatch_id
    CROSS JOIN LATERAL (
        SELECT jsonb_agg(jsonb_build_object(
                   ''seq'', l.seq, ''mutation_id'', l.mutation_id, ''dispatch_id'', l.dispatch_id,
                   ''content'', l.content, ''prev_hash'', l.prev_hash, ''hash'', l.hash,
                   ''recorded_at_ms'', l.recorded_at_ms) ORDER BY l.seq) AS links
        FROM recovery_proposals AS pr
        JOIN recovery_audit_chain AS l ON l.mutation_id = pr.closed_mutation_id
        WHERE pr.dispatch_id = d.dispatch_id
          AND pr.closed_as IN (''rejected'', ''withdrawn'')) AS cl
    ORDER BY d.dispatch_id
$$;

-- Every registered outcome consumer, its cursor, when it last saved, and how many settled
-- dispatches older than the cut-off it holds back: those with an outcome record after its
-- cursor (what `resolver prune` reports, and what a run past consumers takes unread).
CREATE OR REPLACE FUNCTION resolver_prune_consumers(p_cutoff_ms bigint)
RETURNS TABLE (consumer text, cursor text, saved_at_ms bigint, holding bigint)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT c.consumer, c.cursor_xid::text || '':'' || c.cursor_position::text, c.saved_at_ms,
           (SELECT count(DISTINCT o.dispatch_id)
            FROM recovery_outcomes AS o
            JOIN approved_action_executions AS e USING (dispatch_id)
            JOIN approved_action_recovery_controls AS k USING (dispatch_id)
            WHERE (o.xid, o.seq) > (c.cursor_xid, c.cursor_position)
              AND k.status = ''resolved'' AND k.closed_at_ms < p_cutoff_ms
              AND e.state = ANY (resolver_terminal_states())
              AND e.finished_at_ms < p_cutoff_ms)
    FROM recovery_outcome_consumers AS c
    ORDER BY c.cursor_xid, c.cursor_position, c.consumer
$$;

-- Executable by PUBLIC by default; resolver/db/grants.sql grants what each role may run.
REVOKE EXECUTE ON FUNCTION
    resolver_refuse_settled_lease(),
    resolver_prune_candidates(bigint, boolean, text, integer, boolean),
    resolver_prune_consumers(bigint),
    resolver_prune_finish(bigint),
    resolver_prune_batch(bigint, integer, text[]),
    resolver_prune_begin(bigint, boolean, text, text, boolean)
FROM PUBLIC;

-- A definer function resolves names through a pinned path, the migrated schema first and
-- pg_temp last, so no caller can shadow a table or a function with an object of its own.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        ''resolver_refuse_settled_lease()'',
        ''resolver_prune_candidates(bigint, boolean, text, integer, boolean)'',
        ''resolver_prune_consumers(bigint)'',
        ''resolver_prune_finish(bigint)'',
        ''resolver_prune_batch(bigint, integer, text[])'',
        ''resolver_prune_begin(bigint, boolean, text, text, boolean)''
    ] LOOP
        EXECUTE format(''ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp'',
                       fn, current_schema());
    END LOOP;
END
$$;

-- The three commits, siblings (escalation and the bounded finding statistics in the automatic
-- one, the audit chain in the manual one). Each settles a dispatch (terminal execution, closed
-- control, a resolution where one is due) in one statement under the same lock order
-- (execution row, then control row, then inserts) and the same fences:
--   1. resolver_commit_automatic: the resolver''s fenced page commit of verified evidence
--      (and the re-arming or hand-over of the rest), one statement, one round trip.
--   2. resolver_commit_manual: a human decision, with its authorization fact.
--   3. resolver_execution_complete: the executor''s own completion (the executor protocol).
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

-- The one routing rule: the status a finding sends its control to. Verified evidence resolves
-- it, a conflict or an unsupported action goes to a human, anything else is re-armed for a
-- retry. The automatic commit applies it and answers it (the replica reports what the
-- database decided; it does not decide again).
CREATE OR REPLACE FUNCTION resolver_finding_status(p_finding text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN resolver_finding_outcome(p_finding) IS NOT NULL THEN ''resolved''
        WHEN p_finding IN (''conflict'', ''unsupported'') THEN ''manual''
        ELSE ''armed''
    END
$$;

-- The automatic commit''s second try at rows its SKIP LOCKED pass skipped: each waits at most
-- 50 ms for any one of those rows, in key order, and answers the ones it locked; a row still
-- held after that (an operator''s open transaction, say) makes it answer none of them, and its
-- locks go with its subtransaction. A deadlock cannot outlive the bound either (lock_timeout
-- fires before deadlock_timeout). Only called when a row was skipped, so a page that skipped
-- nothing pays no subtransaction.
CREATE OR REPLACE FUNCTION resolver_commit_wait_executions(p_ids text[])
RETURNS text[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    locked text[] := ''{}'';
    saved text := current_setting(''lock_timeout'');
BEGIN
    BEGIN
        PERFORM set_config(''lock_timeout'', ''50ms'', true);
        SELECT coalesce(array_agg(e.dispatch_id), ''{}'') INTO locked
        FROM (SELECT e.dispatch_id FROM approved_action_executions AS e
              WHERE e.dispatch_id = ANY(p_ids)
              ORDER BY e.dispatch_id
              FOR UPDATE) AS e;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        locked := ''{}'';
    END;
    PERFORM set_config(''lock_timeout'', saved, true);
    RETURN locked;
END
$$;

CREATE OR REPLACE FUNCTION resolver_commit_wait_controls(p_ids text[])
RETURNS text[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    locked text[] := ''{}'';
    saved text := current_setting(''lock_timeout'');
BEGIN
    BEGIN
        PERFORM set_config(''lock_timeout'', ''50ms'', true);
        SELECT coalesce(array_agg(c.dispatch_id), ''{}'') INTO locked
        FROM (SELECT c.dispatch_id FROM approved_action_recovery_controls AS c
              WHERE c.dispatch_id = ANY(p_ids)
              ORDER BY c.dispatch_id
              FOR UPDATE) AS c;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        locked := ''{}'';
    END;
    PERFORM set_config(''lock_timeout'', saved, true);
    RETURN locked;
END
$$;

-- 1. The automatic commit of one claimed page (see queries.sql, commit_automatic).
-- SECURITY DEFINER: the replicas hold no write privilege on executions or
-- resolutions, so this fenced commit is their only way to settle a dispatch; it records no
-- human decision (a manual resolution needs resolver_commit_manual on the call stack).
CREATE OR REPLACE FUNCTION resolver_commit_automatic(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, status text, manual_reason text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    ids text[];
    verified_ids text[];
    locked_executions text[];
    locked_controls text[];
    now_ms bigint;
BEGIN
    SELECT array_agg(i.dispatch_id ORDER BY i.dispatch_id),
           array_agg(i.dispatch_id ORDER BY i.dispatch_id)
               FILTER (WHERE resolver_finding_status(i.finding) = ''resolved'')
    INTO ids, verified_ids
    FROM json_to_recordset(p_items) AS i(dispatch_id text, finding text);
    -- Lock order, the same for every writer: executions (of verified items), then every
    -- control of the page, each in key order; then the fenced writes. SKIP LOCKED: a row
    -- another transaction holds (an operator''s open SELECT ... FOR UPDATE, an executor''s
    -- completion in flight) leaves its item out of this commit, as a lost fence; it is
    -- claimed again once its recovery lease lapses. The rest of the page commits at once
    -- instead of waiting (and failing whole on lock_timeout) behind one held row.
    SELECT coalesce(array_agg(e.dispatch_id), ''{}'') INTO locked_executions
    FROM (SELECT e.dispatch_id FROM approved_action_executions AS e
          WHERE e.dispatch_id = ANY(coalesce(verified_ids, ''{}''))
          ORDER BY e.dispatch_id
          FOR UPDATE SKIP LOCKED) AS e;
    -- A row skipped above is most often held for an instant only: a concurrent claim whose
    -- snapshot still saw it due found it claimed since, locked its new version to recheck it
    -- and, the recheck failing, holds that lock to the end of its statement. Left out, the
    -- item would wait a whole recovery lease; so the skipped rows are waited for, briefly
    --, and only what is still held after that is left out.
    IF cardinality(locked_executions) < cardinality(verified_ids) THEN
        locked_executions := locked_executions || resolver_commit_wait_executions(
            ARRAY(SELECT v FROM unnest(verified_ids) AS v
                  WHERE v <> ALL(locked_executions) ORDER BY v));
    END IF;
    SELECT coalesce(array_agg(c.dispatch_id), ''{}'') INTO locked_controls
    FROM (SELECT c.dispatch_id FROM approved_action_recovery_controls AS c
          WHERE c.dispatch_id = ANY(ids)
          ORDER BY c.dispatch_id
          FOR UPDATE SKIP LOCKED) AS c;
    IF cardinality(locked_controls) < cardinality(ids) THEN
        locked_controls := locked_controls || resolver_commit_wait_controls(
            ARRAY(SELECT v FROM unnest(ids) AS v WHERE v <> ALL(locked_controls) ORDER BY v));
    END IF;
    -- The database clock once the rows are ours: an execution lease is judged expired at
    -- the moment of the write, not before a lock wait.
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- With the rows locked (an item whose rows another transaction holds is left out),
    -- `fenced` is exactly the set whose recovery lease, open control,
    -- execution version and expired execution lease still hold; every write below applies
    -- to that set only, so each dispatch commits all-or-nothing and a stale item writes
    -- nothing. The answer: each fenced dispatch id and the status its control took.
    RETURN QUERY
    WITH item AS (
        -- Every key of an item is one column (the replica writes them).
        SELECT * FROM json_to_recordset(p_items) AS i(
            dispatch_id text, recovery_token uuid, recovery_version bigint,
            execution_version bigint, finding text, result_code text, evidence_digest text,
            mutation_id text, delay_ms bigint, failure text, escalate_after_ms bigint,
            reason text)
    ),
    fenced AS (
        SELECT i.*,
               CASE
                   -- Escalation, when evidence is missing: a finding that
                   -- would re-arm goes to a human once its action type''s window, counted from
                   -- the case''s first inspection, has elapsed. From the first inspection, not
                   -- from when this kind began, so alternating findings never restart it.
                   WHEN resolver_finding_status(i.finding) = ''armed''
                        AND i.escalate_after_ms IS NOT NULL
                        AND now_ms - coalesce(c.first_inspected_at_ms, now_ms)
                            >= i.escalate_after_ms
                   THEN ''manual''
                   ELSE resolver_finding_status(i.finding)
               END AS status
        FROM item AS i
        JOIN approved_action_recovery_controls AS c
          ON i.dispatch_id = ANY(locked_controls)
         AND (resolver_finding_status(i.finding) <> ''resolved''
              OR i.dispatch_id = ANY(locked_executions))
         AND c.dispatch_id = i.dispatch_id AND c.status = ''armed''
         AND c.recovery_token = i.recovery_token AND c.recovery_version = i.recovery_version
         AND c.execution_version = i.execution_version
        JOIN approved_action_executions AS e
          ON e.dispatch_id = i.dispatch_id AND e.state = ''executing''
         AND e.version = i.execution_version
         -- Defence in depth: the version fence already excludes a renewed execution; this
         -- one holds even if a writer extended a lease without bumping the version.
         AND e.lease_expires_at_ms <= now_ms
    ),
    routed AS (
        -- Why a control goes to a person, decided here once: its finding needs one
        -- (`conflict`, `unsupported`), or a finding that would re-arm outlasted its window
        -- (an escalation). The answer carries it, so no replica re-derives the routing.
        SELECT f.*,
               CASE WHEN f.status <> ''manual'' THEN NULL
                    WHEN resolver_finding_status(f.finding) = ''manual'' THEN f.finding
                    ELSE ''evidence_window_elapsed'' END AS manual_reason
        FROM fenced AS f
    ),
    terminal AS (
        UPDATE approved_action_executions AS e
        SET state = resolver_finding_outcome(f.finding),
            version = e.version + 1,
            finished_at_ms = now_ms,
            result_code = f.result_code,
            evidence_digest = f.evidence_digest
        FROM routed AS f
        WHERE e.dispatch_id = f.dispatch_id AND f.status = ''resolved''
    ),
    control AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = f.status,
            execution_version = c.execution_version
                                + CASE WHEN f.status = ''resolved'' THEN 1 ELSE 0 END,
            closed_by = CASE WHEN f.status = ''resolved'' THEN ''automatic'' END,
            closed_at_ms = CASE WHEN f.status = ''resolved'' THEN now_ms END,
            manual_at_ms = CASE WHEN f.status = ''manual'' THEN now_ms END,
            manual_reason = f.manual_reason,
            last_finding = f.finding,
            finding_count = c.finding_count + 1,
            -- Bounded statistics: at most one key per finding kind, two times, two codes.
            finding_counts = c.finding_counts || jsonb_build_object(
                f.finding, coalesce((c.finding_counts ->> f.finding)::bigint, 0) + 1),
            first_inspected_at_ms = coalesce(c.first_inspected_at_ms, now_ms),
            last_inspected_at_ms = now_ms,
            last_failure_class = coalesce(f.failure, c.last_failure_class),
            -- Why the evidence says what it says: the provider''s bounded
            -- reason code of this inspection (`unknown_kid`, `http_404`), counted like the
            -- findings; at most 16 distinct codes are kept by name, the rest as `other`.
            last_reason = f.reason,
            reason_counts = CASE
                WHEN f.reason IS NULL THEN c.reason_counts
                WHEN c.reason_counts ? f.reason
                     OR (SELECT count(*) FROM jsonb_object_keys(c.reason_counts)) < 16
                THEN c.reason_counts || jsonb_build_object(
                    f.reason, coalesce((c.reason_counts ->> f.reason)::bigint, 0) + 1)
                ELSE c.reason_counts || jsonb_build_object(
                    ''other'', coalesce((c.reason_counts ->> ''other'')::bigint, 0) + 1)
            END,
            last_evidence_digest = coalesce(f.evidence_digest, c.last_evidence_digest),
            next_scan_at_ms = CASE WHEN f.status = ''armed'' THEN now_ms + f.delay_ms
                                   ELSE c.next_scan_at_ms END,
            -- When it escalates if the evidence stays as it is: the window
            -- counts from the first inspection, like the escalation above.
            escalates_at_ms = CASE WHEN f.status = ''armed'' AND f.escalate_after_ms IS NOT NULL
                                   THEN coalesce(c.first_inspected_at_ms, now_ms)
                                        + f.escalate_after_ms END,
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM routed AS f
        WHERE c.dispatch_id = f.dispatch_id
    ),
    resolution AS (
        INSERT INTO approved_action_recovery_resolutions (
            dispatch_id, mutation_id, source, outcome, finding, evidence_digest, result_code,
            expected_execution_version, resolved_at_ms)
        SELECT f.dispatch_id, f.mutation_id, ''automatic'',
               resolver_finding_outcome(f.finding),
               f.finding, f.evidence_digest, f.result_code, f.execution_version, now_ms
        FROM routed AS f
        WHERE f.status = ''resolved''
    )
    SELECT f.dispatch_id, f.status, f.manual_reason FROM routed AS f;
END
$$;

-- 2. The manual commit: a person''s signed act on a case (decide alone, propose the first of
-- two decisions, confirm the second) with its authorization fact, and for a decision the
-- resolution and the terminal state, in one transaction. Fenced on the grant and its
-- project/role-binding versions (locked FOR SHARE so a concurrent revocation waits or wins),
-- authentication no older than the policy''s bound on the database clock, the expected
-- execution version, the execution being recovery_required (lease expired on the database
-- clock) and its control still open. No row: a fence held and nothing applied (the caller
-- explains why).
--
-- SECURITY DEFINER, like the automatic commit: the API''s role holds no write privilege on what
-- a decision records, and this function is the only writer of human decisions (a trigger on
-- each fact table looks for it on the call stack). Each person''s fact arrives signed by the API
-- (resolver.human.signing) over the act it names (`p_act`), the request''s mutation id, the
-- proposal it confirms, the decision and execution version, the person, the token''s issuer and
-- key id, and when the API verified the token (`p_verified_at_ms`, the database clock as the
-- API read it). The database cannot check an Ed25519 signature; it checks everything else the
-- fact claims, and `resolver audit verify --public-keys` checks the signature:
--   - once only: a mutation id or a signature already recorded is refused (RS007), and so is a
--     fact the API verified further than the policy''s clock leeway from now (RS007);
--   - the act is this function''s and the case''s: `decide` where one person settles it,
--     `propose` where a two-person rule applies and no proposal is open, `confirm` of exactly
--     the open proposal, by someone else, on the same decision. Anything else is refused
--     (RS008): a propose fact used as a confirm, a confirm of a proposal that is not open
--     (withdrawn, rejected, expired, confirmed), a reject or withdraw fact;
--   - the bounds are the policy writer''s (recovery_decision_policy): a caller may pass a
--     tighter p_max_auth_age_ms or p_proposal_ttl_ms, a looser one is refused (RS005).
-- Answers ''committed'', ''proposed'', ''voided'' (the proposer lost the permission: the proposal is
-- void) or ''proposal_limit''. Strong authentication is checked here too (resolver_strong_amr),
-- whatever the caller checked before.
CREATE OR REPLACE FUNCTION resolver_commit_manual(
    p_dispatch_id text, p_mutation_id text, p_act text, p_proposal_id bigint, p_outcome text,
    p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint,
    p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint,
    p_auth_time_ms bigint, p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text,
    p_signature text, p_verified_at_ms bigint, p_max_auth_age_ms bigint DEFAULT NULL,
    p_proposal_ttl_ms bigint DEFAULT NULL, p_now_ms bigint DEFAULT NULL,
    p_tamper_acknowledged boolean DEFAULT false, p_tampering_reasons text[] DEFAULT ''{}''
)
RETURNS TABLE (dispatch_id text, version bigint, result text, proposal_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    v_version bigint;
    v_action_type text;
    v_id bigint;
    bounds record;
    prop recovery_proposals%ROWTYPE;
BEGIN
    IF p_act IS NULL OR p_act NOT IN (''decide'', ''propose'', ''confirm'') THEN
        RAISE EXCEPTION ''resolver_commit_manual records a decide, propose or confirm fact, not %'',
            coalesce(quote_literal(p_act), ''NULL'') USING ERRCODE = ''RS008'';
    END IF;
    IF (p_act = ''confirm'') <> (p_proposal_id IS NOT NULL) THEN
        RAISE EXCEPTION ''p_proposal_id names the proposal a confirm fact confirms, and only then''
            USING ERRCODE = ''RS005'';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION ''p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]''
            USING ERRCODE = ''RS005'';
    END IF;
    PERFORM resolver_fact_shape(p_amr, p_issuer, p_token_kid, p_signing_kid, p_signature,
                                p_verified_at_ms);
    SELECT * INTO bounds FROM resolver_act_bounds(p_max_auth_age_ms, p_proposal_ttl_ms);
    PERFORM resolver_fact_unused(p_mutation_id, p_signature);
    PERFORM 1
    FROM recovery_role_bindings AS b
    JOIN recovery_projects AS p USING (project_id)
    WHERE b.project_id = p_project_id AND b.user_id = p_user_id
      AND b.permission = ''approval.recover''
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
      AND e.version = p_expected_execution_version AND e.state = ''executing''
    FOR UPDATE OF e;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    PERFORM resolver_fact_fresh(p_verified_at_ms, now_ms, bounds.clock_leeway_ms);
    IF NOT (p_auth_time_ms >= now_ms - bounds.max_auth_age_ms
            AND p_auth_time_ms <= now_ms + bounds.clock_leeway_ms)
       OR NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                      WHERE e.dispatch_id = p_dispatch_id AND e.lease_expires_at_ms <= now_ms)
       OR NOT EXISTS (SELECT 1 FROM approved_action_recovery_controls AS oc
                      WHERE oc.dispatch_id = p_dispatch_id AND oc.status <> ''resolved'') THEN
        RETURN;
    END IF;
    SELECT * INTO prop FROM recovery_proposals AS rp
    WHERE rp.dispatch_id = p_dispatch_id AND rp.closed_as IS NULL
    FOR UPDATE;
    IF prop.proposal_id IS NOT NULL AND prop.expires_at_ms <= now_ms THEN
        UPDATE recovery_proposals AS rp SET closed_as = ''expired'', closed_at_ms = now_ms
        WHERE rp.proposal_id = prop.proposal_id;
        prop := NULL;
    END IF;
    -- Possibly forged evidence is never confirmed as succeeded without the decision''s own
    -- acknowledgement (the caller names the reasons that suggest tampering: the providers
    -- declare them). The control is read under a lock, after the execution''s (the lock
    -- order), so no inspection changes the evidence between this check and the commit.
    IF p_outcome = ''succeeded'' AND NOT coalesce(p_tamper_acknowledged, false) AND EXISTS (
           SELECT 1 FROM approved_action_recovery_controls AS tc
           WHERE tc.dispatch_id = p_dispatch_id AND tc.last_finding = ''conflict''
             AND tc.last_reason = ANY (coalesce(p_tampering_reasons, ''{}''))
           FOR SHARE) THEN
        RETURN QUERY SELECT p_dispatch_id, v_version, ''tamper_unacknowledged''::text, NULL::bigint;
        RETURN;
    END IF;
    IF prop.proposal_id IS NULL THEN
        IF p_act = ''confirm'' THEN
            RAISE EXCEPTION ''proposal % is not open on dispatch %: nothing to confirm'',
                p_proposal_id, quote_literal(p_dispatch_id) USING ERRCODE = ''RS008'';
        END IF;
        IF NOT resolver_needs_two_people(v_action_type, p_outcome) THEN
            IF p_act <> ''decide'' THEN
                RAISE EXCEPTION ''one person decides this case: a decide fact, not %'', p_act
                    USING ERRCODE = ''RS008'';
            END IF;
            RETURN QUERY
            SELECT s.dispatch_id, s.version, ''committed''::text, NULL::bigint
            FROM resolver_settle_manual(
                p_dispatch_id, p_mutation_id, p_outcome, p_evidence_digest, p_reason_code,
                p_expected_execution_version, p_user_id, now_ms,
                json_build_array(json_build_object(
                    ''user_id'', p_user_id, ''project_id'', p_project_id,
                    ''project_version'', p_project_version,
                    ''role_binding_version'', p_role_binding_version,
                    ''auth_time_ms'', p_auth_time_ms, ''amr'', p_amr, ''authorized_at_ms'', now_ms,
                    ''issuer'', p_issuer, ''token_kid'', p_token_kid,
                    ''signing_kid'', p_signing_kid, ''signature'', p_signature,
                    ''act'', ''decide'', ''act_mutation_id'', p_mutation_id,
                    ''verified_at_ms'', p_verified_at_ms)))
                AS s;
            RETURN;
        END IF;
        IF p_act <> ''propose'' THEN
            RAISE EXCEPTION ''this decision needs two people: its first fact is a propose fact, not %'',
                p_act USING ERRCODE = ''RS008'';
        END IF;
        -- Bounded: a case that needed 16 proposals needs a conversation, not a 17th.
        IF (SELECT count(*) FROM recovery_proposals AS rp
            WHERE rp.dispatch_id = p_dispatch_id) >= 16 THEN
            RETURN QUERY SELECT p_dispatch_id, v_version, ''proposal_limit''::text, NULL::bigint;
            RETURN;
        END IF;
        INSERT INTO recovery_proposals AS rp (
            dispatch_id, mutation_id, outcome, expected_execution_version, reason_code,
            evidence_digest, proposed_by, project_id, project_version, role_binding_version,
            auth_time_ms, amr, proposed_at_ms, expires_at_ms, issuer, token_kid, signing_kid,
            signature, verified_at_ms)
        VALUES (p_dispatch_id, p_mutation_id, p_outcome, p_expected_execution_version,
                p_reason_code, p_evidence_digest, p_user_id, p_project_id, p_project_version,
                p_role_binding_version, p_auth_time_ms, p_amr, now_ms,
                now_ms + bounds.proposal_ttl_ms, p_issuer, p_token_kid, p_signing_kid,
                p_signature, p_verified_at_ms)
        RETURNING rp.proposal_id INTO v_id;
        RETURN QUERY SELECT p_dispatch_id, v_version, ''proposed''::text, v_id;
        RETURN;
    END IF;
    -- A proposal is open: only its confirmation by a second person is an act here (ending it
    -- otherwise is resolver_proposal_close''s).
    IF p_act <> ''confirm'' OR p_proposal_id <> prop.proposal_id THEN
        RAISE EXCEPTION ''proposal % is open on dispatch %: only a confirm fact naming it is recorded here, not % of proposal %'',
            prop.proposal_id, quote_literal(p_dispatch_id), p_act,
            coalesce(p_proposal_id::text, ''none'') USING ERRCODE = ''RS008'';
    END IF;
    IF prop.proposed_by = p_user_id THEN
        RAISE EXCEPTION ''the proposer of proposal % cannot confirm it: a second person does'',
            prop.proposal_id USING ERRCODE = ''RS008'';
    END IF;
    IF prop.outcome <> p_outcome OR prop.evidence_digest IS DISTINCT FROM p_evidence_digest
       OR prop.expected_execution_version <> v_version THEN
        RAISE EXCEPTION ''the confirm fact names another decision than proposal %'',
            prop.proposal_id USING ERRCODE = ''RS008'';
    END IF;
    IF prop.verified_at_ms IS NULL THEN
        RAISE EXCEPTION ''proposal %''''s fact names no act: propose again'', prop.proposal_id
            USING ERRCODE = ''RS008'';
    END IF;
    -- The proposer must still hold the permission it proposed with.
    PERFORM 1
    FROM recovery_role_bindings AS b
    JOIN recovery_projects AS p USING (project_id)
    WHERE b.project_id = prop.project_id AND b.user_id = prop.proposed_by
      AND b.permission = ''approval.recover''
      AND b.version = prop.role_binding_version AND p.version = prop.project_version
    FOR SHARE OF b, p;
    IF NOT FOUND THEN
        UPDATE recovery_proposals AS rp
        SET closed_as = ''voided'', closed_at_ms = now_ms, close_reason_code = ''grant_changed''
        WHERE rp.proposal_id = prop.proposal_id;
        RETURN QUERY SELECT p_dispatch_id, v_version, ''voided''::text, prop.proposal_id;
        RETURN;
    END IF;
    -- Confirmed: closed before the settle, whose version bump would otherwise void it.
    UPDATE recovery_proposals AS rp
    SET closed_as = ''confirmed'', closed_at_ms = now_ms, closed_by = p_user_id,
        closed_mutation_id = p_mutation_id, close_reason_code = p_reason_code,
        closed_auth_time_ms = p_auth_time_ms, closed_amr = p_amr
    WHERE rp.proposal_id = prop.proposal_id;
    RETURN QUERY
    SELECT s.dispatch_id, s.version, ''committed''::text, prop.proposal_id
    FROM resolver_settle_manual(
        p_dispatch_id, p_mutation_id, p_outcome, p_evidence_digest, prop.reason_code,
        p_expected_execution_version, prop.proposed_by, now_ms,
        json_build_array(
            json_build_object(
                ''user_id'', prop.proposed_by, ''project_id'', prop.project_id,
                ''project_version'', prop.project_version,
                ''role_binding_version'', prop.role_binding_version,
                ''auth_time_ms'', prop.auth_time_ms, ''amr'', prop.amr,
                ''authorized_at_ms'', prop.proposed_at_ms, ''issuer'', prop.issuer,
                ''token_kid'', prop.token_kid, ''signing_kid'', prop.signing_kid,
                ''signature'', prop.signature, ''act'', ''propose'',
                ''act_mutation_id'', prop.mutation_id, ''verified_at_ms'', prop.verified_at_ms),
            json_build_object(
                ''user_id'', p_user_id, ''project_id'', p_project_id,
                ''project_version'', p_project_version,
                ''role_binding_version'', p_role_binding_version,
                ''auth_time_ms'', p_auth_time_ms, ''amr'', p_amr, ''authorized_at_ms'', now_ms,
                ''issuer'', p_issuer, ''token_kid'', p_token_kid, ''signing_kid'', p_signing_kid,
                ''signature'', p_signature, ''act'', ''confirm'', ''act_mutation_id'', p_mutation_id,
                ''proposal_id'', prop.proposal_id, ''verified_at_ms'', p_verified_at_ms)))
        AS s;
END
$$;

-- The settling write of a manual decision whose fences resolver_commit_manual checked (the
-- execution row locked): terminal state, closed control, resolution, one authorization fact
-- per person in `p_authorizations`, in one statement; then the decision''s audit link, built
-- from what that statement stored (resolver_audit_decision, what `resolver audit verify`
-- rebuilds it with).
CREATE OR REPLACE FUNCTION resolver_settle_manual(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text,
    p_reason_code text, p_expected_execution_version bigint, p_actor_user_id text,
    p_now_ms bigint, p_authorizations json
)
RETURNS TABLE (dispatch_id text, version bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    WITH settled AS (
        UPDATE approved_action_executions AS e
        SET state = p_outcome,
            version = e.version + 1,
            finished_at_ms = p_now_ms,
            evidence_digest = p_evidence_digest
        WHERE e.dispatch_id = p_dispatch_id AND e.version = p_expected_execution_version
          AND e.state = ''executing''
        RETURNING e.dispatch_id, e.version, e.finished_at_ms
    ),
    closed AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = ''resolved'',
            closed_by = ''manual'',
            closed_at_ms = s.finished_at_ms,
            execution_version = s.version,
            -- manual_at_ms stays: when the case reached the queue is part of its history
            --; the queue itself reads open (status ''manual'') controls only.
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM settled AS s
        WHERE c.dispatch_id = s.dispatch_id AND c.status <> ''resolved''
        RETURNING c.dispatch_id
    ),
    resolution AS (
        -- `finding` of a manual resolution: the finding it overrode (the control''s last one,
        -- read from the statement''s snapshot, before `closed`).
        INSERT INTO approved_action_recovery_resolutions (
            dispatch_id, mutation_id, source, outcome, finding, evidence_digest,
            expected_execution_version, actor_user_id, reason_code, resolved_at_ms)
        SELECT s.dispatch_id, p_mutation_id, ''manual'', p_outcome,
               (SELECT oc.last_finding FROM approved_action_recovery_controls AS oc
                WHERE oc.dispatch_id = s.dispatch_id),
               p_evidence_digest, p_expected_execution_version, p_actor_user_id, p_reason_code,
               s.finished_at_ms
        FROM settled AS s
        RETURNING mutation_id
    ),
    authorization_fact AS (
        INSERT INTO recovery_authorizations (
            mutation_id, user_id, permission, project_id, project_version,
            role_binding_version, auth_time_ms, amr, authorized_at_ms, issuer, token_kid,
            signing_kid, signature, act, act_mutation_id, proposal_id, verified_at_ms)
        SELECT r.mutation_id, a.user_id, ''approval.recover'', a.project_id, a.project_version,
               a.role_binding_version, a.auth_time_ms, a.amr, a.authorized_at_ms, a.issuer,
               a.token_kid, a.signing_kid, a.signature, a.act, a.act_mutation_id,
               a.proposal_id, a.verified_at_ms
        FROM resolution AS r,
             json_to_recordset(p_authorizations) AS a(
                 user_id text, project_id text, project_version bigint,
                 role_binding_version bigint, auth_time_ms bigint, amr text[],
                 authorized_at_ms bigint, issuer text, token_kid text, signing_kid text,
                 signature text, act text, act_mutation_id text, proposal_id bigint,
                 verified_at_ms bigint)
    )
    SELECT s.dispatch_id, s.version INTO dispatch_id, version FROM settled AS s;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The audit chain: the decision''s canonical content, read back from what the statement
    -- above stored, linked after the chain''s head.
    PERFORM resolver_audit_append(p_mutation_id, p_dispatch_id,
                                  resolver_audit_decision(p_mutation_id), p_now_ms);
    RETURN NEXT;
END
$$;

-- A person ends an open proposal without a decision: its proposer withdraws it
-- (p_act ''withdraw''), someone else with the permission rejects it (''reject''). An act like a
-- decision: fenced alike (grant FOR SHARE, fresh authentication within the policy''s bound; the
-- execution row is locked first, as by the commit), signed over the act, its mutation id and
-- the proposal it ends, consumed once (RS007 for a mutation id or signature already recorded,
-- or a fact verified outside the clock leeway), and a link of the audit chain carrying the
-- proposer''s fact and the closer''s. Refused (RS008): another act, a proposal that is not the
-- open one (already withdrawn, rejected, expired or confirmed), a withdraw by anyone but the
-- proposer, a reject by the proposer. Answers ''withdrawn'', ''rejected'', or ''stale_auth'' (the
-- authentication is older than the bound); no row: the grant fence failed. SECURITY DEFINER:
-- the API''s role holds no write privilege on proposals or the chain.
CREATE OR REPLACE FUNCTION resolver_proposal_close(
    p_dispatch_id text, p_mutation_id text, p_act text, p_proposal_id bigint,
    p_reason_code text, p_user_id text, p_project_id text, p_project_version bigint,
    p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_issuer text,
    p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint,
    p_max_auth_age_ms bigint DEFAULT NULL, p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (dispatch_id text, result text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    v_closed_as text;
    bounds record;
    prop recovery_proposals%ROWTYPE;
BEGIN
    IF p_act IS NULL OR p_act NOT IN (''withdraw'', ''reject'') THEN
        RAISE EXCEPTION ''resolver_proposal_close records a reject or withdraw fact, not %'',
            coalesce(quote_literal(p_act), ''NULL'') USING ERRCODE = ''RS008'';
    END IF;
    IF p_proposal_id IS NULL THEN
        RAISE EXCEPTION ''p_proposal_id must name the proposal the fact ends''
            USING ERRCODE = ''RS005'';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION ''p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]''
            USING ERRCODE = ''RS005'';
    END IF;
    IF NOT coalesce(resolver_is_code(p_reason_code), false) THEN
        RAISE EXCEPTION ''p_reason_code must match [a-z0-9_.-]{1,64}'' USING ERRCODE = ''RS005'';
    END IF;
    PERFORM resolver_fact_shape(p_amr, p_issuer, p_token_kid, p_signing_kid, p_signature,
                                p_verified_at_ms);
    SELECT * INTO bounds FROM resolver_act_bounds(p_max_auth_age_ms, NULL);
    PERFORM resolver_fact_unused(p_mutation_id, p_signature);
    v_closed_as := CASE p_act WHEN ''withdraw'' THEN ''withdrawn'' ELSE ''rejected'' END;
    PERFORM 1
    FROM recovery_role_bindings AS b
    JOIN recovery_projects AS p USING (project_id)
    WHERE b.project_id = p_project_id AND b.user_id = p_user_id
      AND b.permission = ''approval.recover''
      AND b.version = p_role_binding_version AND p.version = p_project_version
    FOR SHARE OF b, p;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM 1 FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d ON d.dispatch_id = e.dispatch_id
    WHERE e.dispatch_id = p_dispatch_id AND d.project_id = p_project_id
    FOR UPDATE OF e;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    PERFORM resolver_fact_fresh(p_verified_at_ms, now_ms, bounds.clock_leeway_ms);
    dispatch_id := p_dispatch_id;
    IF NOT (p_auth_time_ms >= now_ms - bounds.max_auth_age_ms
            AND p_auth_time_ms <= now_ms + bounds.clock_leeway_ms) THEN
        result := ''stale_auth'';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT * INTO prop FROM recovery_proposals AS rp
    WHERE rp.dispatch_id = p_dispatch_id AND rp.project_id = p_project_id
      AND rp.closed_as IS NULL
    FOR UPDATE;
    IF prop.proposal_id IS NOT NULL AND prop.expires_at_ms <= now_ms THEN
        RAISE EXCEPTION ''proposal % expired: it is no longer open'', prop.proposal_id
            USING ERRCODE = ''RS008'';
    END IF;
    IF prop.proposal_id IS NULL OR prop.proposal_id <> p_proposal_id THEN
        RAISE EXCEPTION ''proposal % is not open on dispatch %'', p_proposal_id,
            quote_literal(p_dispatch_id) USING ERRCODE = ''RS008'';
    END IF;
    IF p_act = ''withdraw'' AND prop.proposed_by <> p_user_id THEN
        RAISE EXCEPTION ''only the proposer withdraws proposal %'', prop.proposal_id
            USING ERRCODE = ''RS008'';
    END IF;
    IF p_act = ''reject'' AND prop.proposed_by = p_user_id THEN
        RAISE EXCEPTION ''the proposer of proposal % withdraws it, never rejects it'',
            prop.proposal_id USING ERRCODE = ''RS008'';
    END IF;
    IF prop.verified_at_ms IS NULL THEN
        RAISE EXCEPTION ''proposal %''''s fact names no act'', prop.proposal_id
            USING ERRCODE = ''RS008'';
    END IF;
    UPDATE recovery_proposals AS rp
    SET closed_as = v_closed_as, closed_at_ms = now_ms, closed_by = p_user_id,
        closed_mutation_id = p_mutation_id, close_reason_code = p_reason_code,
        closed_auth_time_ms = p_auth_time_ms, closed_amr = p_amr,
        closed_project_version = p_project_version,
        closed_role_binding_version = p_role_binding_version, closed_issuer = p_issuer,
        closed_token_kid = p_token_kid, closed_signing_kid = p_signing_kid,
        closed_signature = p_signature, closed_verified_at_ms = p_verified_at_ms
    WHERE rp.proposal_id = prop.proposal_id;
    PERFORM resolver_audit_append(p_mutation_id, p_dispatch_id,
                                  resolver_audit_close(p_mutation_id), now_ms);
    result := v_closed_as;
    RETURN NEXT;
END
$$;

-- 3. The completion: terminal state fenced on the executor''s owner/token/version, the
-- control closed (closed_by ''completion'') in the same statement; an exact replay of a
-- completion, or of a resolution that won first, is answered ''replayed''.
CREATE OR REPLACE FUNCTION resolver_execution_complete(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_outcome text,
    p_result_code text, p_mutation_id text, p_evidence_digest text DEFAULT NULL,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, result text, state text, version bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    seen record;
BEGIN
    IF p_outcome IS NULL OR p_outcome NOT IN (''succeeded'', ''failed'') THEN
        RAISE EXCEPTION ''p_outcome must be succeeded or failed'' USING ERRCODE = ''RS005'';
    END IF;
    IF NOT coalesce(resolver_is_code(p_result_code), false) THEN
        RAISE EXCEPTION ''p_result_code must match [a-z0-9_.-]{1,64}'' USING ERRCODE = ''RS005'';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION ''p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]''
            USING ERRCODE = ''RS005'';
    END IF;
    IF p_evidence_digest IS NOT NULL AND NOT resolver_is_sha256_hex(p_evidence_digest) THEN
        RAISE EXCEPTION ''p_evidence_digest must be a lowercase hex sha256 or NULL''
            USING ERRCODE = ''RS005'';
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- Terminal state fenced on owner/token/version; a late completion is accepted as
    -- long as nobody replaced the fence (no resolution, no takeover).
    -- One statement: the control closes with the terminal state (the settled-closed
    -- trigger checks exactly that at the end of the statement).
    WITH completed AS (
        UPDATE approved_action_executions AS e
        SET state = p_outcome,
            version = e.version + 1,
            finished_at_ms = now_ms,
            result_code = p_result_code,
            completion_mutation_id = p_mutation_id,
            evidence_digest = p_evidence_digest
        WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
          AND e.version = p_version AND e.state = ''executing''
        RETURNING e.dispatch_id, e.state, e.version, e.finished_at_ms
    ),
    closed AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = ''resolved'',
            closed_by = ''completion'',
            closed_at_ms = d.finished_at_ms,
            completion_mutation_id = p_mutation_id,
            execution_version = d.version,
            -- manual_at_ms stays, as in the manual settle.
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM completed AS d
        WHERE c.dispatch_id = d.dispatch_id AND c.status <> ''resolved''
        RETURNING c.dispatch_id
    )
    SELECT d.dispatch_id, d.state, d.version INTO dispatch_id, state, version
    FROM completed AS d;
    IF FOUND THEN
        result := ''committed'';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT e.dispatch_id, e.state, e.version, e.result_code, e.completion_mutation_id,
           e.evidence_digest, r.source, r.evidence_digest AS resolution_digest
    INTO seen
    FROM approved_action_executions AS e
    LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
    WHERE e.dispatch_id = p_dispatch_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION ''dispatch % has no execution'', quote_literal(p_dispatch_id)
            USING ERRCODE = ''RS004'';
    END IF;
    -- Our own completion already landed: a replay repeats every semantic field. A
    -- resolution won first: only the same outcome on the same evidence is the same fact.
    IF seen.state = p_outcome AND (
           (seen.source IS NULL
            AND seen.completion_mutation_id IS NOT DISTINCT FROM p_mutation_id
            AND seen.result_code IS NOT DISTINCT FROM p_result_code
            AND seen.evidence_digest IS NOT DISTINCT FROM p_evidence_digest)
        OR (seen.source IS NOT NULL AND p_evidence_digest IS NOT NULL
            AND seen.resolution_digest = p_evidence_digest)) THEN
        dispatch_id := seen.dispatch_id;
        state := seen.state;
        version := seen.version;
        result := ''replayed'';
        RETURN NEXT;
        RETURN;
    END IF;
    IF seen.state = ANY (resolver_terminal_states()) THEN
        RAISE EXCEPTION ''dispatch % was already settled % by %; completion % (%) drifts from it'',
            quote_literal(p_dispatch_id), seen.state,
            CASE seen.source WHEN ''automatic'' THEN ''an automatic resolution''
                             WHEN ''manual'' THEN ''a manual resolution''
                             ELSE ''a completion'' END,
            quote_literal(p_mutation_id), p_outcome
            USING ERRCODE = ''RS001'';
    END IF;
    PERFORM resolver_protocol_refuse(
        ''complete'', p_dispatch_id, p_owner, p_token, p_version, now_ms);
END
$$;

-- Executable by PUBLIC by default; resolver/db/grants.sql grants the routing rule and the
-- automatic commit to the runtime role, the manual commit and the proposal close to the API
-- role, and the completion to the executor role; the settle, to nobody.
REVOKE EXECUTE ON FUNCTION
    resolver_finding_status(text),
    resolver_commit_wait_executions(text[]),
    resolver_commit_wait_controls(text[]),
    resolver_commit_automatic(json, bigint),
    resolver_commit_manual(text, text, text, bigint, text, text, text, bigint, text, text,
                           bigint, bigint, bigint, text[], text, text, text, text, bigint,
                           bigint, bigint, bigint, boolean, text[]),
    resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json),
    resolver_proposal_close(text, text, text, bigint, text, text, text, bigint, bigint, bigint,
                            text[], text, text, text, text, bigint, bigint, bigint),
    resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint)
FROM PUBLIC;

-- Tables resolve in the migrated schema, whatever the caller''s search_path (pg_temp last: a
-- caller''s temporary table can never shadow one).
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        ''resolver_commit_automatic(json, bigint)'',
        ''resolver_commit_wait_executions(text[])'',
        ''resolver_commit_wait_controls(text[])'',
        ''resolver_commit_manual(text, text, text, bigint, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint, bigint, boolean, text[])'',
        ''resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json)'',
        ''resolver_proposal_close(text, text, text, bigint, text, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint)'',
        ''resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint)''
    ] LOOP
        EXECUTE format(''ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp'',
                       fn, current_schema());
    END LOOP;
END
$$;

-- The outcome feed: one record per settled outcome, appended in the transaction that settles
-- it, read in order with a cursor by the runtime that owns the run (docs/outcomes.md). Its
-- tables are in resolver/db/schema/tables/10_outcome_feed.sql.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.
--
-- Ordering without gaps. A record''s place in the feed is (xid, seq): the id of the
-- transaction that wrote it (pg_current_xact_id(), assigned before the transaction commits)
-- and a sequence number. A plain sequence is not enough: transaction A takes seq 7,
-- transaction B takes 8 and commits first; a reader that saw 8 and moved its cursor past it
-- would never see 7. So a reader returns only records whose transaction id is below the
-- oldest transaction id still running in its snapshot (pg_snapshot_xmin): every transaction
-- below that horizon has ended, so nothing can still commit below a cursor the reader hands
-- out. A transaction that is running (or starts later) has an id at or above the horizon, so
-- its records sort after every cursor handed out so far. The cost: a record waits until every
-- transaction that started before it ended (an idle-in-transaction session holds the feed
-- back; its lag is the age of the oldest transaction). Transaction ids go on across a
-- failover (the standby replays them), so a cursor stays valid on the new primary.

-- Wakes the feed''s listeners at COMMIT: NOTIFY resolver_outcomes, the payload the notifying
-- transaction''s id. PostgreSQL folds identical notifications of one transaction into one, so a
-- transaction that appends many records notifies once. The id tells a listener what to wait
-- for: those records are readable once the horizon has passed it, and a transaction that took
-- its id earlier and still runs holds them back past this commit (nobody notifies when it
-- ends, so a listener woken too early polls until the horizon passes the id).
--
-- A notifying commit takes one lock for the whole cluster and holds it through its commit
-- record''s flush, so notifying commits flush one after another (docs/performance.md measures
-- it). So a commit notifies only while a listener is registered (resolver_outcome_listen):
-- with none, executors completing at once flush together. The check runs after this
-- transaction took its id, so a listener that registers too late to be seen here took its
-- horizon afterwards and reads these records anyway (docs/outcomes.md). The database''s (or a
-- role''s) setting `resolver.outcomes_notify = off` leaves the NOTIFY out even then.
CREATE OR REPLACE FUNCTION resolver_outcomes_notify() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF coalesce(current_setting(''resolver.outcomes_notify'', true), '''') <> ''off''
       AND EXISTS (SELECT 1 FROM recovery_outcome_listeners AS l
                   WHERE l.listening_until_ms > resolver_now_ms(NULL)) THEN
        PERFORM pg_notify(''resolver_outcomes'', pg_current_xact_id()::text);
    END IF;
END
$$;

-- Registers the calling session as a listener of the feed''s channel, or renews it, until the
-- answer (ms on the database clock). Call it after `LISTEN resolver_outcomes`, then read the
-- next transaction id (pg_snapshot_xmax(pg_current_snapshot())) in a statement of its own and
-- read the feed until its horizon passes that id: a commit that checked for listeners before
-- this registration committed did not notify. A registration lasts a minute: renew it well
-- within (both SDKs every 20 s), and after a renewal that came late, catch up the same way; a
-- listener whose process died stops being notified a minute later. Lapsed ones are removed.
CREATE OR REPLACE FUNCTION resolver_outcome_listen() RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
DECLARE
    now_ms bigint := resolver_now_ms(NULL);
    until_ms bigint := now_ms + 60000;
BEGIN
    DELETE FROM recovery_outcome_listeners AS l
    WHERE l.listening_until_ms <= now_ms AND l.pid <> pg_backend_pid();
    INSERT INTO recovery_outcome_listeners AS l (pid, listening_until_ms)
    VALUES (pg_backend_pid(), until_ms)
    ON CONFLICT (pid) DO UPDATE SET listening_until_ms = EXCLUDED.listening_until_ms;
    RETURN until_ms;
END
$$;

-- Ends the calling session''s registration (before UNLISTEN, or before a pooled connection goes
-- back to its pool). Answers whether it was registered.
CREATE OR REPLACE FUNCTION resolver_outcome_unlisten() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
BEGIN
    DELETE FROM recovery_outcome_listeners AS l WHERE l.pid = pg_backend_pid();
    RETURN FOUND;
END
$$;

-- Appends, one trigger per kind of transition, each in the statement that makes it. AFTER
-- and per statement for the executions and the late evidence: a page commit of 64 settled
-- items appends with one INSERT, and the resolution and authorization facts its own statement
-- inserts (the automatic and manual commits are one statement each) are visible here.
--
-- settled: an execution reached succeeded, failed or blocked. Terminal rows never change
-- again (the state machine refuses it), so every terminal row of a statement''s new rows has
-- just become terminal. Who settled it: no resolution, the executor''s own completion; an
-- automatic resolution, the resolver with its finding; a manual one, the person(s) whose
-- authorization facts it carries.
CREATE OR REPLACE FUNCTION resolver_outcomes_append_settled() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    -- Most updates settle nothing (every start barrier, every renewal): they read the
    -- transition table once and leave, where an INSERT of no rows would still open the feed''s
    -- indexes and fire its statement trigger.
    IF NOT EXISTS (SELECT 1 FROM settled AS n WHERE n.state = ANY (resolver_terminal_states())) THEN
        RETURN NULL;
    END IF;
    INSERT INTO recovery_outcomes (
        kind, dispatch_id, approval_request_id, project_id, action_type, state, settled_by,
        finding, result_code, evidence_digest, mutation_id, reason_code, actors,
        occurred_at_ms)
    SELECT ''settled'', n.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           n.state,
           CASE r.source WHEN ''automatic'' THEN ''resolver'' WHEN ''manual'' THEN ''person''
                ELSE ''executor'' END,
           r.finding, coalesce(n.result_code, r.result_code), n.evidence_digest,
           coalesce(r.mutation_id, n.completion_mutation_id), r.reason_code,
           CASE WHEN r.source = ''manual'' THEN
               ARRAY(SELECT a.user_id FROM recovery_authorizations AS a
                     WHERE a.mutation_id = r.mutation_id ORDER BY a.user_id) END,
           n.finished_at_ms
    FROM settled AS n
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
    WHERE n.state = ANY (resolver_terminal_states())
    ORDER BY n.dispatch_id;
    IF FOUND THEN
        PERFORM resolver_outcomes_notify();
    END IF;
    RETURN NULL;
END
$$;

-- contradicted: a verified late finding that disagrees with a person''s decision. The terminal
-- state stays what the person decided; the record says what the evidence says.
CREATE OR REPLACE FUNCTION resolver_outcomes_append_contradicted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO recovery_outcomes (
        kind, dispatch_id, approval_request_id, project_id, action_type, state, settled_by,
        finding, result_code, evidence_digest, mutation_id, occurred_at_ms)
    SELECT ''contradicted'', l.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           e.state, ''resolver'', l.finding, l.result_code, l.evidence_digest,
           l.decision_mutation_id, l.observed_at_ms
    FROM observed AS l
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE NOT l.agrees
    ORDER BY l.dispatch_id;
    IF FOUND THEN
        PERFORM resolver_outcomes_notify();
    END IF;
    RETURN NULL;
END
$$;

-- superseded: a new dispatch names this one as the action it does again. The record carries
-- the old dispatch''s state at that moment (`pending` when it was never leased,
-- `recovery_required` read as everywhere else) and the new dispatch''s id.
CREATE OR REPLACE FUNCTION resolver_outcomes_append_superseded() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO recovery_outcomes (
        kind, dispatch_id, approval_request_id, project_id, action_type, state,
        superseded_by, occurred_at_ms)
    SELECT ''superseded'', d.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           resolver_effective_state(e.state, e.lease_expires_at_ms, NEW.created_at_ms),
           NEW.dispatch_id, NEW.created_at_ms
    FROM approved_action_dispatches AS d
    LEFT JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE d.dispatch_id = NEW.supersedes_dispatch_id;
    PERFORM resolver_outcomes_notify();
    RETURN NULL;
END
$$;

-- The state a runtime reads: `pending` before the first lease, `recovery_required` for an
-- executing execution whose lease has expired (never stored), the stored state otherwise.
CREATE OR REPLACE FUNCTION resolver_effective_state(p_state text, p_lease_expires_at_ms bigint,
                                         p_now_ms bigint)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_state IS NULL THEN ''pending''
                WHEN p_state = ''executing'' AND p_lease_expires_at_ms <= p_now_ms
                THEN ''recovery_required''
                ELSE p_state END
$$;

-- Only the appends write the feed. Each is a trigger of a settling statement, so its INSERT
-- fires this guard one trigger level deeper than any statement written by hand, the table
-- owner''s included; no role but the owner holds INSERT at all. Getting past it takes a trigger
-- of one''s own on another table, which is DDL, as disabling this guard is. Not the call-stack
-- check of resolver_guard_definer_write: a single completion appends with a statement of its
-- own, and reading the stack cost it more than the append itself (docs/performance.md).
CREATE OR REPLACE FUNCTION resolver_outcomes_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_trigger_depth() < 2 THEN
        IF NOT resolver_importing_history(TG_RELID) THEN
            RAISE EXCEPTION ''INSERT of recovery_outcomes only through the outcome appends''
                USING ERRCODE = ''insufficient_privilege'';
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- The projects the calling login may read through the feed, its status and its history: NULL
-- for every project, else those recovery_outcome_reader_scopes lists for any role the login is
-- a member of (an empty array when none is listed). Only a login in resolver_outcome_reader is
-- scoped, and not when it is also an executor (whose role reads every execution anyway) or a
-- superuser. session_user, not current_user: inside the SECURITY DEFINER reads current_user is
-- their owner. Behind a pooler the server login is the client''s (PgBouncer''s default).
CREATE OR REPLACE FUNCTION resolver_outcome_scope() RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF to_regrole(''resolver_outcome_reader'') IS NULL
       OR NOT pg_has_role(session_user, ''resolver_outcome_reader'', ''MEMBER'') THEN
        RETURN NULL;
    END IF;
    IF (SELECT r.rolsuper FROM pg_roles AS r WHERE r.rolname = session_user) THEN
        RETURN NULL;
    END IF;
    IF to_regrole(''resolver_executor'') IS NOT NULL
       AND pg_has_role(session_user, ''resolver_executor'', ''MEMBER'') THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY(
        SELECT DISTINCT s.project_id FROM recovery_outcome_reader_scopes AS s
        WHERE CASE WHEN to_regrole(s.role_name) IS NULL THEN false
                   ELSE pg_has_role(session_user, s.role_name, ''MEMBER'') END
        ORDER BY 1);
END
$$;

-- A cursor is `xid:seq`, as the reads below hand it out; '''' or NULL is the beginning.
CREATE OR REPLACE FUNCTION resolver_outcome_cursor_parse(p_cursor text, OUT xid xid8, OUT seq bigint)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_cursor IS NULL OR p_cursor = '''' THEN
        xid := ''0''::xid8;
        seq := 0;
        RETURN;
    END IF;
    IF p_cursor !~ ''^[0-9]{1,20}:[0-9]{1,19}$'' THEN
        RAISE EXCEPTION ''cursor must be xid:seq as the feed handed it out''
            USING ERRCODE = ''RS005'';
    END IF;
    xid := split_part(p_cursor, '':'', 1)::xid8;
    seq := split_part(p_cursor, '':'', 2)::bigint;
END
$$;

-- Records after a cursor, in feed order, below the horizon (see the top of this file). At
-- most p_limit (1-1000); p_project_id narrows to one project, and a scoped reader sees only its
-- projects'' records (resolver_outcome_scope).
CREATE OR REPLACE FUNCTION resolver_outcomes_after(
    p_cursor text DEFAULT NULL, p_limit integer DEFAULT 100, p_project_id text DEFAULT NULL)
RETURNS TABLE (
    cursor text, kind text, dispatch_id text, approval_request_id text, project_id text,
    action_type text, state text, settled_by text, finding text, result_code text,
    evidence_digest text, mutation_id text, reason_code text, actors text[],
    superseded_by text, occurred_at_ms bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    after_xid xid8;
    after_position bigint;
    scope text[] := resolver_outcome_scope();
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION ''p_limit must be 1-1000'' USING ERRCODE = ''RS005'';
    END IF;
    SELECT c.xid, c.seq INTO after_xid, after_position
    FROM resolver_outcome_cursor_parse(p_cursor) AS c;
    RETURN QUERY
    SELECT o.xid::text || '':'' || o.seq::text, o.kind::text, o.dispatch_id,
           o.approval_request_id, o.project_id, o.action_type, o.state, o.settled_by::text,
           o.finding, o.result_code, o.evidence_digest, o.mutation_id, o.reason_code,
           o.actors, o.superseded_by, o.occurred_at_ms
    FROM recovery_outcomes AS o
    WHERE (o.xid, o.seq) > (after_xid, after_position)
      AND o.xid < pg_snapshot_xmin(pg_current_snapshot())
      AND (p_project_id IS NULL OR o.project_id = p_project_id)
      AND (scope IS NULL OR o.project_id = ANY (scope))
    ORDER BY o.xid, o.seq
    LIMIT p_limit;
END
$$;

-- The cursor of "now": everything already settled lies before it, everything still to come
-- after it. A consumer that wants only new outcomes starts here.
CREATE OR REPLACE FUNCTION resolver_outcome_cursor_now() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text || '':0''
$$;

-- A registered consumer''s stored cursor (NULL: not registered).
CREATE OR REPLACE FUNCTION resolver_outcome_consumer_cursor(p_consumer text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT c.cursor_xid::text || '':'' || c.cursor_position::text
    FROM recovery_outcome_consumers AS c WHERE c.consumer = p_consumer
$$;

-- Saves a consumer''s cursor after it handled what it read (registers it on first save). A
-- cursor never moves back: saving an older one keeps the stored one, so a slow duplicate of a
-- consumer cannot undo a faster one''s progress. Answers the cursor now stored.
CREATE OR REPLACE FUNCTION resolver_outcome_consumer_save(p_consumer text, p_cursor text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
DECLARE
    at_xid xid8;
    at_position bigint;
    now_ms bigint := resolver_now_ms(NULL);
    stored text;
BEGIN
    IF NOT coalesce(resolver_is_id(p_consumer), false) THEN
        RAISE EXCEPTION ''p_consumer must be 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric''
            USING ERRCODE = ''RS005'';
    END IF;
    SELECT c.xid, c.seq INTO at_xid, at_position
    FROM resolver_outcome_cursor_parse(p_cursor) AS c;
    INSERT INTO recovery_outcome_consumers AS t (
        consumer, cursor_xid, cursor_position, registered_at_ms, saved_at_ms)
    VALUES (p_consumer, at_xid, at_position, now_ms, now_ms)
    ON CONFLICT (consumer) DO UPDATE
    SET (cursor_xid, cursor_position, saved_at_ms) =
        (SELECT g.x, g.p, now_ms
         FROM (SELECT EXCLUDED.cursor_xid AS x, EXCLUDED.cursor_position AS p
               WHERE (EXCLUDED.cursor_xid, EXCLUDED.cursor_position)
                     > (t.cursor_xid, t.cursor_position)
               UNION ALL
               SELECT t.cursor_xid, t.cursor_position
               WHERE (EXCLUDED.cursor_xid, EXCLUDED.cursor_position)
                     <= (t.cursor_xid, t.cursor_position)) AS g)
    RETURNING t.cursor_xid::text || '':'' || t.cursor_position::text INTO stored;
    RETURN stored;
END
$$;

-- Unregisters a consumer: retention no longer waits for it. True when it was registered.
CREATE OR REPLACE FUNCTION resolver_outcome_consumer_drop(p_consumer text) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER AS $$
    WITH gone AS (DELETE FROM recovery_outcome_consumers AS c
                  WHERE c.consumer = p_consumer RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM gone)
$$;

-- One dispatch as a runtime sees it: its identity, the state it is in now (effective, on the
-- database clock), what settled it, and the newest dispatch that supersedes it. No row: no such
-- dispatch (or, for a scoped reader, none in its projects).
CREATE OR REPLACE FUNCTION resolver_dispatch_status(p_dispatch_id text)
RETURNS TABLE (
    dispatch_id text, approval_request_id text, project_id text, action_type text,
    idempotency_key text, supersedes_dispatch_id text, superseded_by text, state text,
    attempt integer, lease_expires_at_ms bigint, started_at_ms bigint, finished_at_ms bigint,
    result_code text, evidence_digest text, settled_by text, finding text,
    reason_code text, actors text[], control_status text, created_at_ms bigint,
    db_now_ms bigint)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    WITH now AS (SELECT resolver_now_ms(NULL) AS ms, resolver_outcome_scope() AS scope)
    SELECT d.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           d.idempotency_key, d.supersedes_dispatch_id,
           (SELECT s.dispatch_id FROM approved_action_dispatches AS s
            WHERE s.supersedes_dispatch_id = d.dispatch_id
            ORDER BY s.created_at_ms DESC, s.dispatch_id DESC LIMIT 1),
           resolver_effective_state(e.state, e.lease_expires_at_ms, now.ms),
           e.attempt, e.lease_expires_at_ms, e.started_at_ms, e.finished_at_ms,
           coalesce(e.result_code, r.result_code), e.evidence_digest,
           CASE WHEN e.state <> ALL (resolver_terminal_states()) THEN NULL
                WHEN r.source = ''automatic'' THEN ''resolver''
                WHEN r.source = ''manual'' THEN ''person''
                ELSE ''executor'' END,
           r.finding, r.reason_code,
           CASE WHEN r.source = ''manual'' THEN
               ARRAY(SELECT a.user_id FROM recovery_authorizations AS a
                     WHERE a.mutation_id = r.mutation_id ORDER BY a.user_id) END,
           c.status, d.created_at_ms, now.ms
    FROM approved_action_dispatches AS d
    CROSS JOIN now
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_resolutions AS r ON r.dispatch_id = d.dispatch_id
    WHERE d.dispatch_id = p_dispatch_id
      AND (now.scope IS NULL OR d.project_id = ANY (now.scope))
$$;

-- One dispatch''s history, oldest first: created, started (the barrier), then its feed records
-- (settled, contradicted, superseded), each with its cursor. Times are the database clock''s.
-- Empty for a scoped reader when the dispatch is not in its projects.
CREATE OR REPLACE FUNCTION resolver_dispatch_history(p_dispatch_id text)
RETURNS TABLE (
    cursor text, kind text, state text, settled_by text, finding text, result_code text,
    reason_code text, actors text[], superseded_by text, attempt integer,
    occurred_at_ms bigint)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT h.cursor, h.kind, h.state, h.settled_by, h.finding, h.result_code, h.reason_code,
           h.actors, h.superseded_by, h.attempt, h.occurred_at_ms
    FROM (
        SELECT NULL::text AS cursor, ''created'' AS kind, ''pending'' AS state,
               NULL::text AS settled_by, NULL::text AS finding, NULL::text AS result_code,
               NULL::text AS reason_code, NULL::text[] AS actors, NULL::text AS superseded_by,
               NULL::integer AS attempt, d.created_at_ms AS occurred_at_ms,
               0 AS rank, NULL::xid8 AS xid, 0::bigint AS seq
        FROM approved_action_dispatches AS d WHERE d.dispatch_id = p_dispatch_id
        UNION ALL
        SELECT NULL, ''started'', ''executing'', NULL, NULL, NULL, NULL, NULL, NULL, e.attempt,
               e.started_at_ms, 1, NULL, 0
        FROM approved_action_executions AS e
        WHERE e.dispatch_id = p_dispatch_id AND e.started_at_ms IS NOT NULL
        UNION ALL
        SELECT o.xid::text || '':'' || o.seq::text, o.kind, o.state, o.settled_by,
               o.finding, o.result_code, o.reason_code, o.actors, o.superseded_by, NULL,
               o.occurred_at_ms, 2, o.xid, o.seq
        FROM recovery_outcomes AS o WHERE o.dispatch_id = p_dispatch_id
    ) AS h
    CROSS JOIN (SELECT resolver_outcome_scope() AS scope) AS r
    WHERE r.scope IS NULL OR EXISTS (
        SELECT 1 FROM approved_action_dispatches AS d
        WHERE d.dispatch_id = p_dispatch_id AND d.project_id = ANY (r.scope))
    ORDER BY h.rank, h.xid, h.seq
$$;

-- Executable by PUBLIC by default: nobody may call the appends (they run as triggers) or the
-- helpers (they run inside the definers, as the owner); resolver/db/grants.sql grants the
-- reads and the consumer cursors to the roles that follow the feed.
REVOKE EXECUTE ON FUNCTION
    resolver_outcomes_notify(),
    resolver_outcomes_guard(),
    resolver_outcomes_append_settled(),
    resolver_outcomes_append_contradicted(),
    resolver_outcomes_append_superseded(),
    resolver_effective_state(text, bigint, bigint),
    resolver_outcome_scope(),
    resolver_outcome_cursor_parse(text),
    resolver_outcomes_after(text, integer, text),
    resolver_outcome_cursor_now(),
    resolver_outcome_consumer_cursor(text),
    resolver_outcome_consumer_save(text, text),
    resolver_outcome_listen(),
    resolver_outcome_unlisten(),
    resolver_outcome_consumer_drop(text),
    resolver_dispatch_status(text),
    resolver_dispatch_history(text)
FROM PUBLIC;

-- A definer function resolves names through a pinned path, the migrated schema first and
-- pg_temp last, so no caller can shadow a table or a function with an object of its own.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        ''resolver_outcomes_append_settled()'',
        ''resolver_outcomes_append_contradicted()'',
        ''resolver_outcomes_append_superseded()'',
        ''resolver_outcome_scope()'',
        ''resolver_outcome_cursor_parse(text)'',
        ''resolver_outcomes_after(text, integer, text)'',
        ''resolver_outcome_cursor_now()'',
        ''resolver_outcome_consumer_cursor(text)'',
        ''resolver_outcome_consumer_save(text, text)'',
        ''resolver_outcome_consumer_drop(text)'',
        ''resolver_outcome_listen()'',
        ''resolver_outcome_unlisten()'',
        ''resolver_dispatch_status(text)'',
        ''resolver_dispatch_history(text)''
    ] LOOP
        EXECUTE format(''ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp'',
                       fn, current_schema());
    END LOOP;
END
$$;

CREATE TRIGGER approved_action_dispatches_immutable
    BEFORE UPDATE OR DELETE ON approved_action_dispatches
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER approved_action_recovery_resolutions_immutable
    BEFORE UPDATE OR DELETE ON approved_action_recovery_resolutions
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER recovery_authorizations_immutable
    BEFORE UPDATE OR DELETE ON recovery_authorizations
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER approved_action_recovery_resolutions_definer_write
    AFTER INSERT ON approved_action_recovery_resolutions
    FOR EACH STATEMENT
    EXECUTE FUNCTION resolver_guard_definer_write(''resolver_commit_automatic'', ''resolver_commit_manual'');

CREATE TRIGGER recovery_authorizations_definer_write
    AFTER INSERT ON recovery_authorizations
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write(''resolver_commit_manual'');

-- Internal receipts are insert-only. Providers'' own tables get their triggers from the
-- provider''s definitions (resolver/db/provider_schemas.py).
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

CREATE TRIGGER action_receipts_immutable
    BEFORE UPDATE OR DELETE ON action_receipts
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

-- The state machine, enforced for every writer (the table owner included). Each WHEN holds
-- exactly when a rule is broken, so an allowed write never calls a function. AFTER, not
-- BEFORE: a BEFORE ROW UPDATE trigger makes PostgreSQL lock (and WAL-log the lock of) every
-- old row before it can even evaluate WHEN; an AFTER row trigger''s WHEN is evaluated when the
-- event would be queued, at no extra cost, and its error aborts the statement alike.
CREATE TRIGGER approved_action_executions_state_machine
    AFTER UPDATE ON approved_action_executions FOR EACH ROW WHEN (
    OLD.state = ANY (resolver_terminal_states())
    OR NEW.dispatch_id <> OLD.dispatch_id
    OR NOT (NEW.state = OLD.state
            OR (OLD.state = ''leased'' AND NEW.state = ''executing'')
            OR (OLD.state = ''executing'' AND NEW.state = ANY (resolver_terminal_states())))
    OR NEW.version < OLD.version
    OR NEW.attempt < OLD.attempt
    OR (NEW.version = OLD.version
        AND (NEW.lease_expires_at_ms > OLD.lease_expires_at_ms OR NEW.state <> OLD.state
             OR NEW.owner <> OLD.owner OR NEW.token <> OLD.token))
    OR (OLD.started_at_ms IS NOT NULL AND NEW.started_at_ms IS DISTINCT FROM OLD.started_at_ms)
) EXECUTE FUNCTION resolver_guard_execution();

CREATE TRIGGER approved_action_recovery_controls_state_machine
    AFTER UPDATE ON approved_action_recovery_controls FOR EACH ROW WHEN (
    OLD.status = ''resolved''
    OR NEW.dispatch_id <> OLD.dispatch_id
    OR NEW.execution_version < OLD.execution_version
    OR NEW.recovery_version < OLD.recovery_version
    OR (NEW.recovery_version = OLD.recovery_version
        AND (NEW.recovery_token IS DISTINCT FROM OLD.recovery_token
             OR NEW.recovery_lease_expires_at_ms > OLD.recovery_lease_expires_at_ms))
) EXECUTE FUNCTION resolver_guard_control();

CREATE CONSTRAINT TRIGGER approved_action_executions_control_in_step
    AFTER UPDATE OF version ON approved_action_executions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.version <> OLD.version AND NEW.state <> ALL (resolver_terminal_states()))
    EXECUTE FUNCTION resolver_check_control_in_step();

CREATE TRIGGER approved_action_executions_settled_closed
    AFTER UPDATE ON approved_action_executions REFERENCING NEW TABLE AS settled
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_check_settled_closed();

CREATE CONSTRAINT TRIGGER approved_action_recovery_controls_armed_in_step
    AFTER INSERT ON approved_action_recovery_controls
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.status <> ''resolved'')
    EXECUTE FUNCTION resolver_check_control_in_step();

CREATE CONSTRAINT TRIGGER approved_action_recovery_controls_in_step
    AFTER UPDATE OF execution_version ON approved_action_recovery_controls
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.status <> ''resolved'' AND NEW.execution_version <> OLD.execution_version)
    EXECUTE FUNCTION resolver_check_control_in_step();

CREATE CONSTRAINT TRIGGER action_receipts_live_lease
    AFTER INSERT ON action_receipts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION resolver_check_receipt_lease();

CREATE TRIGGER approved_action_executions_born_leased
    AFTER INSERT ON approved_action_executions FOR EACH ROW WHEN (
    NEW.state <> ''leased'' OR NEW.version <> 1 OR NEW.attempt <> 1
    OR NEW.started_at_ms IS NOT NULL OR NEW.finished_at_ms IS NOT NULL
    OR NEW.result_code IS NOT NULL OR NEW.completion_mutation_id IS NOT NULL
    OR NEW.evidence_digest IS NOT NULL
) EXECUTE FUNCTION resolver_guard_insert();

CREATE TRIGGER approved_action_recovery_controls_born_armed
    AFTER INSERT ON approved_action_recovery_controls FOR EACH ROW WHEN (
    NEW.status <> ''armed'' OR NEW.recovery_token IS NOT NULL OR NEW.closed_by IS NOT NULL
) EXECUTE FUNCTION resolver_guard_insert();

-- The human decision: the audit chain over manual decisions, two people, the guards that let
-- only the decision functions write what a decision records.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

CREATE TRIGGER recovery_audit_chain_immutable BEFORE UPDATE OR DELETE ON recovery_audit_chain
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER recovery_audit_chain_definer_write AFTER INSERT ON recovery_audit_chain
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write(
        ''resolver_commit_manual'', ''resolver_proposal_close'');

-- Only a person''s act (a decision, a reject, a withdraw) moves the head (after the one row
-- above exists).
CREATE TRIGGER recovery_audit_head_definer_write AFTER INSERT OR UPDATE ON recovery_audit_head
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write(
        ''resolver_commit_manual'', ''resolver_proposal_close'');

CREATE TRIGGER recovery_proposals_close_once BEFORE UPDATE ON recovery_proposals
    FOR EACH ROW EXECUTE FUNCTION resolver_proposal_close_once();

CREATE TRIGGER recovery_proposals_definer_write AFTER INSERT OR UPDATE ON recovery_proposals
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write(
        ''resolver_commit_manual'', ''resolver_proposal_close'', ''resolver_proposals_void'');

CREATE TRIGGER approved_action_executions_void_proposals AFTER UPDATE
    ON approved_action_executions REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_proposals_void();

CREATE CONSTRAINT TRIGGER approved_action_recovery_resolutions_two_people
    AFTER INSERT ON approved_action_recovery_resolutions
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.source = ''manual'')
    EXECUTE FUNCTION resolver_two_people_present();

-- Late evidence after a human decision: the watch a decision opens and the fenced record of
-- what the provider saw afterwards.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

-- Insert-only, like the resolution it sits beside; retention removes both together.
CREATE TRIGGER recovery_late_evidence_immutable BEFORE UPDATE OR DELETE ON recovery_late_evidence
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER approved_action_recovery_resolutions_late_watch
    AFTER INSERT ON approved_action_recovery_resolutions
    FOR EACH ROW
    WHEN (NEW.source = ''manual'' AND NEW.outcome IN (''succeeded'', ''failed'')
          AND NEW.finding IS DISTINCT FROM ''unsupported'')
    EXECUTE FUNCTION resolver_open_late_watch();

CREATE TRIGGER recovery_late_evidence_definer_write AFTER INSERT ON recovery_late_evidence
    FOR EACH STATEMENT
    EXECUTE FUNCTION resolver_guard_definer_write(''resolver_record_late_evidence'');

CREATE TRIGGER approved_action_executions_settled_identity
    BEFORE INSERT ON approved_action_executions
    FOR EACH ROW EXECUTE FUNCTION resolver_refuse_settled_lease();

CREATE TRIGGER approved_action_executions_outcomes
    AFTER UPDATE ON approved_action_executions REFERENCING NEW TABLE AS settled
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_outcomes_append_settled();

CREATE TRIGGER recovery_late_evidence_outcomes
    AFTER INSERT ON recovery_late_evidence REFERENCING NEW TABLE AS observed
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_outcomes_append_contradicted();

CREATE TRIGGER approved_action_dispatches_outcomes
    AFTER INSERT ON approved_action_dispatches FOR EACH ROW
    WHEN (NEW.supersedes_dispatch_id IS NOT NULL)
    EXECUTE FUNCTION resolver_outcomes_append_superseded();

-- The feed is insert-only: only the three appends above write it, and only the prune deletes.
CREATE TRIGGER recovery_outcomes_immutable BEFORE UPDATE OR DELETE ON recovery_outcomes
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER recovery_outcomes_append_only AFTER INSERT ON recovery_outcomes
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_outcomes_guard();
', '2026-12-07 14:45:26.974378+00');


--
-- Data for Name: resolver_evidence_tables; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.resolver_evidence_tables VALUES ('ledger_entries', 'dispatch_id', 'ledger');
INSERT INTO public.resolver_evidence_tables VALUES ('package_install_records', 'dispatch_id', 'package_install');
INSERT INTO public.resolver_evidence_tables VALUES ('package_install_targets', 'dispatch_id', 'package_install');
INSERT INTO public.resolver_evidence_tables VALUES ('package_commit_markers', 'dispatch_id', 'package_install');
INSERT INTO public.resolver_evidence_tables VALUES ('run_origin_facts', 'dispatch_id', 'run_create');


--
-- Data for Name: resolver_provider_migrations; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.resolver_provider_migrations VALUES ('ledger', '0001_ledger_entries', '9950256c737ce36fe626806e06703c09f04117bb6ac6881d632f131145a5f686', 1796654726982);
INSERT INTO public.resolver_provider_migrations VALUES ('ledger', 'definitions', '3e5bad76adb474bedcf26377fdfbce33ed1a8cc86c80b92326d99a6af9c890e2', 1796654726982);
INSERT INTO public.resolver_provider_migrations VALUES ('package_install', '0001_package_install_facts', '20c9b5611691ffb2137b5ace8c12378cc7be61f44f4c4e31250f91eb7caabb0e', 1796654726993);
INSERT INTO public.resolver_provider_migrations VALUES ('package_install', 'definitions', '79c849a8908ab1ed07019d80e69be82c160fc8ae6a32642d43882e7c4ef10e66', 1796654726993);
INSERT INTO public.resolver_provider_migrations VALUES ('run_create', '0001_run_origin_facts', '6b3282d1d900b14ff87787dbf0d7edb27bd253195e1d2a629d4951eb7126a369', 1796654726998);
INSERT INTO public.resolver_provider_migrations VALUES ('run_create', 'definitions', 'f060dd0b8afe8fadd4d0473af8a0d99131aac80dc8bfedaff8ca23181826d319', 1796654726999);


--
-- Data for Name: run_origin_facts; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Name: approved_action_recovery_resolutions_resolution_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.approved_action_recovery_resolutions_resolution_id_seq', 2, true);


--
-- Name: recovery_authorizations_authorization_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.recovery_authorizations_authorization_id_seq', 1, false);


--
-- Name: recovery_outcomes_seq_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.recovery_outcomes_seq_seq', 2, true);


--
-- Name: recovery_proposals_proposal_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.recovery_proposals_proposal_id_seq', 1, false);


--
-- Name: recovery_prune_runs_run_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.recovery_prune_runs_run_id_seq', 1, false);


--
-- Name: alembic_version alembic_version_pkc; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);


--
-- Name: action_receipts pk_action_receipts; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.action_receipts
    ADD CONSTRAINT pk_action_receipts PRIMARY KEY (dispatch_id);


--
-- Name: approved_action_dispatches pk_approved_action_dispatches; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_dispatches
    ADD CONSTRAINT pk_approved_action_dispatches PRIMARY KEY (dispatch_id);


--
-- Name: approved_action_executions pk_approved_action_executions; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_executions
    ADD CONSTRAINT pk_approved_action_executions PRIMARY KEY (dispatch_id);


--
-- Name: approved_action_recovery_controls pk_approved_action_recovery_controls; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_recovery_controls
    ADD CONSTRAINT pk_approved_action_recovery_controls PRIMARY KEY (dispatch_id);


--
-- Name: approved_action_recovery_resolutions pk_approved_action_recovery_resolutions; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_recovery_resolutions
    ADD CONSTRAINT pk_approved_action_recovery_resolutions PRIMARY KEY (resolution_id);


--
-- Name: ledger_entries pk_ledger_entries; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_entries
    ADD CONSTRAINT pk_ledger_entries PRIMARY KEY (dispatch_id);


--
-- Name: package_commit_markers pk_package_commit_markers; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.package_commit_markers
    ADD CONSTRAINT pk_package_commit_markers PRIMARY KEY (dispatch_id);


--
-- Name: package_install_records pk_package_install_records; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.package_install_records
    ADD CONSTRAINT pk_package_install_records PRIMARY KEY (dispatch_id);


--
-- Name: package_install_targets pk_package_install_targets; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.package_install_targets
    ADD CONSTRAINT pk_package_install_targets PRIMARY KEY (dispatch_id);


--
-- Name: recovery_audit_chain pk_recovery_audit_chain; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_audit_chain
    ADD CONSTRAINT pk_recovery_audit_chain PRIMARY KEY (seq);


--
-- Name: recovery_audit_head pk_recovery_audit_head; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_audit_head
    ADD CONSTRAINT pk_recovery_audit_head PRIMARY KEY (id);


--
-- Name: recovery_authorizations pk_recovery_authorizations; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_authorizations
    ADD CONSTRAINT pk_recovery_authorizations PRIMARY KEY (authorization_id);


--
-- Name: recovery_decision_policy pk_recovery_decision_policy; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_decision_policy
    ADD CONSTRAINT pk_recovery_decision_policy PRIMARY KEY (id);


--
-- Name: recovery_late_evidence pk_recovery_late_evidence; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_late_evidence
    ADD CONSTRAINT pk_recovery_late_evidence PRIMARY KEY (observation_id);


--
-- Name: recovery_late_watches pk_recovery_late_watches; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_late_watches
    ADD CONSTRAINT pk_recovery_late_watches PRIMARY KEY (dispatch_id);


--
-- Name: recovery_outcome_consumers pk_recovery_outcome_consumers; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_outcome_consumers
    ADD CONSTRAINT pk_recovery_outcome_consumers PRIMARY KEY (consumer);


--
-- Name: recovery_outcome_listeners pk_recovery_outcome_listeners; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_outcome_listeners
    ADD CONSTRAINT pk_recovery_outcome_listeners PRIMARY KEY (pid);


--
-- Name: recovery_outcome_reader_scopes pk_recovery_outcome_reader_scopes; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_outcome_reader_scopes
    ADD CONSTRAINT pk_recovery_outcome_reader_scopes PRIMARY KEY (role_name, project_id);


--
-- Name: recovery_outcomes pk_recovery_outcomes; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_outcomes
    ADD CONSTRAINT pk_recovery_outcomes PRIMARY KEY (xid, seq);


--
-- Name: recovery_projects pk_recovery_projects; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_projects
    ADD CONSTRAINT pk_recovery_projects PRIMARY KEY (project_id);


--
-- Name: recovery_proposals pk_recovery_proposals; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_proposals
    ADD CONSTRAINT pk_recovery_proposals PRIMARY KEY (proposal_id);


--
-- Name: recovery_prune_runs pk_recovery_prune_runs; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_prune_runs
    ADD CONSTRAINT pk_recovery_prune_runs PRIMARY KEY (run_id);


--
-- Name: recovery_pruned_dispatches pk_recovery_pruned_dispatches; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_pruned_dispatches
    ADD CONSTRAINT pk_recovery_pruned_dispatches PRIMARY KEY (dispatch_id);


--
-- Name: recovery_role_bindings pk_recovery_role_bindings; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_role_bindings
    ADD CONSTRAINT pk_recovery_role_bindings PRIMARY KEY (project_id, user_id, permission);


--
-- Name: recovery_two_person_rules pk_recovery_two_person_rules; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_two_person_rules
    ADD CONSTRAINT pk_recovery_two_person_rules PRIMARY KEY (action_type_pattern, decision);


--
-- Name: resolver_definitions pk_resolver_definitions; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resolver_definitions
    ADD CONSTRAINT pk_resolver_definitions PRIMARY KEY (revision);


--
-- Name: resolver_evidence_tables pk_resolver_evidence_tables; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resolver_evidence_tables
    ADD CONSTRAINT pk_resolver_evidence_tables PRIMARY KEY (table_name);


--
-- Name: resolver_provider_migrations pk_resolver_provider_migrations; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.resolver_provider_migrations
    ADD CONSTRAINT pk_resolver_provider_migrations PRIMARY KEY (provider, name);


--
-- Name: run_origin_facts pk_run_origin_facts; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_origin_facts
    ADD CONSTRAINT pk_run_origin_facts PRIMARY KEY (run_id);


--
-- Name: approved_action_dispatches uq_approved_action_dispatches_idempotency_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_dispatches
    ADD CONSTRAINT uq_approved_action_dispatches_idempotency_key UNIQUE (idempotency_key);


--
-- Name: approved_action_recovery_resolutions uq_approved_action_recovery_resolutions_dispatch_id; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_recovery_resolutions
    ADD CONSTRAINT uq_approved_action_recovery_resolutions_dispatch_id UNIQUE (dispatch_id);


--
-- Name: approved_action_recovery_resolutions uq_approved_action_recovery_resolutions_mutation_id; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_recovery_resolutions
    ADD CONSTRAINT uq_approved_action_recovery_resolutions_mutation_id UNIQUE (mutation_id);


--
-- Name: package_install_records uq_package_install_records_idempotency_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.package_install_records
    ADD CONSTRAINT uq_package_install_records_idempotency_key UNIQUE (idempotency_key);


--
-- Name: recovery_audit_chain uq_recovery_audit_chain_mutation_id; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_audit_chain
    ADD CONSTRAINT uq_recovery_audit_chain_mutation_id UNIQUE (mutation_id);


--
-- Name: recovery_authorizations uq_recovery_authorizations_mutation_id_user_id; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_authorizations
    ADD CONSTRAINT uq_recovery_authorizations_mutation_id_user_id UNIQUE (mutation_id, user_id);


--
-- Name: recovery_late_evidence uq_recovery_late_evidence_dispatch_id; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_late_evidence
    ADD CONSTRAINT uq_recovery_late_evidence_dispatch_id UNIQUE (dispatch_id);


--
-- Name: recovery_proposals uq_recovery_proposals_closed_mutation_id; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_proposals
    ADD CONSTRAINT uq_recovery_proposals_closed_mutation_id UNIQUE (closed_mutation_id);


--
-- Name: recovery_proposals uq_recovery_proposals_mutation_id; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_proposals
    ADD CONSTRAINT uq_recovery_proposals_mutation_id UNIQUE (mutation_id);


--
-- Name: run_origin_facts uq_run_origin_facts_dispatch_id; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_origin_facts
    ADD CONSTRAINT uq_run_origin_facts_dispatch_id UNIQUE (dispatch_id);


--
-- Name: run_origin_facts uq_run_origin_facts_idempotency_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_origin_facts
    ADD CONSTRAINT uq_run_origin_facts_idempotency_key UNIQUE (idempotency_key);


--
-- Name: ix_approved_action_dispatches_approval_request_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_approved_action_dispatches_approval_request_id ON public.approved_action_dispatches USING btree (approval_request_id);


--
-- Name: ix_approved_action_dispatches_supersedes_dispatch_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_approved_action_dispatches_supersedes_dispatch_id ON public.approved_action_dispatches USING btree (supersedes_dispatch_id) WHERE (supersedes_dispatch_id IS NOT NULL);


--
-- Name: ix_recovery_controls_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_controls_due ON public.approved_action_recovery_controls USING btree (next_scan_at_ms, dispatch_id) WHERE ((status)::text = 'armed'::text);


--
-- Name: ix_recovery_controls_manual; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_controls_manual ON public.approved_action_recovery_controls USING btree (manual_at_ms, dispatch_id) WHERE ((status)::text = 'manual'::text);


--
-- Name: ix_recovery_controls_settled; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_controls_settled ON public.approved_action_recovery_controls USING btree (closed_at_ms, dispatch_id) WHERE ((status)::text = 'resolved'::text);


--
-- Name: ix_recovery_controls_waiting; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_controls_waiting ON public.approved_action_recovery_controls USING btree (first_inspected_at_ms, dispatch_id) WHERE (((status)::text = 'armed'::text) AND (first_inspected_at_ms IS NOT NULL));


--
-- Name: ix_recovery_late_watches_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_late_watches_open ON public.recovery_late_watches USING btree (next_scan_at_ms, dispatch_id) WHERE (closed_at_ms IS NULL);


--
-- Name: ix_recovery_late_watches_open_decided; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_late_watches_open_decided ON public.recovery_late_watches USING btree (decided_at_ms, dispatch_id) WHERE (closed_at_ms IS NULL);


--
-- Name: ix_recovery_outcomes_dispatch_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_outcomes_dispatch_id ON public.recovery_outcomes USING btree (dispatch_id);


--
-- Name: ix_recovery_proposals_dispatch_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_proposals_dispatch_id ON public.recovery_proposals USING btree (dispatch_id);


--
-- Name: ix_recovery_proposals_open; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX ix_recovery_proposals_open ON public.recovery_proposals USING btree (dispatch_id) WHERE (closed_as IS NULL);


--
-- Name: ix_recovery_pruned_dispatches_approval_request_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_pruned_dispatches_approval_request_id ON public.recovery_pruned_dispatches USING btree (approval_request_id);


--
-- Name: ix_recovery_pruned_dispatches_idempotency_key_sha256; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_pruned_dispatches_idempotency_key_sha256 ON public.recovery_pruned_dispatches USING btree (idempotency_key_sha256);


--
-- Name: ix_recovery_pruned_dispatches_pruned_at_ms; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_pruned_dispatches_pruned_at_ms ON public.recovery_pruned_dispatches USING btree (pruned_at_ms, dispatch_id);


--
-- Name: ix_recovery_pruned_dispatches_run_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_pruned_dispatches_run_id ON public.recovery_pruned_dispatches USING btree (run_id);


--
-- Name: ix_recovery_resolutions_manual; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_resolutions_manual ON public.approved_action_recovery_resolutions USING btree (resolved_at_ms, resolution_id) INCLUDE (dispatch_id) WHERE ((source)::text = 'manual'::text);


--
-- Name: uq_recovery_authorizations_act_mutation_id; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX uq_recovery_authorizations_act_mutation_id ON public.recovery_authorizations USING btree (act_mutation_id) WHERE (act_mutation_id IS NOT NULL);


--
-- Name: uq_recovery_authorizations_signature; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX uq_recovery_authorizations_signature ON public.recovery_authorizations USING btree (signature) WHERE (signature IS NOT NULL);


--
-- Name: uq_recovery_proposals_closed_signature; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX uq_recovery_proposals_closed_signature ON public.recovery_proposals USING btree (closed_signature) WHERE (closed_signature IS NOT NULL);


--
-- Name: uq_recovery_proposals_signature; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX uq_recovery_proposals_signature ON public.recovery_proposals USING btree (signature) WHERE (signature IS NOT NULL);


--
-- Name: action_receipts action_receipts_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER action_receipts_immutable BEFORE DELETE OR UPDATE ON public.action_receipts FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: action_receipts action_receipts_live_lease; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER action_receipts_live_lease AFTER INSERT ON public.action_receipts DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.resolver_check_receipt_lease();


--
-- Name: approved_action_dispatches approved_action_dispatches_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_dispatches_immutable BEFORE DELETE OR UPDATE ON public.approved_action_dispatches FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: approved_action_dispatches approved_action_dispatches_outcomes; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_dispatches_outcomes AFTER INSERT ON public.approved_action_dispatches FOR EACH ROW WHEN ((new.supersedes_dispatch_id IS NOT NULL)) EXECUTE FUNCTION public.resolver_outcomes_append_superseded();


--
-- Name: approved_action_executions approved_action_executions_born_leased; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_executions_born_leased AFTER INSERT ON public.approved_action_executions FOR EACH ROW WHEN ((((new.state)::text <> 'leased'::text) OR (new.version <> 1) OR (new.attempt <> 1) OR (new.started_at_ms IS NOT NULL) OR (new.finished_at_ms IS NOT NULL) OR (new.result_code IS NOT NULL) OR (new.completion_mutation_id IS NOT NULL) OR (new.evidence_digest IS NOT NULL))) EXECUTE FUNCTION public.resolver_guard_insert();


--
-- Name: approved_action_executions approved_action_executions_control_in_step; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER approved_action_executions_control_in_step AFTER UPDATE OF version ON public.approved_action_executions DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((new.version <> old.version) AND ((new.state)::text <> ALL (public.resolver_terminal_states())))) EXECUTE FUNCTION public.resolver_check_control_in_step();


--
-- Name: approved_action_executions approved_action_executions_outcomes; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_executions_outcomes AFTER UPDATE ON public.approved_action_executions REFERENCING NEW TABLE AS settled FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_outcomes_append_settled();


--
-- Name: approved_action_executions approved_action_executions_settled_closed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_executions_settled_closed AFTER UPDATE ON public.approved_action_executions REFERENCING NEW TABLE AS settled FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_check_settled_closed();


--
-- Name: approved_action_executions approved_action_executions_settled_identity; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_executions_settled_identity BEFORE INSERT ON public.approved_action_executions FOR EACH ROW EXECUTE FUNCTION public.resolver_refuse_settled_lease();


--
-- Name: approved_action_executions approved_action_executions_state_machine; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_executions_state_machine AFTER UPDATE ON public.approved_action_executions FOR EACH ROW WHEN ((((old.state)::text = ANY (public.resolver_terminal_states())) OR (new.dispatch_id <> old.dispatch_id) OR (NOT (((new.state)::text = (old.state)::text) OR (((old.state)::text = 'leased'::text) AND ((new.state)::text = 'executing'::text)) OR (((old.state)::text = 'executing'::text) AND ((new.state)::text = ANY (public.resolver_terminal_states()))))) OR (new.version < old.version) OR (new.attempt < old.attempt) OR ((new.version = old.version) AND ((new.lease_expires_at_ms > old.lease_expires_at_ms) OR ((new.state)::text <> (old.state)::text) OR (new.owner <> old.owner) OR (new.token <> old.token))) OR ((old.started_at_ms IS NOT NULL) AND (new.started_at_ms IS DISTINCT FROM old.started_at_ms)))) EXECUTE FUNCTION public.resolver_guard_execution();


--
-- Name: approved_action_executions approved_action_executions_void_proposals; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_executions_void_proposals AFTER UPDATE ON public.approved_action_executions REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_proposals_void();


--
-- Name: approved_action_recovery_controls approved_action_recovery_controls_armed_in_step; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER approved_action_recovery_controls_armed_in_step AFTER INSERT ON public.approved_action_recovery_controls DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((new.status)::text <> 'resolved'::text)) EXECUTE FUNCTION public.resolver_check_control_in_step();


--
-- Name: approved_action_recovery_controls approved_action_recovery_controls_born_armed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_recovery_controls_born_armed AFTER INSERT ON public.approved_action_recovery_controls FOR EACH ROW WHEN ((((new.status)::text <> 'armed'::text) OR (new.recovery_token IS NOT NULL) OR (new.closed_by IS NOT NULL))) EXECUTE FUNCTION public.resolver_guard_insert();


--
-- Name: approved_action_recovery_controls approved_action_recovery_controls_in_step; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER approved_action_recovery_controls_in_step AFTER UPDATE OF execution_version ON public.approved_action_recovery_controls DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((((new.status)::text <> 'resolved'::text) AND (new.execution_version <> old.execution_version))) EXECUTE FUNCTION public.resolver_check_control_in_step();


--
-- Name: approved_action_recovery_controls approved_action_recovery_controls_state_machine; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_recovery_controls_state_machine AFTER UPDATE ON public.approved_action_recovery_controls FOR EACH ROW WHEN ((((old.status)::text = 'resolved'::text) OR (new.dispatch_id <> old.dispatch_id) OR (new.execution_version < old.execution_version) OR (new.recovery_version < old.recovery_version) OR ((new.recovery_version = old.recovery_version) AND ((new.recovery_token IS DISTINCT FROM old.recovery_token) OR (new.recovery_lease_expires_at_ms > old.recovery_lease_expires_at_ms))))) EXECUTE FUNCTION public.resolver_guard_control();


--
-- Name: approved_action_recovery_resolutions approved_action_recovery_resolutions_definer_write; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_recovery_resolutions_definer_write AFTER INSERT ON public.approved_action_recovery_resolutions FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_guard_definer_write('resolver_commit_automatic', 'resolver_commit_manual');


--
-- Name: approved_action_recovery_resolutions approved_action_recovery_resolutions_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_recovery_resolutions_immutable BEFORE DELETE OR UPDATE ON public.approved_action_recovery_resolutions FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: approved_action_recovery_resolutions approved_action_recovery_resolutions_late_watch; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_recovery_resolutions_late_watch AFTER INSERT ON public.approved_action_recovery_resolutions FOR EACH ROW WHEN ((((new.source)::text = 'manual'::text) AND ((new.outcome)::text = ANY (ARRAY['succeeded'::text, 'failed'::text])) AND (new.finding IS DISTINCT FROM 'unsupported'::text))) EXECUTE FUNCTION public.resolver_open_late_watch();


--
-- Name: approved_action_recovery_resolutions approved_action_recovery_resolutions_two_people; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER approved_action_recovery_resolutions_two_people AFTER INSERT ON public.approved_action_recovery_resolutions DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((new.source)::text = 'manual'::text)) EXECUTE FUNCTION public.resolver_two_people_present();


--
-- Name: ledger_entries ledger_entries_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER ledger_entries_immutable BEFORE DELETE OR UPDATE ON public.ledger_entries FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: package_commit_markers package_commit_markers_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER package_commit_markers_immutable BEFORE DELETE OR UPDATE ON public.package_commit_markers FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: package_install_records package_install_records_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER package_install_records_immutable BEFORE DELETE OR UPDATE ON public.package_install_records FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: package_install_targets package_install_targets_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER package_install_targets_immutable BEFORE DELETE OR UPDATE ON public.package_install_targets FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: recovery_audit_chain recovery_audit_chain_definer_write; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_audit_chain_definer_write AFTER INSERT ON public.recovery_audit_chain FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_guard_definer_write('resolver_commit_manual', 'resolver_proposal_close');


--
-- Name: recovery_audit_chain recovery_audit_chain_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_audit_chain_immutable BEFORE DELETE OR UPDATE ON public.recovery_audit_chain FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: recovery_audit_head recovery_audit_head_definer_write; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_audit_head_definer_write AFTER INSERT OR UPDATE ON public.recovery_audit_head FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_guard_definer_write('resolver_commit_manual', 'resolver_proposal_close');


--
-- Name: recovery_authorizations recovery_authorizations_definer_write; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_authorizations_definer_write AFTER INSERT ON public.recovery_authorizations FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_guard_definer_write('resolver_commit_manual');


--
-- Name: recovery_authorizations recovery_authorizations_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_authorizations_immutable BEFORE DELETE OR UPDATE ON public.recovery_authorizations FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: recovery_late_evidence recovery_late_evidence_definer_write; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_late_evidence_definer_write AFTER INSERT ON public.recovery_late_evidence FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_guard_definer_write('resolver_record_late_evidence');


--
-- Name: recovery_late_evidence recovery_late_evidence_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_late_evidence_immutable BEFORE DELETE OR UPDATE ON public.recovery_late_evidence FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: recovery_late_evidence recovery_late_evidence_outcomes; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_late_evidence_outcomes AFTER INSERT ON public.recovery_late_evidence REFERENCING NEW TABLE AS observed FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_outcomes_append_contradicted();


--
-- Name: recovery_outcomes recovery_outcomes_append_only; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_outcomes_append_only AFTER INSERT ON public.recovery_outcomes FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_outcomes_guard();


--
-- Name: recovery_outcomes recovery_outcomes_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_outcomes_immutable BEFORE DELETE OR UPDATE ON public.recovery_outcomes FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: recovery_proposals recovery_proposals_close_once; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_proposals_close_once BEFORE UPDATE ON public.recovery_proposals FOR EACH ROW EXECUTE FUNCTION public.resolver_proposal_close_once();


--
-- Name: recovery_proposals recovery_proposals_definer_write; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_proposals_definer_write AFTER INSERT OR UPDATE ON public.recovery_proposals FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_guard_definer_write('resolver_commit_manual', 'resolver_proposal_close', 'resolver_proposals_void');


--
-- Name: run_origin_facts run_origin_facts_guard; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER run_origin_facts_guard BEFORE DELETE OR UPDATE ON public.run_origin_facts FOR EACH ROW EXECUTE FUNCTION public.resolver_guard_run_origin();


--
-- Name: action_receipts fk_action_receipts_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.action_receipts
    ADD CONSTRAINT fk_action_receipts_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_dispatches(dispatch_id);


--
-- Name: approved_action_dispatches fk_approved_action_dispatches_supersedes_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_dispatches
    ADD CONSTRAINT fk_approved_action_dispatches_supersedes_dispatch_id FOREIGN KEY (supersedes_dispatch_id) REFERENCES public.approved_action_dispatches(dispatch_id);


--
-- Name: approved_action_executions fk_approved_action_executions_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_executions
    ADD CONSTRAINT fk_approved_action_executions_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_dispatches(dispatch_id);


--
-- Name: approved_action_recovery_controls fk_approved_action_recovery_controls_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_recovery_controls
    ADD CONSTRAINT fk_approved_action_recovery_controls_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_executions(dispatch_id);


--
-- Name: approved_action_recovery_resolutions fk_approved_action_recovery_resolutions_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approved_action_recovery_resolutions
    ADD CONSTRAINT fk_approved_action_recovery_resolutions_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_dispatches(dispatch_id);


--
-- Name: ledger_entries fk_ledger_entries_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_entries
    ADD CONSTRAINT fk_ledger_entries_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_dispatches(dispatch_id);


--
-- Name: package_commit_markers fk_package_commit_markers_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.package_commit_markers
    ADD CONSTRAINT fk_package_commit_markers_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_dispatches(dispatch_id);


--
-- Name: package_install_records fk_package_install_records_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.package_install_records
    ADD CONSTRAINT fk_package_install_records_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_dispatches(dispatch_id);


--
-- Name: package_install_targets fk_package_install_targets_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.package_install_targets
    ADD CONSTRAINT fk_package_install_targets_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_dispatches(dispatch_id);


--
-- Name: recovery_authorizations fk_recovery_authorizations_mutation_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_authorizations
    ADD CONSTRAINT fk_recovery_authorizations_mutation_id FOREIGN KEY (mutation_id) REFERENCES public.approved_action_recovery_resolutions(mutation_id);


--
-- Name: recovery_late_evidence fk_recovery_late_evidence_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_late_evidence
    ADD CONSTRAINT fk_recovery_late_evidence_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_recovery_resolutions(dispatch_id) ON DELETE CASCADE;


--
-- Name: recovery_late_watches fk_recovery_late_watches_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_late_watches
    ADD CONSTRAINT fk_recovery_late_watches_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_recovery_resolutions(dispatch_id) ON DELETE CASCADE;


--
-- Name: recovery_proposals fk_recovery_proposals_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_proposals
    ADD CONSTRAINT fk_recovery_proposals_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_dispatches(dispatch_id) ON DELETE CASCADE;


--
-- Name: recovery_pruned_dispatches fk_recovery_pruned_dispatches_run_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_pruned_dispatches
    ADD CONSTRAINT fk_recovery_pruned_dispatches_run_id FOREIGN KEY (run_id) REFERENCES public.recovery_prune_runs(run_id);


--
-- Name: recovery_role_bindings fk_recovery_role_bindings_project_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.recovery_role_bindings
    ADD CONSTRAINT fk_recovery_role_bindings_project_id FOREIGN KEY (project_id) REFERENCES public.recovery_projects(project_id);


--
-- Name: run_origin_facts fk_run_origin_facts_dispatch_id; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_origin_facts
    ADD CONSTRAINT fk_run_origin_facts_dispatch_id FOREIGN KEY (dispatch_id) REFERENCES public.approved_action_dispatches(dispatch_id);


--
-- Name: FUNCTION resolver_is_id(p_value text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_is_id(p_value text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_act_bounds(p_max_auth_age_ms bigint, p_proposal_ttl_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_act_bounds(p_max_auth_age_ms bigint, p_proposal_ttl_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_audit_append(p_mutation_id text, p_dispatch_id text, p_content text, p_recorded_at_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_audit_append(p_mutation_id text, p_dispatch_id text, p_content text, p_recorded_at_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_audit_authorization(p_user_id text, p_permission text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_authorized_at_ms bigint, p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_act text, p_act_mutation_id text, p_proposal_id bigint, p_verified_at_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_audit_authorization(p_user_id text, p_permission text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_authorized_at_ms bigint, p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_act text, p_act_mutation_id text, p_proposal_id bigint, p_verified_at_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_audit_close(p_mutation_id text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_audit_close(p_mutation_id text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_audit_content(p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text, p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text, p_reason_code text, p_resolved_at_ms bigint, p_authorizations json, p_event text, p_proposal json); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_audit_content(p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text, p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text, p_reason_code text, p_resolved_at_ms bigint, p_authorizations json, p_event text, p_proposal json) FROM PUBLIC;


--
-- Name: FUNCTION resolver_audit_decision(p_mutation_id text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_audit_decision(p_mutation_id text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_audit_proposal(p_proposal_id bigint, p_mutation_id text, p_outcome text, p_expected_execution_version bigint, p_evidence_digest text, p_reason_code text, p_proposed_by text, p_proposed_at_ms bigint, p_expires_at_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_audit_proposal(p_proposal_id bigint, p_mutation_id text, p_outcome text, p_expected_execution_version bigint, p_evidence_digest text, p_reason_code text, p_proposed_by text, p_proposed_at_ms bigint, p_expires_at_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_check_control_in_step(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_check_control_in_step() FROM PUBLIC;


--
-- Name: FUNCTION resolver_check_receipt_lease(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_check_receipt_lease() FROM PUBLIC;


--
-- Name: FUNCTION resolver_check_settled_closed(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_check_settled_closed() FROM PUBLIC;


--
-- Name: FUNCTION resolver_commit_automatic(p_items json, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_commit_automatic(p_items json, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_commit_manual(p_dispatch_id text, p_mutation_id text, p_act text, p_proposal_id bigint, p_outcome text, p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint, p_max_auth_age_ms bigint, p_proposal_ttl_ms bigint, p_now_ms bigint, p_tamper_acknowledged boolean, p_tampering_reasons text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_commit_manual(p_dispatch_id text, p_mutation_id text, p_act text, p_proposal_id bigint, p_outcome text, p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint, p_max_auth_age_ms bigint, p_proposal_ttl_ms bigint, p_now_ms bigint, p_tamper_acknowledged boolean, p_tampering_reasons text[]) FROM PUBLIC;


--
-- Name: FUNCTION resolver_commit_wait_controls(p_ids text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_commit_wait_controls(p_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION resolver_commit_wait_executions(p_ids text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_commit_wait_executions(p_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION resolver_dispatch_create_v2(p_dispatch_id text, p_approval_request_id text, p_project_id text, p_action_type text, p_action_digest text, p_idempotency_key text, p_schema_version integer, p_supersedes_dispatch_id text, p_action_summary jsonb); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_dispatch_create_v2(p_dispatch_id text, p_approval_request_id text, p_project_id text, p_action_type text, p_action_digest text, p_idempotency_key text, p_schema_version integer, p_supersedes_dispatch_id text, p_action_summary jsonb) FROM PUBLIC;


--
-- Name: FUNCTION resolver_dispatch_history(p_dispatch_id text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_dispatch_history(p_dispatch_id text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_dispatch_status(p_dispatch_id text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_dispatch_status(p_dispatch_id text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_effective_state(p_state text, p_lease_expires_at_ms bigint, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_effective_state(p_state text, p_lease_expires_at_ms bigint, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_execution_complete(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_outcome text, p_result_code text, p_mutation_id text, p_evidence_digest text, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_execution_complete(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_outcome text, p_result_code text, p_mutation_id text, p_evidence_digest text, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_execution_lease(p_dispatch_id text, p_owner text, p_lease_ms bigint, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_execution_lease(p_dispatch_id text, p_owner text, p_lease_ms bigint, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_execution_renew(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_lease_ms bigint, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_execution_renew(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_lease_ms bigint, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_execution_start(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_lease_ms bigint, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_execution_start(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_lease_ms bigint, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_fact_fresh(p_verified_at_ms bigint, p_now_ms bigint, p_clock_leeway_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_fact_fresh(p_verified_at_ms bigint, p_now_ms bigint, p_clock_leeway_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_fact_shape(p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_fact_shape(p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_fact_unused(p_mutation_id text, p_signature text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_fact_unused(p_mutation_id text, p_signature text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_finding_status(p_finding text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_finding_status(p_finding text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_guard_control(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_guard_control() FROM PUBLIC;


--
-- Name: FUNCTION resolver_guard_definer_write(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_guard_definer_write() FROM PUBLIC;


--
-- Name: FUNCTION resolver_guard_execution(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_guard_execution() FROM PUBLIC;


--
-- Name: FUNCTION resolver_guard_insert(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_guard_insert() FROM PUBLIC;


--
-- Name: FUNCTION resolver_importing_history(p_table regclass); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_importing_history(p_table regclass) FROM PUBLIC;


--
-- Name: FUNCTION resolver_is_action_type(p_value text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_is_action_type(p_value text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_needs_two_people(p_action_type text, p_outcome text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_needs_two_people(p_action_type text, p_outcome text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_open_late_watch(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_open_late_watch() FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcome_consumer_cursor(p_consumer text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcome_consumer_cursor(p_consumer text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcome_consumer_drop(p_consumer text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcome_consumer_drop(p_consumer text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcome_consumer_save(p_consumer text, p_cursor text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcome_consumer_save(p_consumer text, p_cursor text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcome_cursor_now(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcome_cursor_now() FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcome_cursor_parse(p_cursor text, OUT xid xid8, OUT seq bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcome_cursor_parse(p_cursor text, OUT xid xid8, OUT seq bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcome_listen(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcome_listen() FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcome_scope(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcome_scope() FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcome_unlisten(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcome_unlisten() FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcomes_after(p_cursor text, p_limit integer, p_project_id text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcomes_after(p_cursor text, p_limit integer, p_project_id text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcomes_append_contradicted(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcomes_append_contradicted() FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcomes_append_settled(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcomes_append_settled() FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcomes_append_superseded(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcomes_append_superseded() FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcomes_guard(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcomes_guard() FROM PUBLIC;


--
-- Name: FUNCTION resolver_outcomes_notify(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_outcomes_notify() FROM PUBLIC;


--
-- Name: FUNCTION resolver_proposal_close(p_dispatch_id text, p_mutation_id text, p_act text, p_proposal_id bigint, p_reason_code text, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint, p_max_auth_age_ms bigint, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_proposal_close(p_dispatch_id text, p_mutation_id text, p_act text, p_proposal_id bigint, p_reason_code text, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint, p_max_auth_age_ms bigint, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_proposal_close_once(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_proposal_close_once() FROM PUBLIC;


--
-- Name: FUNCTION resolver_proposals_void(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_proposals_void() FROM PUBLIC;


--
-- Name: FUNCTION resolver_protocol_check_lease(p_owner text, p_lease_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_protocol_check_lease(p_owner text, p_lease_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_protocol_lease_ok(p_owner text, p_lease_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_protocol_lease_ok(p_owner text, p_lease_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_protocol_now_ms(p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_protocol_now_ms(p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_protocol_refuse(p_step text, p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_protocol_refuse(p_step text, p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_protocol_test_clock(p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_protocol_test_clock(p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_prune_batch(p_run_id bigint, p_limit integer, p_dispatch_ids text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_prune_batch(p_run_id bigint, p_limit integer, p_dispatch_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION resolver_prune_begin(p_cutoff_ms bigint, p_include_audit boolean, p_export_digest text, p_actor text, p_past_consumers boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_prune_begin(p_cutoff_ms bigint, p_include_audit boolean, p_export_digest text, p_actor text, p_past_consumers boolean) FROM PUBLIC;


--
-- Name: FUNCTION resolver_prune_candidates(p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer, p_past_consumers boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_prune_candidates(p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer, p_past_consumers boolean) FROM PUBLIC;


--
-- Name: FUNCTION resolver_prune_consumers(p_cutoff_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_prune_consumers(p_cutoff_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_prune_finish(p_run_id bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_prune_finish(p_run_id bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_receipt_identity(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_receipt_identity(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_receipt_write(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_receipt jsonb); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_receipt_write(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_receipt jsonb) FROM PUBLIC;


--
-- Name: FUNCTION resolver_record_late_evidence(p_items json, p_owner text, p_window_ms bigint, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_record_late_evidence(p_items json, p_owner text, p_window_ms bigint, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_recovery_lease_released(p_recovery_version bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_recovery_lease_released(p_recovery_version bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_refuse_settled_lease(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_refuse_settled_lease() FROM PUBLIC;


--
-- Name: FUNCTION resolver_settle_manual(p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint, p_actor_user_id text, p_now_ms bigint, p_authorizations json); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_settle_manual(p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint, p_actor_user_id text, p_now_ms bigint, p_authorizations json) FROM PUBLIC;


--
-- Name: FUNCTION resolver_strong_amr(p_amr text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_strong_amr(p_amr text[]) FROM PUBLIC;


--
-- Name: FUNCTION resolver_two_people_present(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_two_people_present() FROM PUBLIC;


--
-- PostgreSQL database dump complete
--


