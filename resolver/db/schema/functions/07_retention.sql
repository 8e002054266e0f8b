-- Retention: resolver_prune_batch prunes settled dispatches (the only way past the
-- insert-only triggers, which look for it on the call stack) and what else keeps retention
-- safe.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

-- A resolution outlives its execution under retention: an identity that was settled must never
-- get a new execution (a lease, whatever writes it), or an approved action could run twice.
-- The executions' birth trigger refuses it (resolver_execution_born, 04_executor_protocol.sql).

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
-- `authorization` is the deciding person's fact; `authorizations` every
-- person's, two for a two-person decision, so the export still holds one line per dispatch.
CREATE OR REPLACE FUNCTION resolver_prune_candidates(
    p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer,
    p_past_consumers boolean DEFAULT false)
RETURNS TABLE (dispatch_id text, audited boolean, record jsonb)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
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

-- Every registered outcome consumer, its cursor, when it last saved, and how many settled
-- dispatches older than the cut-off it holds back: those with an outcome record after its
-- cursor (what `resolver prune` reports, and what a run past consumers takes unread).
CREATE OR REPLACE FUNCTION resolver_prune_consumers(p_cutoff_ms bigint)
RETURNS TABLE (consumer text, cursor text, saved_at_ms bigint, holding bigint)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
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

-- Executable by PUBLIC by default; resolver/db/grants.sql grants what each role may run.
REVOKE EXECUTE ON FUNCTION
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
        'resolver_prune_candidates(bigint, boolean, text, integer, boolean)',
        'resolver_prune_consumers(bigint)',
        'resolver_prune_finish(bigint)',
        'resolver_prune_batch(bigint, integer, text[])',
        'resolver_prune_begin(bigint, boolean, text, text, boolean)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
