-- Migration 0009_protocol_fences (down): undoes 0009_protocol_fences.up.sql, newest object first,
-- and restores the previous (0004, 0005, 0007_sibling_commits) definitions of the functions it replaced.

DROP TRIGGER IF EXISTS approved_action_recovery_controls_born_armed ON approved_action_recovery_controls;

DROP TRIGGER IF EXISTS approved_action_executions_born_leased ON approved_action_executions;

DROP TRIGGER IF EXISTS action_receipts_live_lease ON action_receipts;

DROP FUNCTION IF EXISTS resolver_check_receipt_lease();

DROP FUNCTION IF EXISTS resolver_guard_insert();

DROP FUNCTION IF EXISTS resolver_importing_history(regclass);

CREATE OR REPLACE FUNCTION resolver_protocol_refuse(
    p_step text, p_dispatch_id text, p_owner text, p_token uuid, p_version bigint,
    p_now_ms bigint
)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
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
    IF seen.state = 'leased' AND seen.version <> p_version THEN
        RAISE EXCEPTION 'lease on % was taken over (attempt %): % fence lost',
            quote_literal(p_dispatch_id), seen.attempt, p_step
            USING ERRCODE = 'RS002', HINT = 'stop: never start the side effect';
    END IF;
    IF seen.version = p_version AND (seen.owner, seen.token) IS DISTINCT FROM (p_owner, p_token) THEN
        RAISE EXCEPTION '% of % rejected: the owner/token fence does not hold',
            p_step, quote_literal(p_dispatch_id)
            USING ERRCODE = 'RS001';
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

CREATE OR REPLACE FUNCTION resolver_receipt_identity(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    schema_version integer, dispatch_id text, approval_request_id text, project_id text,
    action_type text, action_digest text, idempotency_key text, attempt integer,
    started_at_ms bigint, db_now_ms bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
BEGIN
    -- FOR SHARE keeps a resolver or a human from settling the execution until the
    -- caller's transaction (the mutation and its receipt) commits or rolls back.
    RETURN QUERY
    SELECT d.schema_version::integer, d.dispatch_id, d.approval_request_id, d.project_id,
           d.action_type, d.action_digest, d.idempotency_key, e.attempt, e.started_at_ms,
           resolver_protocol_now_ms(p_now_ms)
    FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
      AND e.version = p_version AND e.state = 'executing'
    FOR SHARE OF e;
    IF NOT FOUND THEN
        PERFORM resolver_protocol_refuse(
            'receipt', p_dispatch_id, p_owner, p_token, p_version, NULL);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION resolver_receipt_write(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_receipt jsonb
)
RETURNS TABLE (
    dispatch_id text, written_at_ms bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
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

CREATE OR REPLACE FUNCTION resolver_refuse_settled_lease() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS r
               WHERE r.dispatch_id = NEW.dispatch_id) THEN
        RAISE EXCEPTION 'dispatch % was settled by a resolution (its execution was pruned): it is never leased again; a new action needs a new dispatch',
            quote_literal(NEW.dispatch_id)
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$;

-- CREATE OR REPLACE resets a function's settings: pin the search_path again.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_protocol_refuse(text, text, text, uuid, bigint, bigint)',
        'resolver_execution_renew(text, text, uuid, bigint, bigint, bigint)',
        'resolver_receipt_identity(text, text, uuid, bigint, bigint)',
        'resolver_receipt_write(text, text, uuid, bigint, jsonb)',
        'resolver_refuse_settled_lease()'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
