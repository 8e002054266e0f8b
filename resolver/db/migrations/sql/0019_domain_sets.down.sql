-- Migration 0019_domain_sets (down): the checks, trigger conditions and functions as
-- 0018_late_expire_index left them (each set spelled where it was used), then the four
-- domain-set functions dropped.


-- The functions as they were.
CREATE OR REPLACE FUNCTION resolver_finding_status(p_finding text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN p_finding IN ('verified_succeeded', 'verified_failed') THEN 'resolved'
        WHEN p_finding IN ('conflict', 'unsupported') THEN 'manual'
        ELSE 'armed'
    END
$$;

CREATE OR REPLACE FUNCTION resolver_guard_execution() RETURNS trigger
LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION resolver_check_settled_closed() RETURNS trigger
LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION resolver_needs_two_people(p_action_type text, p_outcome text)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
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

CREATE OR REPLACE FUNCTION resolver_record_late_evidence(
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
$$;

-- CREATE OR REPLACE keeps owner and grants, not the pinned search_path or SECURITY DEFINER.
ALTER FUNCTION resolver_check_settled_closed() SECURITY DEFINER;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_guard_execution()',
        'resolver_check_settled_closed()',
        'resolver_record_late_evidence(json, text, bigint, bigint)',
        'resolver_prune_batch(bigint, integer, text[])',
        'resolver_prune_candidates(bigint, boolean, text, integer)',
        'resolver_commit_automatic(json, bigint)',
        'resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;

-- Trigger conditions: a WHEN cannot be replaced in place.
DROP TRIGGER approved_action_executions_state_machine ON approved_action_executions;
CREATE TRIGGER approved_action_executions_state_machine
    AFTER UPDATE ON approved_action_executions FOR EACH ROW WHEN (
    OLD.state IN ('succeeded', 'failed', 'blocked')
    OR NEW.dispatch_id <> OLD.dispatch_id
    OR NOT (NEW.state = OLD.state
            OR (OLD.state = 'leased' AND NEW.state = 'executing')
            OR (OLD.state = 'executing' AND NEW.state IN ('succeeded', 'failed', 'blocked')))
    OR NEW.version < OLD.version
    OR NEW.attempt < OLD.attempt
    OR (NEW.version = OLD.version
        AND (NEW.lease_expires_at_ms > OLD.lease_expires_at_ms OR NEW.state <> OLD.state
             OR NEW.owner <> OLD.owner OR NEW.token <> OLD.token))
    OR (OLD.started_at_ms IS NOT NULL AND NEW.started_at_ms IS DISTINCT FROM OLD.started_at_ms)
) EXECUTE FUNCTION resolver_guard_execution();

DROP TRIGGER approved_action_executions_control_in_step ON approved_action_executions;
CREATE CONSTRAINT TRIGGER approved_action_executions_control_in_step
    AFTER UPDATE OF version ON approved_action_executions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.version <> OLD.version AND NEW.state NOT IN ('succeeded', 'failed', 'blocked'))
    EXECUTE FUNCTION resolver_check_control_in_step();

-- The checks, the same rows accepted. Each ALTER TABLE checks its table's rows once, under
-- the lock the migration's transaction holds to its end (lock_timeout bounds the wait for it).
ALTER TABLE approved_action_executions DROP CONSTRAINT ck_approved_action_executions_state_known,
    ADD CONSTRAINT ck_approved_action_executions_state_known CHECK (state IN ('leased','executing','succeeded','failed','blocked'));
ALTER TABLE approved_action_executions DROP CONSTRAINT ck_approved_action_executions_finished_iff_terminal,
    ADD CONSTRAINT ck_approved_action_executions_finished_iff_terminal CHECK ((state IN ('succeeded','failed','blocked')) = (finished_at_ms IS NOT NULL));
ALTER TABLE approved_action_recovery_controls DROP CONSTRAINT ck_approved_action_recovery_controls_finding_known,
    ADD CONSTRAINT ck_approved_action_recovery_controls_finding_known CHECK (last_finding IS NULL OR last_finding IN ('verified_succeeded','verified_failed','still_running','missing','conflict','unsupported','unavailable'));
ALTER TABLE approved_action_recovery_resolutions DROP CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known,
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known CHECK (outcome IN ('succeeded','failed','blocked'));
ALTER TABLE approved_action_recovery_resolutions DROP CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified,
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified CHECK (source <> 'automatic' OR (finding IN ('verified_succeeded','verified_failed') AND evidence_digest IS NOT NULL AND result_code IS NOT NULL AND actor_user_id IS NULL AND outcome <> 'blocked'));
ALTER TABLE recovery_two_person_rules DROP CONSTRAINT ck_recovery_two_person_rules_decision_known,
    ADD CONSTRAINT ck_recovery_two_person_rules_decision_known CHECK (decision IN ('confirm_succeeded', 'confirm_failed', 'abandon_unknown'));
ALTER TABLE recovery_proposals DROP CONSTRAINT ck_recovery_proposals_outcome_known,
    ADD CONSTRAINT ck_recovery_proposals_outcome_known CHECK (outcome IN ('succeeded', 'failed', 'blocked'));
ALTER TABLE recovery_late_evidence DROP CONSTRAINT ck_recovery_late_evidence_finding_verified,
    ADD CONSTRAINT ck_recovery_late_evidence_finding_verified CHECK (finding IN ('verified_succeeded', 'verified_failed'));

DROP FUNCTION resolver_terminal_states(), resolver_finding_kinds(), resolver_finding_outcome(text), resolver_decision_settles(text);
