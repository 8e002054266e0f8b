-- Migration 0007_each_rule_once (up): each rule of the commits written once. The three commits become
-- siblings (resolver/db/schema/06_commits.sql): the page commit is resolver_commit_automatic
-- (resolver_commit_page stays, calling it, for replicas of the previous release), and the
-- manual commit, until now a statement of queries.sql, is resolver_commit_manual.
-- Applied as it is by versions/0007_each_rule_once.py; never edited once released (the current
-- definitions live in resolver/db/schema/).

-- 1. The automatic commit of one claimed page (see queries.sql, recovery_commit_page).
CREATE FUNCTION resolver_commit_automatic(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE AS $$
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
            recovery_version = c.recovery_version + 1,
            recovery_owner = NULL,
            recovery_token = NULL,
            recovery_lease_expires_at_ms = NULL
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
    SELECT * FROM resolver_commit_automatic(p_items, p_now_ms)
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_commit_automatic(json, bigint),
    resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint,
                           bigint, text[], bigint, bigint, bigint)
FROM PUBLIC;

-- Tables resolve in the migrated schema, whatever the caller's search_path (pg_temp last).
-- CREATE OR REPLACE dropped resolver_commit_page's pin: it is set again.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_commit_automatic(json, bigint)',
        'resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint)',
        'resolver_commit_page(json, bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
