-- A database release 0.1.0 migrated and filled (tests/upgrade/make_release_dump.py).
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
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_audit_authorization(p_user_id text, p_permission text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_authorized_at_ms bigint) RETURNS json
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT json_build_object(
        'user_id', p_user_id, 'permission', p_permission, 'project_id', p_project_id,
        'project_version', p_project_version, 'role_binding_version', p_role_binding_version,
        'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', p_authorized_at_ms)
$$;


--
-- Name: resolver_audit_content(text, text, text, text, text, bigint, text, text, bigint, json); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_audit_content(p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text, p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text, p_reason_code text, p_resolved_at_ms bigint, p_authorizations json) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT json_build_object(
        'v', 1, 'dispatch_id', p_dispatch_id, 'mutation_id', p_mutation_id,
        'source', 'manual', 'outcome', p_outcome, 'overridden_finding', p_finding,
        'evidence_digest', p_evidence_digest,
        'expected_execution_version', p_expected_execution_version,
        'actor_user_id', p_actor_user_id, 'reason_code', p_reason_code,
        'resolved_at_ms', p_resolved_at_ms, 'authorizations', p_authorizations)::text
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
    -- An index probe per settled row (= ANY of an array): a join with the transition table,
    -- which has no statistics, may be planned as a scan of every control.
    SELECT c.dispatch_id INTO left_open
    FROM approved_action_recovery_controls AS c
    WHERE c.dispatch_id = ANY ((SELECT array_agg(n.dispatch_id) FROM settled AS n
                                WHERE n.state IN ('succeeded', 'failed', 'blocked'))::text[])
      AND c.status <> 'resolved'
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

CREATE FUNCTION public.resolver_commit_automatic(p_items json, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, status text)
    LANGUAGE plpgsql
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
    -- (migration 0016_perf), and only what is still held after that is left out.
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
    now_ms := resolver_now_ms(p_now_ms);
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
            mutation_id text, delay_ms bigint, failure text, escalate_after_ms bigint)
    ),
    fenced AS (
        SELECT i.*,
               CASE
                   -- Escalation (ADR-0033 §4, "when evidence is missing"): a finding that
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
    terminal AS (
        UPDATE approved_action_executions AS e
        SET state = CASE f.finding WHEN 'verified_succeeded' THEN 'succeeded' ELSE 'failed' END,
            version = e.version + 1,
            finished_at_ms = now_ms,
            result_code = f.result_code,
            evidence_digest = f.evidence_digest
        FROM fenced AS f
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
            manual_reason = CASE WHEN f.status <> 'manual' THEN NULL
                                 WHEN resolver_finding_status(f.finding) = 'manual'
                                     THEN f.finding
                                 ELSE 'evidence_window_elapsed' END,
            last_finding = f.finding,
            finding_count = c.finding_count + 1,
            -- Bounded statistics: at most one key per finding kind, two times, two codes.
            finding_counts = c.finding_counts || jsonb_build_object(
                f.finding, coalesce((c.finding_counts ->> f.finding)::bigint, 0) + 1),
            first_inspected_at_ms = coalesce(c.first_inspected_at_ms, now_ms),
            last_inspected_at_ms = now_ms,
            last_failure_class = coalesce(f.failure, c.last_failure_class),
            last_evidence_digest = coalesce(f.evidence_digest, c.last_evidence_digest),
            next_scan_at_ms = CASE WHEN f.status = 'armed' THEN now_ms + f.delay_ms
                                   ELSE c.next_scan_at_ms END,
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM fenced AS f
        WHERE c.dispatch_id = f.dispatch_id
    ),
    resolution AS (
        INSERT INTO approved_action_recovery_resolutions (
            dispatch_id, mutation_id, source, outcome, finding, evidence_digest, result_code,
            expected_execution_version, resolved_at_ms)
        SELECT f.dispatch_id, f.mutation_id, 'automatic',
               CASE f.finding WHEN 'verified_succeeded' THEN 'succeeded' ELSE 'failed' END,
               f.finding, f.evidence_digest, f.result_code, f.execution_version, now_ms
        FROM fenced AS f
        WHERE f.status = 'resolved'
    )
    SELECT f.dispatch_id, f.status FROM fenced AS f;
END
$$;


--
-- Name: resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_commit_manual(p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_max_auth_age_ms bigint, p_clock_leeway_ms bigint, p_now_ms bigint DEFAULT NULL::bigint, p_proposal_ttl_ms bigint DEFAULT 3600000) RETURNS TABLE(dispatch_id text, version bigint, result text, proposal_id bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
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
                'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', now_ms)))
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
            auth_time_ms, amr, proposed_at_ms, expires_at_ms)
        VALUES (p_dispatch_id, p_mutation_id, p_outcome, p_expected_execution_version,
                p_reason_code, p_evidence_digest, p_user_id, p_project_id, p_project_version,
                p_role_binding_version, p_auth_time_ms, p_amr, now_ms,
                now_ms + p_proposal_ttl_ms)
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
                'authorized_at_ms', prop.proposed_at_ms),
            json_build_object(
                'user_id', p_user_id, 'project_id', p_project_id,
                'project_version', p_project_version,
                'role_binding_version', p_role_binding_version,
                'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', now_ms)))
        AS s;
END
$$;


--
-- Name: resolver_commit_page(json, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_commit_page(p_items json, p_now_ms bigint DEFAULT NULL::bigint) RETURNS SETOF text
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT a.dispatch_id FROM resolver_commit_automatic(p_items, p_now_ms) AS a
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
-- Name: resolver_dispatch_create(text, text, text, text, text, text, integer, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_dispatch_create(p_dispatch_id text, p_approval_request_id text, p_project_id text, p_action_type text, p_action_digest text, p_idempotency_key text, p_schema_version integer DEFAULT 1, p_supersedes_dispatch_id text DEFAULT NULL::text) RETURNS TABLE(dispatch_id text, created boolean, created_at_ms bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
#variable_conflict use_column
DECLARE
    field text;
    existing approved_action_dispatches%ROWTYPE;
BEGIN
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
    IF NOT coalesce(p_action_type ~ '^[a-z][a-z0-9_.-]{0,63}$', false) THEN
        RAISE EXCEPTION 'p_action_type must match [a-z][a-z0-9_.-]{0,63}'
            USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(p_action_digest ~ '^[0-9a-f]{64}$', false) THEN
        RAISE EXCEPTION 'p_action_digest must be a lowercase hex sha256'
            USING ERRCODE = 'RS005';
    END IF;
    IF p_schema_version IS NULL OR p_schema_version < 1 THEN
        RAISE EXCEPTION 'p_schema_version must be >= 1' USING ERRCODE = 'RS005';
    END IF;
    IF p_supersedes_dispatch_id IS NOT NULL AND (
           p_supersedes_dispatch_id = p_dispatch_id
           OR NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS s
                          WHERE s.dispatch_id = p_supersedes_dispatch_id)) THEN
        RAISE EXCEPTION 'supersedes_dispatch_id % names no dispatch', quote_literal(p_supersedes_dispatch_id)
            USING ERRCODE = 'RS005';
    END IF;
    INSERT INTO approved_action_dispatches AS d (
        dispatch_id, approval_request_id, project_id, action_type, action_digest,
        idempotency_key, schema_version, supersedes_dispatch_id)
    VALUES (p_dispatch_id, p_approval_request_id, p_project_id, p_action_type,
            p_action_digest, p_idempotency_key, p_schema_version, p_supersedes_dispatch_id)
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
       AND existing.supersedes_dispatch_id IS NOT DISTINCT FROM p_supersedes_dispatch_id THEN
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
$_$;


--
-- Name: resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_execution_complete(p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_outcome text, p_result_code text, p_mutation_id text, p_evidence_digest text DEFAULT NULL::text, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, result text, state text, version bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    seen record;
BEGIN
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed') THEN
        RAISE EXCEPTION 'p_outcome must be succeeded or failed' USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(p_result_code ~ '^[a-z0-9_.-]{1,64}$', false) THEN
        RAISE EXCEPTION 'p_result_code must match [a-z0-9_.-]{1,64}' USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION 'p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]'
            USING ERRCODE = 'RS005';
    END IF;
    IF p_evidence_digest IS NOT NULL AND p_evidence_digest !~ '^[0-9a-f]{64}$' THEN
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
            manual_at_ms = NULL,
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
    IF seen.state IN ('succeeded', 'failed', 'blocked') THEN
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
$_$;


--
-- Name: resolver_execution_lease(text, text, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_execution_lease(p_dispatch_id text, p_owner text, p_lease_ms bigint, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, owner text, token uuid, version bigint, attempt integer, lease_expires_at_ms bigint, state text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    seen approved_action_executions%ROWTYPE;
BEGIN
    PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    now_ms := resolver_protocol_now_ms(p_now_ms);
    IF NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS d
                   WHERE d.dispatch_id = p_dispatch_id) THEN
        RAISE EXCEPTION 'dispatch % does not exist', quote_literal(p_dispatch_id)
            USING ERRCODE = 'RS004';
    END IF;
    -- First lease, or takeover of a `leased` execution whose lease expired (it never
    -- crossed the barrier, so running it again is safe). `executing` never leases again.
    INSERT INTO approved_action_executions AS e (
        dispatch_id, state, owner, token, version, attempt, lease_expires_at_ms)
    VALUES (p_dispatch_id, 'leased', p_owner, gen_random_uuid(), 1, 1, now_ms + p_lease_ms)
    ON CONFLICT (dispatch_id) DO UPDATE
    SET owner = EXCLUDED.owner,
        token = EXCLUDED.token,
        version = e.version + 1,
        attempt = e.attempt + 1,
        lease_expires_at_ms = EXCLUDED.lease_expires_at_ms
    WHERE e.state = 'leased' AND e.lease_expires_at_ms <= now_ms
    RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
              e.lease_expires_at_ms, e.state
    INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state;
    IF FOUND THEN
        RETURN NEXT;
        RETURN;
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
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    was text;
BEGIN
    PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
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
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
BEGIN
    PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- The start barrier: leased -> executing and the control armed, one transaction.
    -- Lock order: the execution row (this UPDATE), then the control (the INSERT).
    UPDATE approved_action_executions AS e
    SET state = 'executing',
        version = e.version + 1,
        started_at_ms = now_ms,
        lease_expires_at_ms = now_ms + p_lease_ms
    WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
      AND e.version = p_version AND e.state = 'leased' AND e.lease_expires_at_ms > now_ms
    RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
              e.lease_expires_at_ms, e.state, e.started_at_ms
    INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state,
         started_at_ms;
    IF NOT FOUND THEN
        PERFORM resolver_protocol_refuse(
            'start', p_dispatch_id, p_owner, p_token, p_version, now_ms);
    END IF;
    INSERT INTO approved_action_recovery_controls (
        dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms)
    VALUES (dispatch_id, 'armed', version, lease_expires_at_ms, started_at_ms);
    RETURN NEXT;
END
$$;


--
-- Name: resolver_finding_status(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_finding_status(p_finding text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE
        WHEN p_finding IN ('verified_succeeded', 'verified_failed') THEN 'resolved'
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
        WHEN OLD.state IN ('succeeded', 'failed', 'blocked') THEN 'a terminal execution never changes'
        WHEN NEW.dispatch_id <> OLD.dispatch_id THEN 'an execution keeps its dispatch_id'
        WHEN OLD.state = 'executing' AND NEW.state = 'leased'
            THEN 'executing never returns to leased'
        WHEN NOT (NEW.state = OLD.state OR (OLD.state = 'leased' AND NEW.state = 'executing')
                  OR (OLD.state = 'executing' AND NEW.state IN ('succeeded', 'failed', 'blocked')))
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
BEGIN
    -- Inside resolver_prune_batch only (see resolver_reject_mutation).
    IF TG_OP = 'DELETE' THEN
        IF coalesce(current_setting('resolver.prune_active', true), '') = 'on'
           AND (SELECT relowner FROM pg_class WHERE oid = TG_RELID)
               = (SELECT oid FROM pg_roles WHERE rolname = current_user) THEN
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
-- Name: resolver_is_id(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_is_id(p_value text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $_$
    SELECT p_value ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'
$_$;


--
-- Name: resolver_needs_two_people(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_needs_two_people(p_action_type text, p_outcome text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT EXISTS (
        SELECT 1 FROM recovery_two_person_rules AS r
        WHERE r.decision = CASE p_outcome WHEN 'succeeded' THEN 'confirm_succeeded'
                                          WHEN 'failed' THEN 'confirm_failed'
                                          ELSE 'abandon_unknown' END
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
-- Name: resolver_proposal_close(text, text, text, text, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_proposal_close(p_dispatch_id text, p_mutation_id text, p_action text, p_reason_code text, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_max_auth_age_ms bigint, p_clock_leeway_ms bigint, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, result text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    v_closed_as text;
    prop recovery_proposals%ROWTYPE;
BEGIN
    IF p_action IS NULL OR p_action NOT IN ('withdraw', 'reject') THEN
        RAISE EXCEPTION 'p_action must be withdraw or reject' USING ERRCODE = 'RS005';
    END IF;
    v_closed_as := CASE p_action WHEN 'withdraw' THEN 'withdrawn' ELSE 'rejected' END;
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
    now_ms := resolver_now_ms(p_now_ms);
    dispatch_id := p_dispatch_id;
    IF NOT (p_auth_time_ms >= now_ms - p_max_auth_age_ms
            AND p_auth_time_ms <= now_ms + p_clock_leeway_ms) THEN
        result := 'stale_auth';
        RETURN NEXT;
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM recovery_proposals AS rp
               WHERE rp.closed_mutation_id = p_mutation_id AND rp.dispatch_id = p_dispatch_id
                 AND rp.closed_by = p_user_id AND rp.closed_as = v_closed_as
                 AND rp.close_reason_code = p_reason_code) THEN
        result := 'replayed';
        RETURN NEXT;
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM recovery_proposals AS rp
               WHERE rp.mutation_id = p_mutation_id OR rp.closed_mutation_id = p_mutation_id)
       OR EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS r
                  WHERE r.mutation_id = p_mutation_id) THEN
        result := 'mutation_used';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT * INTO prop FROM recovery_proposals AS rp
    WHERE rp.dispatch_id = p_dispatch_id AND rp.project_id = p_project_id
      AND rp.closed_as IS NULL
    FOR UPDATE;
    IF prop.proposal_id IS NOT NULL AND prop.expires_at_ms <= now_ms THEN
        UPDATE recovery_proposals AS rp SET closed_as = 'expired', closed_at_ms = now_ms
        WHERE rp.proposal_id = prop.proposal_id;
        prop := NULL;
    END IF;
    IF prop.proposal_id IS NULL THEN
        result := 'no_proposal';
    ELSIF p_action = 'withdraw' AND prop.proposed_by <> p_user_id THEN
        result := 'not_proposer';
    ELSIF p_action = 'reject' AND prop.proposed_by = p_user_id THEN
        result := 'own_proposal';
    ELSE
        UPDATE recovery_proposals AS rp
        SET closed_as = v_closed_as, closed_at_ms = now_ms, closed_by = p_user_id,
            closed_mutation_id = p_mutation_id, close_reason_code = p_reason_code,
            closed_auth_time_ms = p_auth_time_ms, closed_amr = p_amr
        WHERE rp.proposal_id = prop.proposal_id;
        result := v_closed_as;
    END IF;
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
    IF p_owner IS NULL OR length(p_owner) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION 'p_owner must be 1-128 characters' USING ERRCODE = 'RS005';
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1 AND 86400000 THEN
        RAISE EXCEPTION 'p_lease_ms must be between 1 and 86400000 (one day)'
            USING ERRCODE = 'RS005';
    END IF;
END
$$;


--
-- Name: resolver_protocol_now_ms(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_protocol_now_ms(p_now_ms bigint) RETURNS bigint
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
-- Name: resolver_prune_batch(bigint, integer, text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_prune_batch(p_run_id bigint, p_limit integer, p_dispatch_ids text[]) RETURNS TABLE(dispatches bigint, audit bigint, evidence bigint, remnants bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    r recovery_prune_runs;
    v_settled text[];
    v_remnants text[] := '{}';
    v_rows text[];
    v_audit text[];
    v_evidence bigint := 0;
    v_n bigint;
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
              AND e.state IN ('succeeded','failed','blocked') AND e.finished_at_ms < r.cutoff_ms
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
              AND e.state IN ('succeeded','failed','blocked') AND e.finished_at_ms < r.cutoff_ms
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

    -- Opens the fact triggers for this function's deletes only (they also require the owner
    -- as current user); closed again below, and discarded with the transaction on any error.
    PERFORM set_config('resolver.prune_active', 'on', true);
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
    -- `resolver audit verify --export` still walks the whole chain.
    DELETE FROM recovery_audit_chain AS l
    USING approved_action_recovery_resolutions AS res
    WHERE l.mutation_id = res.mutation_id AND res.dispatch_id = ANY (v_audit);
    -- Late evidence and its watch go by ON DELETE CASCADE from the resolution.
    DELETE FROM approved_action_recovery_resolutions WHERE dispatch_id = ANY (v_audit);
    DELETE FROM approved_action_dispatches WHERE dispatch_id = ANY (v_rows);
    PERFORM set_config('resolver.prune_active', 'off', true);

    dispatches := cardinality(v_settled);
    audit := cardinality(v_audit);
    evidence := v_evidence;
    remnants := cardinality(ARRAY(SELECT unnest(v_remnants) INTERSECT SELECT unnest(v_rows)));
    UPDATE recovery_prune_runs
    SET batches = batches + 1,
        dispatches_pruned = dispatches_pruned + dispatches,
        audit_pruned = audit_pruned + audit,
        evidence_pruned = evidence_pruned + evidence,
        last_batch_at_ms = resolver_now_ms(NULL)
    WHERE run_id = p_run_id;
    RETURN NEXT;
END
$$;


--
-- Name: resolver_prune_begin(bigint, boolean, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_prune_begin(p_cutoff_ms bigint, p_include_audit boolean, p_export_digest text, p_actor text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
DECLARE
    v_run_id bigint;
BEGIN
    IF p_cutoff_ms IS NULL OR p_cutoff_ms > resolver_now_ms(NULL) THEN
        RAISE EXCEPTION 'prune cut-off must be a time in the past'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_export_digest IS NOT NULL AND NOT p_export_digest ~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'an export digest is a lowercase hex sha256'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(p_include_audit, true) AND p_export_digest IS NULL THEN
        RAISE EXCEPTION 'pruning audit facts requires the sha256 of their export'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO recovery_prune_runs (started_at_ms, cutoff_ms, include_audit, export_digest,
                                     db_user, actor)
    VALUES (resolver_now_ms(NULL), p_cutoff_ms, p_include_audit, p_export_digest,
            session_user, left(p_actor, 128))
    RETURNING run_id INTO v_run_id;
    RETURN v_run_id;
END
$_$;


--
-- Name: resolver_prune_candidates(bigint, boolean, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_prune_candidates(p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer) RETURNS TABLE(dispatch_id text, audited boolean, record jsonb)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    WITH ids AS (
        (SELECT c.dispatch_id
         FROM approved_action_recovery_controls AS c
         JOIN approved_action_executions AS e USING (dispatch_id)
         WHERE c.dispatch_id > p_after
           AND c.status = 'resolved' AND c.closed_at_ms < p_cutoff_ms
           AND e.state IN ('succeeded','failed','blocked') AND e.finished_at_ms < p_cutoff_ms
         ORDER BY c.dispatch_id
         LIMIT least(p_limit, 10000))
        UNION ALL
        (SELECT res.dispatch_id
         FROM approved_action_recovery_resolutions AS res
         WHERE p_include_audit AND res.dispatch_id > p_after
           AND res.resolved_at_ms < p_cutoff_ms
           AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                           WHERE e.dispatch_id = res.dispatch_id)
         ORDER BY res.dispatch_id
         LIMIT least(p_limit, 10000))
    ),
    page AS (SELECT i.dispatch_id FROM ids AS i ORDER BY i.dispatch_id
             LIMIT least(p_limit, 10000))
    SELECT d.dispatch_id, res.dispatch_id IS NOT NULL,
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
    FROM page AS p
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_resolutions AS res ON res.dispatch_id = d.dispatch_id
    ORDER BY d.dispatch_id
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
    LANGUAGE plpgsql SECURITY DEFINER
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
           d.action_type, d.action_digest, d.idempotency_key, e.attempt, e.started_at_ms,
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
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    identity record;
    field text;
BEGIN
    SELECT * INTO identity FROM resolver_receipt_identity(
        p_dispatch_id, p_owner, p_token, p_version, NULL);
    IF p_receipt IS NULL OR jsonb_typeof(p_receipt) <> 'object' THEN
        RAISE EXCEPTION 'p_receipt must be a JSON object (receipt v1)'
            USING ERRCODE = 'RS005';
    END IF;
    -- Drivers hand bigints back as strings; a receipt's numbers are JSON integers.
    FOREACH field IN ARRAY ARRAY['v', 'attempt', 'started_at_ms', 'finished_at_ms'] LOOP
        IF p_receipt ? field AND jsonb_typeof(p_receipt -> field) <> 'number' THEN
            RAISE EXCEPTION 'receipt field % must be a JSON integer, not a JSON %', field,
                jsonb_typeof(p_receipt -> field)
                USING ERRCODE = 'RS005',
                      HINT = 'convert the bigint your driver returned as a string (Number() in JavaScript)';
        END IF;
    END LOOP;
    -- The receipt must name this execution; shape and signature are the provider's to
    -- verify when it reads (a tampered receipt is a `conflict` there, never success).
    FOREACH field IN ARRAY ARRAY['dispatch_id', 'approval_request_id', 'project_id',
                                 'action_type', 'action_digest', 'idempotency_key',
                                 'attempt', 'started_at_ms'] LOOP
        IF (p_receipt -> field) IS DISTINCT FROM (to_jsonb(identity) -> field) THEN
            RAISE EXCEPTION 'receipt field % does not match dispatch %', field,
                quote_literal(p_dispatch_id)
                USING ERRCODE = 'RS005';
        END IF;
    END LOOP;
    INSERT INTO action_receipts AS a (dispatch_id, receipt)
    VALUES (p_dispatch_id, p_receipt)
    RETURNING a.dispatch_id, a.written_at_ms INTO dispatch_id, written_at_ms;
    RETURN NEXT;
END
$$;


--
-- Name: resolver_record_late_evidence(json, text, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_record_late_evidence(p_items json, p_owner text, p_window_ms bigint, p_now_ms bigint DEFAULT NULL::bigint) RETURNS TABLE(dispatch_id text, observation_id text, recorded boolean, agrees boolean)
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    WITH now AS (SELECT resolver_now_ms(p_now_ms) AS ms),
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
               i.finding IN ('verified_succeeded', 'verified_failed') AS verified,
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
BEGIN
    -- Nested, so an UPDATE never evaluates the check (plpgsql does not short-circuit AND).
    IF TG_OP = 'DELETE' THEN
        IF coalesce(current_setting('resolver.prune_active', true), '') = 'on'
           AND (SELECT relowner FROM pg_class WHERE oid = TG_RELID)
               = (SELECT oid FROM pg_roles WHERE rolname = current_user) THEN
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
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
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
            role_binding_version, auth_time_ms, amr, authorized_at_ms)
        SELECT r.mutation_id, a.user_id, 'approval.recover', a.project_id, a.project_version,
               a.role_binding_version, a.auth_time_ms, a.amr, a.authorized_at_ms
        FROM resolution AS r,
             json_to_recordset(p_authorizations) AS a(
                 user_id text, project_id text, project_version bigint,
                 role_binding_version bigint, auth_time_ms bigint, amr text[],
                 authorized_at_ms bigint)
        RETURNING mutation_id, user_id, permission, project_id, project_version,
                  role_binding_version, auth_time_ms, amr, authorized_at_ms
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
                               a.authorized_at_ms)
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


--
-- Name: resolver_two_people_present(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.resolver_two_people_present() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF resolver_needs_two_people(
           (SELECT d.action_type FROM approved_action_dispatches AS d
            WHERE d.dispatch_id = NEW.dispatch_id), NEW.outcome)
       AND (SELECT count(DISTINCT a.user_id) FROM recovery_authorizations AS a
            WHERE a.mutation_id = NEW.mutation_id) < 2 THEN
        RAISE EXCEPTION 'dispatch % needs two people for this decision: its resolution has fewer than two authorizations',
            quote_literal(NEW.dispatch_id)
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
    action_digest text NOT NULL,
    idempotency_key text NOT NULL,
    schema_version smallint NOT NULL,
    supersedes_dispatch_id text,
    created_at_ms bigint DEFAULT ((EXTRACT(epoch FROM clock_timestamp()) * (1000)::numeric))::bigint NOT NULL,
    CONSTRAINT ck_approved_action_dispatches_action_digest_hex CHECK (length(action_digest) = 64 AND action_digest !~ '[^0-9a-f]'),
    CONSTRAINT ck_approved_action_dispatches_bounded_ids CHECK (length(dispatch_id) <= 128 AND length(approval_request_id) <= 128 AND length(project_id) <= 128 AND length(idempotency_key) <= 128 AND length(action_type) <= 64),
    CONSTRAINT ck_approved_action_dispatches_no_self_supersede CHECK (supersedes_dispatch_id <> dispatch_id),
    CONSTRAINT ck_approved_action_dispatches_schema_version_positive CHECK (schema_version >= 1)
);


--
-- Name: approved_action_executions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approved_action_executions (
    dispatch_id text NOT NULL,
    state text NOT NULL,
    owner text NOT NULL,
    token uuid NOT NULL,
    version bigint NOT NULL,
    attempt integer NOT NULL,
    lease_expires_at_ms bigint NOT NULL,
    started_at_ms bigint,
    finished_at_ms bigint,
    result_code text,
    completion_mutation_id text,
    evidence_digest text,
    CONSTRAINT ck_approved_action_executions_counters_positive CHECK (version >= 1 AND attempt >= 1),
    CONSTRAINT ck_approved_action_executions_evidence_digest_hex CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT ck_approved_action_executions_finished_iff_terminal CHECK ((state IN ('succeeded','failed','blocked')) = (finished_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_executions_result_code_shape CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_executions_started_after_barrier CHECK (state = 'leased' OR started_at_ms IS NOT NULL),
    CONSTRAINT ck_approved_action_executions_state_known CHECK (state IN ('leased','executing','succeeded','failed','blocked'))
)
WITH (fillfactor='85');


--
-- Name: approved_action_recovery_controls; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approved_action_recovery_controls (
    dispatch_id text NOT NULL,
    status text NOT NULL,
    execution_version bigint NOT NULL,
    next_scan_at_ms bigint NOT NULL,
    recovery_owner text,
    recovery_token uuid,
    recovery_version bigint DEFAULT 0 NOT NULL,
    recovery_lease_expires_at_ms bigint,
    last_finding text,
    finding_count integer DEFAULT 0 NOT NULL,
    armed_at_ms bigint NOT NULL,
    manual_at_ms bigint,
    closed_by text,
    closed_at_ms bigint,
    completion_mutation_id text,
    finding_counts jsonb DEFAULT '{}'::jsonb NOT NULL,
    first_inspected_at_ms bigint,
    last_inspected_at_ms bigint,
    last_failure_class text,
    last_evidence_digest text,
    manual_reason text,
    CONSTRAINT ck_approved_action_recovery_controls_closed_by_known CHECK (closed_by IS NULL OR closed_by IN ('completion','automatic','manual')),
    CONSTRAINT ck_approved_action_recovery_controls_closed_iff_resolved CHECK ((status = 'resolved') = (closed_by IS NOT NULL AND closed_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_failure_class_known CHECK (((last_failure_class IS NULL) OR (last_failure_class = ANY (ARRAY['outage'::text, 'timeout'::text, 'configuration'::text, 'error'::text])))),
    CONSTRAINT ck_approved_action_recovery_controls_finding_counts_object CHECK ((jsonb_typeof(finding_counts) = 'object'::text)),
    CONSTRAINT ck_approved_action_recovery_controls_finding_known CHECK (last_finding IS NULL OR last_finding IN ('verified_succeeded','verified_failed','still_running','missing','conflict','unsupported','unavailable')),
    CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex CHECK (last_evidence_digest IS NULL OR (length(last_evidence_digest) = 64 AND last_evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT ck_approved_action_recovery_controls_lease_only_when_armed CHECK (status = 'armed' OR recovery_token IS NULL),
    CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape CHECK (manual_reason IS NULL OR (length(manual_reason) BETWEEN 1 AND 64 AND manual_reason !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_recovery_controls_recovery_lease_whole CHECK ((recovery_token IS NULL) = (recovery_lease_expires_at_ms IS NULL) AND (recovery_token IS NULL) = (recovery_owner IS NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_status_known CHECK (status IN ('armed','manual','resolved'))
)
WITH (fillfactor='90');


--
-- Name: approved_action_recovery_resolutions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approved_action_recovery_resolutions (
    resolution_id bigint NOT NULL,
    dispatch_id text NOT NULL,
    mutation_id text NOT NULL,
    source text NOT NULL,
    outcome text NOT NULL,
    finding text,
    evidence_digest text,
    result_code text,
    expected_execution_version bigint NOT NULL,
    actor_user_id text,
    reason_code text,
    resolved_at_ms bigint NOT NULL,
    CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified CHECK (source <> 'automatic' OR (finding IN ('verified_succeeded','verified_failed') AND evidence_digest IS NOT NULL AND result_code IS NOT NULL AND actor_user_id IS NULL AND outcome <> 'blocked')),
    CONSTRAINT ck_approved_action_recovery_resolutions_evidence_digest_hex CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_manual_has_actor CHECK (source <> 'manual' OR (actor_user_id IS NOT NULL AND reason_code IS NOT NULL)),
    CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known CHECK (outcome IN ('succeeded','failed','blocked')),
    CONSTRAINT ck_approved_action_recovery_resolutions_reason_code_shape CHECK (reason_code IS NULL OR (length(reason_code) BETWEEN 1 AND 64 AND reason_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_result_code_shape CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_source_known CHECK (source IN ('automatic','manual'))
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
    prev_hash text NOT NULL,
    hash text NOT NULL,
    recorded_at_ms bigint NOT NULL,
    CONSTRAINT ck_recovery_audit_chain_content_bounded CHECK (octet_length(content) <= 8192),
    CONSTRAINT ck_recovery_audit_chain_hashes_hex CHECK (((prev_hash ~ '^[0-9a-f]{64}$'::text) AND (hash ~ '^[0-9a-f]{64}$'::text))),
    CONSTRAINT ck_recovery_audit_chain_seq_positive CHECK (seq >= 1)
);


--
-- Name: recovery_audit_head; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_audit_head (
    id smallint NOT NULL,
    seq bigint NOT NULL,
    hash text NOT NULL,
    prev_hash text NOT NULL,
    CONSTRAINT ck_recovery_audit_head_hashes_hex CHECK (((prev_hash ~ '^[0-9a-f]{64}$'::text) AND (hash ~ '^[0-9a-f]{64}$'::text))),
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
    CONSTRAINT ck_recovery_authorizations_permission_known CHECK (permission = 'approval.recover')
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
-- Name: recovery_late_evidence; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.recovery_late_evidence (
    observation_id text NOT NULL,
    dispatch_id text NOT NULL,
    decision_mutation_id text NOT NULL,
    finding text NOT NULL,
    agrees boolean NOT NULL,
    evidence_digest text NOT NULL,
    result_code text NOT NULL,
    observer text NOT NULL,
    observed_at_ms bigint NOT NULL,
    CONSTRAINT ck_recovery_late_evidence_digest_hex CHECK (evidence_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_late_evidence_finding_verified CHECK ((finding = ANY (ARRAY['verified_succeeded'::text, 'verified_failed'::text]))),
    CONSTRAINT ck_recovery_late_evidence_observation_id_shape CHECK ((observation_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'::text)),
    CONSTRAINT ck_recovery_late_evidence_result_code_shape CHECK ((result_code ~ '^[a-z0-9_.-]{1,64}$'::text))
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
    CONSTRAINT ck_recovery_late_watches_closed_reason_known CHECK ((((closed_at_ms IS NULL) AND (closed_reason IS NULL)) OR ((closed_at_ms IS NOT NULL) AND (closed_reason = ANY (ARRAY['observed'::text, 'window_elapsed'::text, 'unsupported'::text]))))),
    CONSTRAINT ck_recovery_late_watches_outcome_claimed CHECK ((decided_outcome = ANY (ARRAY['succeeded'::text, 'failed'::text])))
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
    CONSTRAINT ck_recovery_proposals_close_reason_code_shape CHECK (((close_reason_code IS NULL) OR (close_reason_code ~ '^[a-z0-9_.-]{1,64}$'::text))),
    CONSTRAINT ck_recovery_proposals_closed_as_known CHECK ((closed_as = ANY (ARRAY['confirmed'::text, 'withdrawn'::text, 'rejected'::text, 'voided'::text, 'expired'::text]))),
    CONSTRAINT ck_recovery_proposals_closed_at_with_closed_as CHECK (((closed_as IS NULL) = (closed_at_ms IS NULL))),
    CONSTRAINT ck_recovery_proposals_closed_by_person CHECK (((closed_as <> ALL (ARRAY['confirmed'::text, 'withdrawn'::text, 'rejected'::text])) OR ((closed_by IS NOT NULL) AND (closed_mutation_id IS NOT NULL) AND (close_reason_code IS NOT NULL)))),
    CONSTRAINT ck_recovery_proposals_evidence_digest_hex CHECK (((evidence_digest IS NULL) OR (evidence_digest ~ '^[0-9a-f]{64}$'::text))),
    CONSTRAINT ck_recovery_proposals_expires_after_proposed CHECK ((expires_at_ms > proposed_at_ms)),
    CONSTRAINT ck_recovery_proposals_outcome_known CHECK ((outcome = ANY (ARRAY['succeeded'::text, 'failed'::text, 'blocked'::text]))),
    CONSTRAINT ck_recovery_proposals_reason_code_shape CHECK ((reason_code ~ '^[a-z0-9_.-]{1,64}$'::text)),
    CONSTRAINT ck_recovery_proposals_second_person CHECK ((((closed_as <> 'withdrawn'::text) OR (closed_by = proposed_by)) AND ((closed_as <> ALL (ARRAY['confirmed'::text, 'rejected'::text])) OR (closed_by <> proposed_by))))
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
    export_digest text,
    batches bigint DEFAULT 0 NOT NULL,
    dispatches_pruned bigint DEFAULT 0 NOT NULL,
    audit_pruned bigint DEFAULT 0 NOT NULL,
    evidence_pruned bigint DEFAULT 0 NOT NULL,
    db_user text NOT NULL,
    actor text,
    CONSTRAINT ck_recovery_prune_runs_actor_bounded CHECK (length(actor) <= 128),
    CONSTRAINT ck_recovery_prune_runs_audit_needs_export CHECK (NOT include_audit OR export_digest IS NOT NULL),
    CONSTRAINT ck_recovery_prune_runs_export_digest_hex CHECK (export_digest IS NULL OR export_digest ~ '^[0-9a-f]{64}$')
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
    CONSTRAINT ck_recovery_two_person_rules_decision_known CHECK ((decision = ANY (ARRAY['confirm_succeeded'::text, 'confirm_failed'::text, 'abandon_unknown'::text]))),
    CONSTRAINT ck_recovery_two_person_rules_pattern_shape CHECK ((action_type_pattern ~ '^([a-z][a-z0-9_.-]{0,63}[*]?|[*])$'::text))
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

INSERT INTO public.action_receipts VALUES ('u-7874d15be4', '{"v": 1, "kid": "k-upgrade", "sig": "c280491c349547864c8a0e434343bf398116526caabeb29152c6e2f23c256f47", "attempt": 1, "outcome": "succeeded", "project_id": "proj-upgrade", "action_type": "db.mutation", "dispatch_id": "u-7874d15be4", "result_code": "applied", "action_digest": "6c19d6a7cb9df2757cdede4ebe737b17f324cb6b6eb823265deda3c876548460", "started_at_ms": 1796547174189, "finished_at_ms": 1796547174230, "idempotency_key": "idem-u-7874d15be4", "approval_request_id": "ar-u-7874d15be4", "receipt_identity_digest": "93cfc26732e504403c4b66473e28dab0bab085d3f9e8cdce3dea1738a6300215"}', 1796547174238);
INSERT INTO public.action_receipts VALUES ('u-3f51d9c5ca', '{"v": 1, "kid": "k-later", "sig": "ee1a27b844246e4584ac0969fd7ce7e4b0e611e27826009776732255d3404250", "attempt": 1, "outcome": "succeeded", "project_id": "proj-upgrade", "action_type": "db.mutation", "dispatch_id": "u-3f51d9c5ca", "result_code": "applied", "action_digest": "a381e6c7a1fc3752293cfdf9b975bb4b4ab2913f15981c0f2745727f0c0da709", "started_at_ms": 1796547174387, "finished_at_ms": 1796547174395, "idempotency_key": "idem-u-3f51d9c5ca", "approval_request_id": "ar-u-3f51d9c5ca", "receipt_identity_digest": "bd9cc8f8b94d951934d375693577f1aad6f3861bc59254bcc8a01df8c890da63"}', 1796547174410);


--
-- Data for Name: alembic_version; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.alembic_version VALUES ('0018_late_expire_index');


--
-- Data for Name: approved_action_dispatches; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.approved_action_dispatches VALUES ('u-c57ba4ec91', 'ar-u-c57ba4ec91', 'proj-upgrade', 'db.mutation', 'd4f2dcfb6071454e6b4bf105b51a7617f3fdd84d027c766e35bec2962a573046', 'idem-u-c57ba4ec91', 1, NULL, 1796547174143);
INSERT INTO public.approved_action_dispatches VALUES ('u-1227bc4f37', 'ar-u-1227bc4f37', 'proj-upgrade', 'db.mutation', 'de169ab4aca11d23bbd5f7f992198d5bc793a36be26d7311d988ff223af4e6f0', 'idem-u-1227bc4f37', 1, NULL, 1796547174152);
INSERT INTO public.approved_action_dispatches VALUES ('u-7874d15be4', 'ar-u-7874d15be4', 'proj-upgrade', 'db.mutation', '6c19d6a7cb9df2757cdede4ebe737b17f324cb6b6eb823265deda3c876548460', 'idem-u-7874d15be4', 1, NULL, 1796547174183);
INSERT INTO public.approved_action_dispatches VALUES ('u-3b8188609d', 'ar-u-3b8188609d', 'proj-upgrade', 'db.mutation', '4e84f76413b9f57091dafe8b7c4bbc2e75877ff40456dd3af2cc5823e7cd63f7', 'idem-u-3b8188609d', 1, NULL, 1796547174254);
INSERT INTO public.approved_action_dispatches VALUES ('u-a2c949293e', 'ar-u-a2c949293e', 'proj-upgrade', 'shell.exec', '90076dcfd40928976e7ab53aca9703c97b6fe4944cf7a8591ec5e6f0713d2942', 'idem-u-a2c949293e', 1, NULL, 1796547174292);
INSERT INTO public.approved_action_dispatches VALUES ('u-54b9c47853', 'ar-u-54b9c47853', 'proj-upgrade', 'payments.refund', '4b1feaae8803e8d1ec53fa45ae1b9d4aa17adb09590422ff0d181776619a7ec8', 'idem-u-54b9c47853', 1, NULL, 1796547174318);
INSERT INTO public.approved_action_dispatches VALUES ('u-ae09bce8a3', 'ar-u-ae09bce8a3', 'proj-upgrade', 'payments.charge', '1429b85bfc3482c997b2beace20520c2f4e18b6ea83415cafd6fa1a6891913c5', 'idem-u-ae09bce8a3', 1, NULL, 1796547174340);
INSERT INTO public.approved_action_dispatches VALUES ('u-8666f6798c', 'ar-u-8666f6798c', 'proj-upgrade', 'payments.capture', '808cf23e04dbaccc3cc6137f42e2a841fa21d9b64082521de5537bb61c74dfd6', 'idem-u-8666f6798c', 1, NULL, 1796547174358);
INSERT INTO public.approved_action_dispatches VALUES ('u-3f51d9c5ca', 'ar-u-3f51d9c5ca', 'proj-upgrade', 'db.mutation', 'a381e6c7a1fc3752293cfdf9b975bb4b4ab2913f15981c0f2745727f0c0da709', 'idem-u-3f51d9c5ca', 1, NULL, 1796547174377);
INSERT INTO public.approved_action_dispatches VALUES ('u-1b49966b3a', 'ar-u-1b49966b3a', 'proj-upgrade', 'run.create', 'd21919407334cde35f2585855e1c9994330744d958277dd2221b5495ab5c9543', 'idem-u-1b49966b3a', 1, NULL, 1796547174425);
INSERT INTO public.approved_action_dispatches VALUES ('u-efa9d32327', 'ar-u-efa9d32327', 'proj-upgrade', 'package.install', '6e83e2a877599c0b5a824f35b64b121a3d6ec2b839f703211d1f471b5c567aba', 'idem-u-efa9d32327', 1, NULL, 1796547174446);


--
-- Data for Name: approved_action_executions; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.approved_action_executions VALUES ('u-c57ba4ec91', 'leased', 'upgrade-executor', 'a2e78092-660a-48a7-8f18-e041a40b3e0e', 1, 1, 1796547174446, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('u-1227bc4f37', 'executing', 'upgrade-executor', 'b2efd67a-2588-407f-a66f-2683604d3f1a', 3, 1, 1796547174479, 1796547174166, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('u-3b8188609d', 'executing', 'upgrade-executor', '338dae7c-a499-4ce0-acd9-a33cbed9dd84', 2, 1, 1796547174585, 1796547174285, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('u-ae09bce8a3', 'executing', 'upgrade-executor', '09883fee-1759-4d39-8e1d-1a6c0921d63a', 2, 1, 1796547174649, 1796547174349, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('u-8666f6798c', 'executing', 'upgrade-executor', '9c1391d5-a105-4484-b7cb-d50c9278b810', 2, 1, 1796547174674, 1796547174374, NULL, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('u-1b49966b3a', 'succeeded', 'upgrade-executor', 'af687efd-fbca-4f16-95dd-2d0bcc0004a6', 3, 1, 1796547174739, 1796547174439, 1796547176393, 'ok', NULL, '1225862681ff06e479421cf8f497f1da28ad7fcc673c29c0be8783d519d68111');
INSERT INTO public.approved_action_executions VALUES ('u-7874d15be4', 'succeeded', 'upgrade-executor', 'cb664005-5bf0-4be2-888d-3c2924845721', 3, 1, 1796547174489, 1796547174189, 1796547176393, 'applied', NULL, '5b697e718a12d614b864bdc2be329c14368d3b7c8b6967f86018afca0e8840ef');
INSERT INTO public.approved_action_executions VALUES ('u-efa9d32327', 'succeeded', 'upgrade-executor', '24611264-697a-49f7-915b-76b05f7360ac', 3, 1, 1796547174754, 1796547174454, 1796547176393, 'installed', NULL, '01be657fe0d624cec6fbacd4f976dcc4f5f11dbf0125a40aafea3e0c063b7592');
INSERT INTO public.approved_action_executions VALUES ('u-a2c949293e', 'failed', 'upgrade-executor', 'fb7d028f-eb43-42d6-822e-9fbcb5a9d18b', 3, 1, 1796547174609, 1796547174309, 1796547176444, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('u-54b9c47853', 'succeeded', 'upgrade-executor', '1087e498-347d-44b4-a779-efcff9e82d3a', 3, 1, 1796547174634, 1796547174334, 1796547176470, NULL, NULL, NULL);
INSERT INTO public.approved_action_executions VALUES ('u-3f51d9c5ca', 'failed', 'upgrade-executor', 'eb1746d9-019f-4d50-ad4a-e7ca8410de5e', 3, 1, 1796547174687, 1796547174387, 1796547176518, NULL, NULL, NULL);


--
-- Data for Name: approved_action_recovery_controls; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.approved_action_recovery_controls VALUES ('u-1227bc4f37', 'armed', 3, 1796547179532, NULL, NULL, 3, NULL, 'missing', 1, 1796547174166, NULL, NULL, NULL, NULL, '{"missing": 1}', 1796547176393, 1796547176393, NULL, NULL, NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('u-1b49966b3a', 'resolved', 3, 1796547236374, NULL, NULL, 2, NULL, 'verified_succeeded', 1, 1796547174439, NULL, 'automatic', 1796547176393, NULL, '{"verified_succeeded": 1}', 1796547176393, 1796547176393, NULL, '1225862681ff06e479421cf8f497f1da28ad7fcc673c29c0be8783d519d68111', NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('u-3b8188609d', 'armed', 2, 1796547180945, NULL, NULL, 2, NULL, 'missing', 1, 1796547174285, NULL, NULL, NULL, NULL, '{"missing": 1}', 1796547176393, 1796547176393, NULL, NULL, NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('u-7874d15be4', 'resolved', 3, 1796547236374, NULL, NULL, 2, NULL, 'verified_succeeded', 1, 1796547174189, NULL, 'automatic', 1796547176393, NULL, '{"verified_succeeded": 1}', 1796547176393, 1796547176393, NULL, '5b697e718a12d614b864bdc2be329c14368d3b7c8b6967f86018afca0e8840ef', NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('u-8666f6798c', 'manual', 2, 1796547236374, NULL, NULL, 2, NULL, 'unsupported', 1, 1796547174374, 1796547176393, NULL, NULL, NULL, '{"unsupported": 1}', 1796547176393, 1796547176393, NULL, NULL, 'unsupported');
INSERT INTO public.approved_action_recovery_controls VALUES ('u-ae09bce8a3', 'manual', 2, 1796547236374, NULL, NULL, 2, NULL, 'unsupported', 1, 1796547174349, 1796547176393, NULL, NULL, NULL, '{"unsupported": 1}', 1796547176393, 1796547176393, NULL, NULL, 'unsupported');
INSERT INTO public.approved_action_recovery_controls VALUES ('u-efa9d32327', 'resolved', 3, 1796547236374, NULL, NULL, 2, NULL, 'verified_succeeded', 1, 1796547174454, NULL, 'automatic', 1796547176393, NULL, '{"verified_succeeded": 1}', 1796547176393, 1796547176393, NULL, '01be657fe0d624cec6fbacd4f976dcc4f5f11dbf0125a40aafea3e0c063b7592', NULL);
INSERT INTO public.approved_action_recovery_controls VALUES ('u-a2c949293e', 'resolved', 3, 1796547236374, NULL, NULL, 3, NULL, 'unsupported', 1, 1796547174309, NULL, 'manual', 1796547176444, NULL, '{"unsupported": 1}', 1796547176393, 1796547176393, NULL, NULL, 'unsupported');
INSERT INTO public.approved_action_recovery_controls VALUES ('u-54b9c47853', 'resolved', 3, 1796547236374, NULL, NULL, 3, NULL, 'unsupported', 1, 1796547174334, NULL, 'manual', 1796547176470, NULL, '{"unsupported": 1}', 1796547176393, 1796547176393, NULL, NULL, 'unsupported');
INSERT INTO public.approved_action_recovery_controls VALUES ('u-3f51d9c5ca', 'resolved', 3, 1796547236374, NULL, NULL, 3, NULL, 'conflict', 1, 1796547174387, NULL, 'manual', 1796547176518, NULL, '{"conflict": 1}', 1796547176393, 1796547176393, NULL, NULL, 'conflict');


--
-- Data for Name: approved_action_recovery_resolutions; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.approved_action_recovery_resolutions VALUES (2, 'u-1b49966b3a', 'auto-ff2e78fb70bb4151989a46b01172d349-8', 'automatic', 'succeeded', 'verified_succeeded', '1225862681ff06e479421cf8f497f1da28ad7fcc673c29c0be8783d519d68111', 'ok', 2, NULL, NULL, 1796547176393);
INSERT INTO public.approved_action_recovery_resolutions VALUES (3, 'u-7874d15be4', 'auto-ff2e78fb70bb4151989a46b01172d349-1', 'automatic', 'succeeded', 'verified_succeeded', '5b697e718a12d614b864bdc2be329c14368d3b7c8b6967f86018afca0e8840ef', 'applied', 2, NULL, NULL, 1796547176393);
INSERT INTO public.approved_action_recovery_resolutions VALUES (4, 'u-efa9d32327', 'auto-ff2e78fb70bb4151989a46b01172d349-9', 'automatic', 'succeeded', 'verified_succeeded', '01be657fe0d624cec6fbacd4f976dcc4f5f11dbf0125a40aafea3e0c063b7592', 'installed', 2, NULL, NULL, 1796547176393);
INSERT INTO public.approved_action_recovery_resolutions VALUES (5, 'u-a2c949293e', 'm-alice-u-a2c949293e', 'manual', 'failed', 'unsupported', NULL, NULL, 2, 'alice', 'operator_checked', 1796547176444);
INSERT INTO public.approved_action_recovery_resolutions VALUES (6, 'u-54b9c47853', 'm-bob-u-54b9c47853', 'manual', 'succeeded', 'unsupported', NULL, NULL, 2, 'alice', 'operator_checked', 1796547176470);
INSERT INTO public.approved_action_recovery_resolutions VALUES (7, 'u-3f51d9c5ca', 'm-bob-u-3f51d9c5ca', 'manual', 'failed', 'conflict', NULL, NULL, 2, 'bob', 'operator_checked', 1796547176518);


--
-- Data for Name: package_commit_markers; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.package_commit_markers VALUES ('u-efa9d32327', 'cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc', 1796547174498);


--
-- Data for Name: package_install_records; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.package_install_records VALUES ('u-efa9d32327', 'idem-u-efa9d32327', '6e83e2a877599c0b5a824f35b64b121a3d6ec2b839f703211d1f471b5c567aba', 1, '1.4.2', 'cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc', 'succeeded', 'installed', 1796547174502);


--
-- Data for Name: package_install_targets; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.package_install_targets VALUES ('u-efa9d32327', '1.4.2', 'cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc', 1796547174488);


--
-- Data for Name: recovery_audit_chain; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_audit_chain VALUES (2, 'm-alice-u-a2c949293e', 'u-a2c949293e', '{"v" : 1, "dispatch_id" : "u-a2c949293e", "mutation_id" : "m-alice-u-a2c949293e", "source" : "manual", "outcome" : "failed", "overridden_finding" : "unsupported", "evidence_digest" : null, "expected_execution_version" : 2, "actor_user_id" : "alice", "reason_code" : "operator_checked", "resolved_at_ms" : 1796547176444, "authorizations" : [{"user_id" : "alice", "permission" : "approval.recover", "project_id" : "proj-upgrade", "project_version" : 1, "role_binding_version" : 1, "auth_time_ms" : 1796547176432, "amr" : ["pwd","mfa"], "authorized_at_ms" : 1796547176444}]}', '5ee324e239517923cea9a9a822158b65b390265903004eba48127b0c94ffe5c0', 'a3fbccdd813290a6c83387377b6b4c9aad6230d70e1680e814fe4ebeac64031d', 1796547176444);
INSERT INTO public.recovery_audit_chain VALUES (3, 'm-bob-u-54b9c47853', 'u-54b9c47853', '{"v" : 1, "dispatch_id" : "u-54b9c47853", "mutation_id" : "m-bob-u-54b9c47853", "source" : "manual", "outcome" : "succeeded", "overridden_finding" : "unsupported", "evidence_digest" : null, "expected_execution_version" : 2, "actor_user_id" : "alice", "reason_code" : "operator_checked", "resolved_at_ms" : 1796547176470, "authorizations" : [{"user_id" : "alice", "permission" : "approval.recover", "project_id" : "proj-upgrade", "project_version" : 1, "role_binding_version" : 1, "auth_time_ms" : 1796547176457, "amr" : ["pwd","mfa"], "authorized_at_ms" : 1796547176460}, {"user_id" : "bob", "permission" : "approval.recover", "project_id" : "proj-upgrade", "project_version" : 1, "role_binding_version" : 1, "auth_time_ms" : 1796547176466, "amr" : ["pwd","mfa"], "authorized_at_ms" : 1796547176470}]}', 'a3fbccdd813290a6c83387377b6b4c9aad6230d70e1680e814fe4ebeac64031d', 'b18b08b4afb9b8092d7be6156d4efc891e43bf99e3e1786f75cf065a4f074989', 1796547176470);
INSERT INTO public.recovery_audit_chain VALUES (4, 'm-bob-u-3f51d9c5ca', 'u-3f51d9c5ca', '{"v" : 1, "dispatch_id" : "u-3f51d9c5ca", "mutation_id" : "m-bob-u-3f51d9c5ca", "source" : "manual", "outcome" : "failed", "overridden_finding" : "conflict", "evidence_digest" : null, "expected_execution_version" : 2, "actor_user_id" : "bob", "reason_code" : "operator_checked", "resolved_at_ms" : 1796547176518, "authorizations" : [{"user_id" : "bob", "permission" : "approval.recover", "project_id" : "proj-upgrade", "project_version" : 1, "role_binding_version" : 1, "auth_time_ms" : 1796547176513, "amr" : ["pwd","mfa"], "authorized_at_ms" : 1796547176518}]}', 'b18b08b4afb9b8092d7be6156d4efc891e43bf99e3e1786f75cf065a4f074989', '1f046f1be2797f1078925363de8df707fa345c5d4075456c68b76c6596af6230', 1796547176518);


--
-- Data for Name: recovery_audit_head; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_audit_head VALUES (1, 4, '1f046f1be2797f1078925363de8df707fa345c5d4075456c68b76c6596af6230', 'b18b08b4afb9b8092d7be6156d4efc891e43bf99e3e1786f75cf065a4f074989');


--
-- Data for Name: recovery_authorizations; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_authorizations VALUES (2, 'm-alice-u-a2c949293e', 'alice', 'approval.recover', 'proj-upgrade', 1, 1, 1796547176432, '{pwd,mfa}', 1796547176444);
INSERT INTO public.recovery_authorizations VALUES (3, 'm-bob-u-54b9c47853', 'alice', 'approval.recover', 'proj-upgrade', 1, 1, 1796547176457, '{pwd,mfa}', 1796547176460);
INSERT INTO public.recovery_authorizations VALUES (4, 'm-bob-u-54b9c47853', 'bob', 'approval.recover', 'proj-upgrade', 1, 1, 1796547176466, '{pwd,mfa}', 1796547176470);
INSERT INTO public.recovery_authorizations VALUES (5, 'm-bob-u-3f51d9c5ca', 'bob', 'approval.recover', 'proj-upgrade', 1, 1, 1796547176513, '{pwd,mfa}', 1796547176518);


--
-- Data for Name: recovery_late_evidence; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_late_evidence VALUES ('late-de011df262a54ae2ba87d39ef0350770-0', 'u-3f51d9c5ca', 'm-bob-u-3f51d9c5ca', 'verified_succeeded', false, '0a884f42cb3d8a6386e39323902dcd95359ebccca21f29c1cc7216b248e5a665', 'applied', 'vm-9240', 1796547177562);


--
-- Data for Name: recovery_late_watches; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_late_watches VALUES ('u-3f51d9c5ca', 'm-bob-u-3f51d9c5ca', 'failed', 1796547176518, 1796547178562, NULL, NULL, 1, 1796547177562, 1796547177562, 'observed');


--
-- Data for Name: recovery_projects; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_projects VALUES ('proj-upgrade', 1);


--
-- Data for Name: recovery_proposals; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_proposals VALUES (1, 'u-54b9c47853', 'm-alice-u-54b9c47853', 'succeeded', 2, 'operator_checked', NULL, 'alice', 'proj-upgrade', 1, 1, 1796547176457, '{pwd,mfa}', 1796547176460, 1796550776460, 'confirmed', 1796547176470, 'bob', 'm-bob-u-54b9c47853', 'operator_checked', 1796547176466, '{pwd,mfa}');
INSERT INTO public.recovery_proposals VALUES (2, 'u-ae09bce8a3', 'm-alice-u-ae09bce8a3', 'succeeded', 2, 'operator_checked', NULL, 'alice', 'proj-upgrade', 1, 1, 1796547176477, '{pwd,mfa}', 1796547176482, 1796550776482, 'rejected', 1796547176488, 'bob', 'm-reject-u-ae09bce8a3', 'not_confirmed', 1796547176483, '{pwd,mfa}');
INSERT INTO public.recovery_proposals VALUES (3, 'u-8666f6798c', 'm-carol-u-8666f6798c', 'succeeded', 2, 'operator_checked', NULL, 'carol', 'proj-upgrade', 1, 1, 1796547176494, '{pwd,mfa}', 1796547176510, 1796550776510, NULL, NULL, NULL, NULL, NULL, NULL, NULL);


--
-- Data for Name: recovery_prune_runs; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_prune_runs VALUES (1, 1796547178039, 1796547178167, 1796547178051, 1796547176026, true, '6fb1b54b4ca0cf8fd93d95d10249447d6d8a3ae66dd600e0bf0fd8eba76250a1', 1, 3, 1, 0, 'postgres', 'vm');


--
-- Data for Name: recovery_role_bindings; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_role_bindings VALUES ('proj-upgrade', 'alice', 'approval.recover', 1);
INSERT INTO public.recovery_role_bindings VALUES ('proj-upgrade', 'bob', 'approval.recover', 1);
INSERT INTO public.recovery_role_bindings VALUES ('proj-upgrade', 'carol', 'approval.recover', 1);


--
-- Data for Name: recovery_two_person_rules; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.recovery_two_person_rules VALUES ('payments.*', 'confirm_succeeded');


--
-- Data for Name: run_origin_facts; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.run_origin_facts VALUES ('run-u-1b49966b3a', 'u-1b49966b3a', 'idem-u-1b49966b3a', 'proj-upgrade', 'd21919407334cde35f2585855e1c9994330744d958277dd2221b5495ab5c9543', 1, 'succeeded', 'ok', 1796547174472, 1);


--
-- Name: approved_action_recovery_resolutions_resolution_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.approved_action_recovery_resolutions_resolution_id_seq', 7, true);


--
-- Name: recovery_authorizations_authorization_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.recovery_authorizations_authorization_id_seq', 5, true);


--
-- Name: recovery_proposals_proposal_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.recovery_proposals_proposal_id_seq', 3, true);


--
-- Name: recovery_prune_runs_run_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.recovery_prune_runs_run_id_seq', 1, true);


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

CREATE INDEX ix_recovery_controls_due ON public.approved_action_recovery_controls USING btree (next_scan_at_ms, dispatch_id) WHERE (status = 'armed'::text);


--
-- Name: ix_recovery_controls_manual; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_controls_manual ON public.approved_action_recovery_controls USING btree (manual_at_ms, dispatch_id) WHERE (status = 'manual'::text);


--
-- Name: ix_recovery_controls_settled; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_controls_settled ON public.approved_action_recovery_controls USING btree (closed_at_ms, dispatch_id) WHERE (status = 'resolved'::text);


--
-- Name: ix_recovery_controls_waiting; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_controls_waiting ON public.approved_action_recovery_controls USING btree (first_inspected_at_ms, dispatch_id) WHERE ((status = 'armed'::text) AND (first_inspected_at_ms IS NOT NULL));


--
-- Name: ix_recovery_late_watches_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_late_watches_open ON public.recovery_late_watches USING btree (next_scan_at_ms, dispatch_id) WHERE (closed_at_ms IS NULL);


--
-- Name: ix_recovery_late_watches_open_decided; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_late_watches_open_decided ON public.recovery_late_watches USING btree (decided_at_ms, dispatch_id) WHERE (closed_at_ms IS NULL);


--
-- Name: ix_recovery_proposals_dispatch_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_proposals_dispatch_id ON public.recovery_proposals USING btree (dispatch_id);


--
-- Name: ix_recovery_proposals_open; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX ix_recovery_proposals_open ON public.recovery_proposals USING btree (dispatch_id) WHERE (closed_as IS NULL);


--
-- Name: ix_recovery_resolutions_manual; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_recovery_resolutions_manual ON public.approved_action_recovery_resolutions USING btree (resolved_at_ms, resolution_id) WHERE (source = 'manual'::text);


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
-- Name: approved_action_executions approved_action_executions_born_leased; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_executions_born_leased AFTER INSERT ON public.approved_action_executions FOR EACH ROW WHEN (((new.state <> 'leased'::text) OR (new.version <> 1) OR (new.attempt <> 1) OR (new.started_at_ms IS NOT NULL) OR (new.finished_at_ms IS NOT NULL) OR (new.result_code IS NOT NULL) OR (new.completion_mutation_id IS NOT NULL) OR (new.evidence_digest IS NOT NULL))) EXECUTE FUNCTION public.resolver_guard_insert();


--
-- Name: approved_action_executions approved_action_executions_control_in_step; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER approved_action_executions_control_in_step AFTER UPDATE OF version ON public.approved_action_executions DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((new.version <> old.version) AND (new.state <> ALL (ARRAY['succeeded'::text, 'failed'::text, 'blocked'::text])))) EXECUTE FUNCTION public.resolver_check_control_in_step();


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

CREATE TRIGGER approved_action_executions_state_machine AFTER UPDATE ON public.approved_action_executions FOR EACH ROW WHEN (((old.state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'blocked'::text])) OR (new.dispatch_id <> old.dispatch_id) OR (NOT ((new.state = old.state) OR ((old.state = 'leased'::text) AND (new.state = 'executing'::text)) OR ((old.state = 'executing'::text) AND (new.state = ANY (ARRAY['succeeded'::text, 'failed'::text, 'blocked'::text]))))) OR (new.version < old.version) OR (new.attempt < old.attempt) OR ((new.version = old.version) AND ((new.lease_expires_at_ms > old.lease_expires_at_ms) OR (new.state <> old.state) OR (new.owner <> old.owner) OR (new.token <> old.token))) OR ((old.started_at_ms IS NOT NULL) AND (new.started_at_ms IS DISTINCT FROM old.started_at_ms)))) EXECUTE FUNCTION public.resolver_guard_execution();


--
-- Name: approved_action_executions approved_action_executions_void_proposals; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_executions_void_proposals AFTER UPDATE ON public.approved_action_executions REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION public.resolver_proposals_void();


--
-- Name: approved_action_recovery_controls approved_action_recovery_controls_armed_in_step; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER approved_action_recovery_controls_armed_in_step AFTER INSERT ON public.approved_action_recovery_controls DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((new.status <> 'resolved'::text)) EXECUTE FUNCTION public.resolver_check_control_in_step();


--
-- Name: approved_action_recovery_controls approved_action_recovery_controls_born_armed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_recovery_controls_born_armed AFTER INSERT ON public.approved_action_recovery_controls FOR EACH ROW WHEN (((new.status <> 'armed'::text) OR (new.recovery_token IS NOT NULL) OR (new.closed_by IS NOT NULL))) EXECUTE FUNCTION public.resolver_guard_insert();


--
-- Name: approved_action_recovery_controls approved_action_recovery_controls_in_step; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER approved_action_recovery_controls_in_step AFTER UPDATE OF execution_version ON public.approved_action_recovery_controls DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((new.status <> 'resolved'::text) AND (new.execution_version <> old.execution_version))) EXECUTE FUNCTION public.resolver_check_control_in_step();


--
-- Name: approved_action_recovery_controls approved_action_recovery_controls_state_machine; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_recovery_controls_state_machine AFTER UPDATE ON public.approved_action_recovery_controls FOR EACH ROW WHEN (((old.status = 'resolved'::text) OR (new.dispatch_id <> old.dispatch_id) OR (new.execution_version < old.execution_version) OR (new.recovery_version < old.recovery_version) OR ((new.recovery_version = old.recovery_version) AND ((new.recovery_token IS DISTINCT FROM old.recovery_token) OR (new.recovery_lease_expires_at_ms > old.recovery_lease_expires_at_ms))))) EXECUTE FUNCTION public.resolver_guard_control();


--
-- Name: approved_action_recovery_resolutions approved_action_recovery_resolutions_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_recovery_resolutions_immutable BEFORE DELETE OR UPDATE ON public.approved_action_recovery_resolutions FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: approved_action_recovery_resolutions approved_action_recovery_resolutions_late_watch; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approved_action_recovery_resolutions_late_watch AFTER INSERT ON public.approved_action_recovery_resolutions FOR EACH ROW WHEN (((new.source = 'manual'::text) AND (new.outcome = ANY (ARRAY['succeeded'::text, 'failed'::text])) AND (new.finding IS DISTINCT FROM 'unsupported'::text))) EXECUTE FUNCTION public.resolver_open_late_watch();


--
-- Name: approved_action_recovery_resolutions approved_action_recovery_resolutions_two_people; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER approved_action_recovery_resolutions_two_people AFTER INSERT ON public.approved_action_recovery_resolutions DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((new.source = 'manual'::text)) EXECUTE FUNCTION public.resolver_two_people_present();


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
-- Name: recovery_audit_chain recovery_audit_chain_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_audit_chain_immutable BEFORE DELETE OR UPDATE ON public.recovery_audit_chain FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: recovery_authorizations recovery_authorizations_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_authorizations_immutable BEFORE DELETE OR UPDATE ON public.recovery_authorizations FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: recovery_late_evidence recovery_late_evidence_immutable; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_late_evidence_immutable BEFORE DELETE OR UPDATE ON public.recovery_late_evidence FOR EACH ROW EXECUTE FUNCTION public.resolver_reject_mutation();


--
-- Name: recovery_proposals recovery_proposals_close_once; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER recovery_proposals_close_once BEFORE UPDATE ON public.recovery_proposals FOR EACH ROW EXECUTE FUNCTION public.resolver_proposal_close_once();


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
-- Name: FUNCTION resolver_audit_authorization(p_user_id text, p_permission text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_authorized_at_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_audit_authorization(p_user_id text, p_permission text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_authorized_at_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_audit_content(p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text, p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text, p_reason_code text, p_resolved_at_ms bigint, p_authorizations json); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_audit_content(p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text, p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text, p_reason_code text, p_resolved_at_ms bigint, p_authorizations json) FROM PUBLIC;


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
-- Name: FUNCTION resolver_commit_manual(p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_max_auth_age_ms bigint, p_clock_leeway_ms bigint, p_now_ms bigint, p_proposal_ttl_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_commit_manual(p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_max_auth_age_ms bigint, p_clock_leeway_ms bigint, p_now_ms bigint, p_proposal_ttl_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_commit_page(p_items json, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_commit_page(p_items json, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_commit_wait_controls(p_ids text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_commit_wait_controls(p_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION resolver_commit_wait_executions(p_ids text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_commit_wait_executions(p_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION resolver_dispatch_create(p_dispatch_id text, p_approval_request_id text, p_project_id text, p_action_type text, p_action_digest text, p_idempotency_key text, p_schema_version integer, p_supersedes_dispatch_id text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_dispatch_create(p_dispatch_id text, p_approval_request_id text, p_project_id text, p_action_type text, p_action_digest text, p_idempotency_key text, p_schema_version integer, p_supersedes_dispatch_id text) FROM PUBLIC;


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
-- Name: FUNCTION resolver_finding_status(p_finding text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_finding_status(p_finding text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_guard_control(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_guard_control() FROM PUBLIC;


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
-- Name: FUNCTION resolver_is_id(p_value text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_is_id(p_value text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_needs_two_people(p_action_type text, p_outcome text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_needs_two_people(p_action_type text, p_outcome text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_open_late_watch(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_open_late_watch() FROM PUBLIC;


--
-- Name: FUNCTION resolver_proposal_close(p_dispatch_id text, p_mutation_id text, p_action text, p_reason_code text, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_max_auth_age_ms bigint, p_clock_leeway_ms bigint, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_proposal_close(p_dispatch_id text, p_mutation_id text, p_action text, p_reason_code text, p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_max_auth_age_ms bigint, p_clock_leeway_ms bigint, p_now_ms bigint) FROM PUBLIC;


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
-- Name: FUNCTION resolver_protocol_now_ms(p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_protocol_now_ms(p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_protocol_refuse(p_step text, p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_now_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_protocol_refuse(p_step text, p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_now_ms bigint) FROM PUBLIC;


--
-- Name: FUNCTION resolver_prune_batch(p_run_id bigint, p_limit integer, p_dispatch_ids text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_prune_batch(p_run_id bigint, p_limit integer, p_dispatch_ids text[]) FROM PUBLIC;


--
-- Name: FUNCTION resolver_prune_begin(p_cutoff_ms bigint, p_include_audit boolean, p_export_digest text, p_actor text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_prune_begin(p_cutoff_ms bigint, p_include_audit boolean, p_export_digest text, p_actor text) FROM PUBLIC;


--
-- Name: FUNCTION resolver_prune_candidates(p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_prune_candidates(p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer) FROM PUBLIC;


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
-- Name: FUNCTION resolver_two_people_present(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.resolver_two_people_present() FROM PUBLIC;


--
-- PostgreSQL database dump complete
--

