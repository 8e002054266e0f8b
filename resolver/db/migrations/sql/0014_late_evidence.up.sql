-- Migration 0014_late_evidence (up): late evidence after a human decision: the watch table
-- a manual decision opens by trigger, the late-evidence fact, and the fenced record.
-- One watch per manual decision that claims an outcome (succeeded or failed) about an action
-- a provider can still look at. Open while `closed_at_ms` is NULL; the partial index holds
-- open watches only, so the claim never scans closed history. Claimed like a control:
-- `watch_token` is rotated by every claim and fences the record; `next_scan_at_ms` moves to
-- the claim's lease expiry, so a replica that dies holding a watch hands it back by time.
-- The window is the worker's setting, applied on the database clock to `decided_at_ms`.
CREATE TABLE recovery_late_watches (
    dispatch_id text NOT NULL,
    decision_mutation_id text NOT NULL,
    decided_outcome text NOT NULL,
    decided_at_ms bigint NOT NULL,
    next_scan_at_ms bigint NOT NULL,
    watch_owner text,
    watch_token uuid,
    observations bigint NOT NULL DEFAULT 0,
    last_observed_at_ms bigint,
    closed_at_ms bigint,
    closed_reason text,
    CONSTRAINT pk_recovery_late_watches PRIMARY KEY (dispatch_id),
    CONSTRAINT fk_recovery_late_watches_dispatch_id FOREIGN KEY (dispatch_id)
        REFERENCES approved_action_recovery_resolutions (dispatch_id) ON DELETE CASCADE,
    CONSTRAINT ck_recovery_late_watches_outcome_claimed
        CHECK (decided_outcome IN ('succeeded', 'failed')),
    CONSTRAINT ck_recovery_late_watches_closed_reason_known
        CHECK ((closed_at_ms IS NULL AND closed_reason IS NULL)
               OR (closed_at_ms IS NOT NULL
                   AND closed_reason IN ('observed', 'window_elapsed', 'unsupported')))
);
CREATE INDEX ix_recovery_late_watches_open
    ON recovery_late_watches (next_scan_at_ms, dispatch_id)
    WHERE closed_at_ms IS NULL;

-- The late finding: at most one per dispatch (a verified finding closes the watch), never
-- changed afterwards. `agrees`: the finding says what the decision said.
CREATE TABLE recovery_late_evidence (
    observation_id text NOT NULL,
    dispatch_id text NOT NULL,
    decision_mutation_id text NOT NULL,
    finding text NOT NULL,
    agrees boolean NOT NULL,
    evidence_digest text NOT NULL,
    result_code text NOT NULL,
    observer text NOT NULL,
    observed_at_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_late_evidence PRIMARY KEY (observation_id),
    CONSTRAINT uq_recovery_late_evidence_dispatch_id UNIQUE (dispatch_id),
    CONSTRAINT fk_recovery_late_evidence_dispatch_id FOREIGN KEY (dispatch_id)
        REFERENCES approved_action_recovery_resolutions (dispatch_id) ON DELETE CASCADE,
    CONSTRAINT ck_recovery_late_evidence_finding_verified
        CHECK (finding IN ('verified_succeeded', 'verified_failed')),
    CONSTRAINT ck_recovery_late_evidence_digest_hex CHECK (evidence_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_late_evidence_result_code_shape
        CHECK (result_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT ck_recovery_late_evidence_observation_id_shape
        CHECK (observation_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$')
);
-- Insert-only, like the resolution it sits beside; retention removes both together.
CREATE TRIGGER recovery_late_evidence_immutable BEFORE UPDATE OR DELETE ON recovery_late_evidence
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

-- A manual decision opens its watch in the decision's own transaction, without touching the
-- manual commit. Not for an abandon (`blocked` claims no outcome to contradict) nor when the
-- finding it overrode was `unsupported` (no automatic provider can look).
CREATE FUNCTION resolver_open_late_watch() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO recovery_late_watches (
        dispatch_id, decision_mutation_id, decided_outcome, decided_at_ms, next_scan_at_ms)
    VALUES (NEW.dispatch_id, NEW.mutation_id, NEW.outcome, NEW.resolved_at_ms,
            NEW.resolved_at_ms);
    RETURN NULL;
END
$$;
CREATE TRIGGER approved_action_recovery_resolutions_late_watch
    AFTER INSERT ON approved_action_recovery_resolutions
    FOR EACH ROW
    WHEN (NEW.source = 'manual' AND NEW.outcome IN ('succeeded', 'failed')
          AND NEW.finding IS DISTINCT FROM 'unsupported')
    EXECUTE FUNCTION resolver_open_late_watch();

-- The record of one claimed page of watches (see queries.sql, late_watch_record): fenced on
-- the watch's token, its being open and inside the window on the database clock. A verified
-- finding inserts the late evidence and closes the watch; `unsupported` closes it (the
-- provider can never tell); anything else schedules the next look. Answers each fenced
-- dispatch id with the observation it took, whether it recorded evidence, and whether that
-- evidence agrees. A watch named twice (a stale and a fresh claim) is fenced once, on the
-- token it holds.
CREATE FUNCTION resolver_record_late_evidence(
    p_items json, p_owner text, p_window_ms bigint, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, observation_id text, recorded boolean, agrees boolean)
LANGUAGE sql VOLATILE AS $$
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

REVOKE EXECUTE ON FUNCTION
    resolver_open_late_watch(),
    resolver_record_late_evidence(json, text, bigint, bigint)
FROM PUBLIC;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_open_late_watch()',
        'resolver_record_late_evidence(json, text, bigint, bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;

-- Retention exports each pruned decision's audit link and late evidence, and prunes the
-- link with the decision (`resolver audit verify --export` walks the pruned range).
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
    -- Their audit links go with them (migration 0014): the export carries each link, so
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

CREATE OR REPLACE FUNCTION resolver_prune_candidates(
    p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer)
RETURNS TABLE (dispatch_id text, audited boolean, record jsonb)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
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
               'authorization', to_jsonb(a),
               -- Migration 0014: the decision's audit link, so a pruned range of the chain
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
    LEFT JOIN recovery_authorizations AS a ON a.mutation_id = res.mutation_id
    ORDER BY d.dispatch_id
$$;

-- CREATE OR REPLACE drops the pinned search_path: pin it again.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_prune_candidates(bigint, boolean, text, integer)',
        'resolver_prune_batch(bigint, integer, text[])'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
