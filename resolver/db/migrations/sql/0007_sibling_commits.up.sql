-- Migration 0007_sibling_commits (up): each rule of the commits written once. The recovery lease
-- is released by one function, resolver_recovery_lease_released. The three commits become
-- siblings (resolver/db/schema/08_commits.sql): the page commit is resolver_commit_automatic
-- (resolver_commit_page stays, calling it, for replicas of the previous release), and the
-- manual commit, until now a statement of queries.sql, is resolver_commit_manual. The routing
-- of a finding to its control's status is one function, resolver_finding_status, and the
-- automatic commit answers the status it set.
-- Applied as it is by versions/0007_sibling_commits.py; never edited once released (the current
-- definitions live in resolver/db/schema/).

-- The one release of a recovery lease: a new recovery_version (the fence every holder of the
-- old lease fails on) and no owner, token or expiry. Every writer that ends a recovery lease
-- (a renewal, the three commits, a graceful hand-back) assigns these four columns from here:
--   SET (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
--       = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
-- A one-SELECT SQL function: the planner inlines it.
CREATE FUNCTION resolver_recovery_lease_released(p_recovery_version bigint)
RETURNS TABLE (
    recovery_version bigint, recovery_owner text, recovery_token uuid,
    recovery_lease_expires_at_ms bigint
)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_recovery_version + 1, NULL::text, NULL::uuid, NULL::bigint
$$;

REVOKE EXECUTE ON FUNCTION resolver_recovery_lease_released(bigint) FROM PUBLIC;

-- The renewal and the completion release the recovery lease through it.
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
        (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
            = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version)),
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
$$;

-- The one routing rule: the status a finding sends its control to. Verified evidence resolves
-- it, a conflict or an unsupported action goes to a human, anything else is re-armed for a
-- retry. The automatic commit applies it and answers it (the replica reports what the
-- database decided; it does not decide again).
CREATE FUNCTION resolver_finding_status(p_finding text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN p_finding IN ('verified_succeeded', 'verified_failed') THEN 'resolved'
        WHEN p_finding IN ('conflict', 'unsupported') THEN 'manual'
        ELSE 'armed'
    END
$$;

-- 1. The automatic commit of one claimed page (see queries.sql, recovery_commit_page).
CREATE FUNCTION resolver_commit_automatic(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, status text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    ids text[];
    verified_ids text[];
    now_ms bigint;
BEGIN
    SELECT array_agg(i.dispatch_id ORDER BY i.dispatch_id),
           array_agg(i.dispatch_id ORDER BY i.dispatch_id)
               FILTER (WHERE resolver_finding_status(i.finding) = 'resolved')
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
    -- nothing. The answer: each fenced dispatch id and the status its control took.
    RETURN QUERY
    WITH item AS (
        -- Every key of an item is one column (the replica writes them).
        SELECT * FROM json_to_recordset(p_items) AS i(
            dispatch_id text, recovery_token uuid, recovery_version bigint,
            execution_version bigint, finding text, result_code text, evidence_digest text,
            mutation_id text, delay_ms bigint)
    ),
    fenced AS (
        SELECT i.*, resolver_finding_status(i.finding) AS status
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
            last_finding = f.finding,
            finding_count = c.finding_count + 1,
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

-- 2. The manual commit: a human decision's authorization fact, resolution and terminal state
-- in one statement. Fenced on the grant and its project/role-binding versions (locked FOR
-- SHARE so a concurrent revocation waits or wins), authentication no older than the limit on
-- the database clock, the expected execution version, the execution being recovery_required
-- (lease expired on the database clock) and its control still open. No row: nothing applied
-- (the caller explains why). SECURITY INVOKER, like the automatic commit.
CREATE FUNCTION resolver_commit_manual(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text,
    p_reason_code text, p_expected_execution_version bigint, p_user_id text, p_project_id text,
    p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint,
    p_amr text[], p_max_auth_age_ms bigint, p_clock_leeway_ms bigint,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, version bigint, controls_closed bigint, authorizations bigint
)
LANGUAGE sql VOLATILE AS $$
    WITH now AS (SELECT resolver_now_ms(p_now_ms) AS ms),
    granted AS (
        SELECT b.project_id
        FROM recovery_role_bindings AS b
        JOIN recovery_projects AS p USING (project_id)
        WHERE b.project_id = p_project_id AND b.user_id = p_user_id
          AND b.permission = 'approval.recover'
          AND b.version = p_role_binding_version AND p.version = p_project_version
        FOR SHARE OF b, p
    ),
    settled AS (
        UPDATE approved_action_executions AS e
        SET state = p_outcome,
            version = e.version + 1,
            finished_at_ms = now.ms,
            evidence_digest = p_evidence_digest
        FROM now, approved_action_dispatches AS d
        WHERE e.dispatch_id = p_dispatch_id AND d.dispatch_id = e.dispatch_id
          AND d.project_id = p_project_id
          AND e.version = p_expected_execution_version
          AND e.state = 'executing' AND e.lease_expires_at_ms <= now.ms
          AND EXISTS (SELECT 1 FROM approved_action_recovery_controls AS oc
                      WHERE oc.dispatch_id = e.dispatch_id AND oc.status <> 'resolved')
          AND p_auth_time_ms >= now.ms - p_max_auth_age_ms
          AND p_auth_time_ms <= now.ms + p_clock_leeway_ms
          AND EXISTS (SELECT 1 FROM granted)
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
        INSERT INTO approved_action_recovery_resolutions (
            dispatch_id, mutation_id, source, outcome, evidence_digest,
            expected_execution_version, actor_user_id, reason_code, resolved_at_ms)
        SELECT s.dispatch_id, p_mutation_id, 'manual', p_outcome, p_evidence_digest,
               p_expected_execution_version, p_user_id, p_reason_code, s.finished_at_ms
        FROM settled AS s
        RETURNING mutation_id, resolved_at_ms
    ),
    authorization_fact AS (
        INSERT INTO recovery_authorizations (
            mutation_id, user_id, permission, project_id, project_version,
            role_binding_version, auth_time_ms, amr, authorized_at_ms)
        SELECT r.mutation_id, p_user_id, 'approval.recover', p_project_id, p_project_version,
               p_role_binding_version, p_auth_time_ms, p_amr, r.resolved_at_ms
        FROM resolution AS r
        RETURNING mutation_id
    )
    SELECT s.dispatch_id, s.version, (SELECT count(*) FROM closed),
           (SELECT count(*) FROM authorization_fact)
    FROM settled AS s
$$;

-- The page commit's name until migration 0007, kept for replicas of the previous release
-- during a rolling upgrade; it is the automatic commit under its old name.
CREATE OR REPLACE FUNCTION resolver_commit_page(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS SETOF text
LANGUAGE sql VOLATILE AS $$
    SELECT a.dispatch_id FROM resolver_commit_automatic(p_items, p_now_ms) AS a
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_finding_status(text),
    resolver_commit_automatic(json, bigint),
    resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint,
                           bigint, text[], bigint, bigint, bigint)
FROM PUBLIC;

-- Tables resolve in the migrated schema, whatever the caller's search_path (pg_temp last).
-- CREATE OR REPLACE drops a function's pin: it is set again.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_commit_automatic(json, bigint)',
        'resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint)',
        'resolver_commit_page(json, bigint)',
        'resolver_execution_renew(text, text, uuid, bigint, bigint, bigint)',
        'resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
