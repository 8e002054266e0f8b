-- Migration 0022_pods_use_database_clock (up): the pods decide on the database clock.
-- The commit functions the replicas (resolver_runtime) and the API (resolver_api) may call
-- took a clock override `p_now_ms` from any caller: a compromised pod could pass a future
-- time and decide on a live lease, or make a stale strong authentication look fresh. They now
-- read the clock through resolver_protocol_now_ms, the executor protocol's rule: a non-NULL
-- override is refused (RS005) unless the session user is a member of the schema owner (the
-- test suites). The pods pass NULL already; no signature changes.
-- Applied as it is by versions/0022_pods_use_database_clock.py; never edited once
-- released (the current definitions live in resolver/db/schema/).

CREATE OR REPLACE FUNCTION resolver_commit_automatic(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, status text)
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
    -- (migration 0016_commit_waits_skipped), and only what is still held after that is left out.
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
    terminal AS (
        UPDATE approved_action_executions AS e
        SET state = resolver_finding_outcome(f.finding),
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
            -- Why the evidence says what it says (migration 0020): the provider's bounded
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
               resolver_finding_outcome(f.finding),
               f.finding, f.evidence_digest, f.result_code, f.execution_version, now_ms
        FROM fenced AS f
        WHERE f.status = 'resolved'
    )
    SELECT f.dispatch_id, f.status FROM fenced AS f;
END
$$;

CREATE OR REPLACE FUNCTION resolver_commit_manual(
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
    now_ms := resolver_protocol_now_ms(p_now_ms);
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

CREATE OR REPLACE FUNCTION resolver_proposal_close(
    p_dispatch_id text, p_mutation_id text, p_action text, p_reason_code text,
    p_user_id text, p_project_id text, p_project_version bigint,
    p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[],
    p_max_auth_age_ms bigint, p_clock_leeway_ms bigint, p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (dispatch_id text, result text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
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
    now_ms := resolver_protocol_now_ms(p_now_ms);
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

-- CREATE OR REPLACE resets the functions' settings: pin their search_path again.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_commit_automatic(json, bigint)',
        'resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint, bigint)',
        'resolver_proposal_close(text, text, text, text, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint)',
        'resolver_record_late_evidence(json, text, bigint, bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
