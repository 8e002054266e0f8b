-- Migration 0007_sibling_commits (down): undoes 0007_sibling_commits.up.sql, newest object first.

CREATE OR REPLACE FUNCTION resolver_commit_page(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS SETOF text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ids text[];
    verified_ids text[];
    now_ms bigint;
BEGIN
    SELECT array_agg(i.dispatch_id ORDER BY i.dispatch_id),
           array_agg(i.dispatch_id ORDER BY i.dispatch_id)
               FILTER (WHERE i.finding IN ('verified_succeeded', 'verified_failed'))
    INTO ids, verified_ids
    FROM json_to_recordset(p_items) AS i(dispatch_id text, finding text);
    -- Lock order, the same for every writer: executions (of verified items), then every
    -- control of the page, each in key order; then the fenced writes.
    IF verified_ids IS NOT NULL THEN
        PERFORM 1 FROM approved_action_executions AS e
        WHERE e.dispatch_id = ANY(verified_ids)
        ORDER BY e.dispatch_id
        FOR UPDATE;
    END IF;
    PERFORM 1 FROM approved_action_recovery_controls AS c
    WHERE c.dispatch_id = ANY(ids)
    ORDER BY c.dispatch_id
    FOR UPDATE;
    -- The database clock once the rows are ours: an execution lease is judged expired at
    -- the moment of the write, not before a lock wait.
    now_ms := resolver_now_ms(p_now_ms);
    -- With the rows locked, `fenced` is exactly the set whose recovery lease, open control,
    -- execution version and expired execution lease still hold; every write below applies
    -- to that set only, so each dispatch commits all-or-nothing and a stale item writes
    -- nothing. The fenced dispatch ids are the answer.
    RETURN QUERY
    WITH item AS (
        -- Every key of an item is one column (the replica writes them).
        SELECT * FROM json_to_recordset(p_items) AS i(
            dispatch_id text, recovery_token uuid, recovery_version bigint,
            execution_version bigint, finding text, result_code text, evidence_digest text,
            mutation_id text, delay_ms bigint)
    ),
    fenced AS (
        SELECT i.*, i.finding IN ('verified_succeeded', 'verified_failed') AS verified
        FROM item AS i
        JOIN approved_action_recovery_controls AS c
          ON c.dispatch_id = i.dispatch_id AND c.status = 'armed'
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
        WHERE e.dispatch_id = f.dispatch_id AND f.verified
    ),
    control AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = CASE WHEN f.verified THEN 'resolved'
                          WHEN f.finding IN ('conflict', 'unsupported') THEN 'manual'
                          ELSE 'armed' END,
            execution_version = c.execution_version + CASE WHEN f.verified THEN 1 ELSE 0 END,
            closed_by = CASE WHEN f.verified THEN 'automatic' END,
            closed_at_ms = CASE WHEN f.verified THEN now_ms END,
            manual_at_ms = CASE WHEN f.finding IN ('conflict', 'unsupported') THEN now_ms END,
            last_finding = f.finding,
            finding_count = c.finding_count + 1,
            next_scan_at_ms = CASE WHEN f.verified OR f.finding IN ('conflict', 'unsupported')
                                   THEN c.next_scan_at_ms ELSE now_ms + f.delay_ms END,
            recovery_version = c.recovery_version + 1,
            recovery_owner = NULL,
            recovery_token = NULL,
            recovery_lease_expires_at_ms = NULL
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
        WHERE f.verified
    )
    SELECT f.dispatch_id FROM fenced AS f;
END
$$;

DO $$
BEGIN
    EXECUTE format(
        'ALTER FUNCTION resolver_commit_page(json, bigint) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;

DROP FUNCTION IF EXISTS resolver_commit_manual(text, text, text, text, text, bigint, text, text,
    bigint, bigint, bigint, text[], bigint, bigint, bigint);

DROP FUNCTION IF EXISTS resolver_commit_automatic(json, bigint);

DROP FUNCTION IF EXISTS resolver_finding_status(text);

CREATE OR REPLACE FUNCTION resolver_execution_renew(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_lease_ms bigint,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, owner text, token uuid, version bigint, attempt integer,
    lease_expires_at_ms bigint, state text, controls_rearmed integer
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
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
    -- re-armed (the executor is alive after all).
    UPDATE approved_action_recovery_controls AS c
    SET execution_version = version,
        status = 'armed',
        manual_at_ms = NULL,
        recovery_version = c.recovery_version + 1,
        recovery_owner = NULL,
        recovery_token = NULL,
        recovery_lease_expires_at_ms = NULL,
        next_scan_at_ms = lease_expires_at_ms
    WHERE c.dispatch_id = p_dispatch_id AND c.status IN ('armed', 'manual');
    GET DIAGNOSTICS controls_rearmed = ROW_COUNT;
    RETURN NEXT;
END
$$;

CREATE OR REPLACE FUNCTION resolver_execution_complete(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_outcome text,
    p_result_code text, p_mutation_id text, p_evidence_digest text DEFAULT NULL,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, result text, state text, version bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
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
    IF NOT coalesce(p_mutation_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$', false) THEN
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
            recovery_version = c.recovery_version + 1,
            recovery_owner = NULL,
            recovery_token = NULL,
            recovery_lease_expires_at_ms = NULL
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
$$;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_execution_renew(text, text, uuid, bigint, bigint, bigint)',
        'resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;

DROP FUNCTION IF EXISTS resolver_recovery_lease_released(bigint);
