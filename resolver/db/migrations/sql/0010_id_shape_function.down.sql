-- Migration 0010_id_shape_function (down): undoes 0010_id_shape_function.up.sql, newest object first.

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

CREATE OR REPLACE FUNCTION resolver_dispatch_create(
    p_dispatch_id text, p_approval_request_id text, p_project_id text, p_action_type text,
    p_action_digest text, p_idempotency_key text, p_schema_version integer DEFAULT 1,
    p_supersedes_dispatch_id text DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, created boolean, created_at_ms bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    id_shape constant text := '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$';
    field text;
    existing approved_action_dispatches%ROWTYPE;
BEGIN
    FOREACH field IN ARRAY ARRAY['p_dispatch_id', 'p_approval_request_id',
                                 'p_project_id', 'p_idempotency_key'] LOOP
        IF NOT coalesce(CASE field
                WHEN 'p_dispatch_id' THEN p_dispatch_id
                WHEN 'p_approval_request_id' THEN p_approval_request_id
                WHEN 'p_project_id' THEN p_project_id
                ELSE p_idempotency_key END ~ id_shape, false) THEN
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
$$;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_dispatch_create(text, text, text, text, text, text, integer, text)',
        'resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;

DROP FUNCTION IF EXISTS resolver_is_id(text);
