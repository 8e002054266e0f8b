-- Migration 0011_commit_skip_locked (up): the automatic commit locks with SKIP LOCKED. A row another
-- transaction holds (an operator's forgotten SELECT ... FOR UPDATE in psql) leaves its item
-- out of the commit as a lost fence, claimed again when its recovery lease lapses, instead of
-- making the whole page wait and fail on lock_timeout, page after page, behind one held row.
-- Same signature, same answers for every row nobody else holds.
-- Applied as it is by versions/0011_commit_skip_locked.py; never edited once released (the current
-- definitions live in resolver/db/schema/).

CREATE OR REPLACE FUNCTION resolver_commit_automatic(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, status text)
LANGUAGE plpgsql VOLATILE AS $$
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
    SELECT coalesce(array_agg(c.dispatch_id), '{}') INTO locked_controls
    FROM (SELECT c.dispatch_id FROM approved_action_recovery_controls AS c
          WHERE c.dispatch_id = ANY(ids)
          ORDER BY c.dispatch_id
          FOR UPDATE SKIP LOCKED) AS c;
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
            mutation_id text, delay_ms bigint)
    ),
    fenced AS (
        SELECT i.*, resolver_finding_status(i.finding) AS status
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

-- CREATE OR REPLACE resets the function's settings: tables resolve in the migrated schema
-- again, whatever the caller's search_path (pg_temp last). Its privileges are kept.
DO $$
BEGIN
    EXECUTE format(
        'ALTER FUNCTION resolver_commit_automatic(json, bigint) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;
