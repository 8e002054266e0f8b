-- Migration 0009_protocol_fences (up): defects an adopter found in the executor protocol.
--
-- * resolver_execution_lease on a dispatch settled by a resolution answered 23001 "its
--   execution was pruned" although the execution exists: the settled-identity trigger now
--   refuses only when no execution exists, and the lease answers RS003.
-- * a stale version under the caller's own token was reported as a takeover (RS002): it is a
--   fence conflict (RS001) naming the version the execution is at.
-- * renew counted an already armed control as re-armed: controls_rearmed is 1 only for a
--   manual control.
-- * receipts are fenced on the live lease: resolver_receipt_identity/_write refuse an expired
--   lease (RS002), and a deferred trigger refuses a receipt whose transaction commits after
--   the lease expired, so the mutation in that transaction rolls back with it.
-- * resolver_receipt_write names a receipt integer sent as a string (RS005).
-- * an execution inserted past `leased` (or a control past `armed`) is refused with RS006 for
--   every writer, the owner included, unless the owner imports history with
--   resolver.import_history = on in its transaction.
-- Functions keep their owner and grants (CREATE OR REPLACE); their search_path is pinned again.

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
    -- A takeover always issues a new token: a stale version under the caller's own token is
    -- its own renew moving on, not a takeover.
    IF seen.state = 'leased' AND seen.version <> p_version AND seen.token IS DISTINCT FROM p_token THEN
        RAISE EXCEPTION 'lease on % was taken over (attempt %): % fence lost',
            quote_literal(p_dispatch_id), seen.attempt, p_step
            USING ERRCODE = 'RS002', HINT = 'stop: never start the side effect';
    END IF;
    IF seen.version = p_version AND (seen.owner, seen.token) IS DISTINCT FROM (p_owner, p_token) THEN
        RAISE EXCEPTION '% of % rejected: the owner/token fence does not hold',
            p_step, quote_literal(p_dispatch_id)
            USING ERRCODE = 'RS001';
    END IF;
    IF seen.state = 'leased' AND seen.version <> p_version
       AND (seen.owner, seen.token) = (p_owner, p_token) THEN
        RAISE EXCEPTION '% of % at version % rejected: a stale version, the execution is % at version % (a later renew moved it on)',
            p_step, quote_literal(p_dispatch_id), p_version, seen.state, seen.version
            USING ERRCODE = 'RS001',
                  HINT = 'pass the version the last call returned; stop a heartbeat before the mutation''s transaction';
    END IF;
    -- Receipts are fenced on the live lease: once recovery may settle the execution, no
    -- receipt (and so no mutation in the same transaction) may commit.
    IF p_step = 'receipt' AND seen.state = 'executing' AND seen.lease_expires_at_ms <= p_now_ms THEN
        RAISE EXCEPTION 'lease on % expired at % ms (now % ms): a receipt needs a live lease; roll back the mutation',
            quote_literal(p_dispatch_id), seen.lease_expires_at_ms, p_now_ms
            USING ERRCODE = 'RS002',
                  HINT = 'renew before the mutation''s transaction; nothing of this transaction commits';
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
    was text;
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
    -- re-armed (the executor is alive after all). Lock order: the execution (above), then
    -- the control, read first so that only a manual -> armed change counts as re-armed.
    SELECT c.status INTO was FROM approved_action_recovery_controls AS c
    WHERE c.dispatch_id = p_dispatch_id AND c.status IN ('armed', 'manual')
    FOR UPDATE;
    UPDATE approved_action_recovery_controls AS c
    SET execution_version = version,
        status = 'armed',
        manual_at_ms = NULL,
        (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
            = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version)),
        next_scan_at_ms = lease_expires_at_ms
    WHERE c.dispatch_id = p_dispatch_id AND c.status IN ('armed', 'manual');
    controls_rearmed := CASE WHEN was = 'manual' THEN 1 ELSE 0 END;
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
DECLARE
    now_ms bigint;
BEGIN
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- FOR SHARE keeps a resolver or a human from settling the execution until the
    -- caller's transaction (the mutation and its receipt) commits or rolls back; the live
    -- lease is checked here, at the write, and again at commit (resolver_check_receipt_lease).
    RETURN QUERY
    SELECT d.schema_version::integer, d.dispatch_id, d.approval_request_id, d.project_id,
           d.action_type, d.action_digest, d.idempotency_key, e.attempt, e.started_at_ms,
           now_ms
    FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
      AND e.version = p_version AND e.state = 'executing' AND e.lease_expires_at_ms > now_ms
    FOR SHARE OF e;
    IF NOT FOUND THEN
        PERFORM resolver_protocol_refuse(
            'receipt', p_dispatch_id, p_owner, p_token, p_version, now_ms);
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
    -- Drivers hand bigints back as strings; a receipt's numbers are JSON integers.
    FOREACH field IN ARRAY ARRAY['v', 'attempt', 'started_at_ms', 'finished_at_ms'] LOOP
        IF p_receipt ? field AND jsonb_typeof(p_receipt -> field) <> 'number' THEN
            RAISE EXCEPTION 'receipt field % must be a JSON integer, not a JSON %', field,
                jsonb_typeof(p_receipt -> field)
                USING ERRCODE = 'RS005',
                      HINT = 'convert the bigint your driver returned as a string (Number() in JavaScript)';
        END IF;
    END LOOP;
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
    -- Only when no execution exists: INSERT ... ON CONFLICT (the lease) fires this before the
    -- conflict check, and a settled execution that still exists is the lease's to refuse
    -- (RS003, past the start barrier).
    IF EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS r
               WHERE r.dispatch_id = NEW.dispatch_id)
       AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                       WHERE e.dispatch_id = NEW.dispatch_id) THEN
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

-- A bulk import of history (a benchmark's seed, a restore) by the tables' owner may write rows
-- the functions would write one transition at a time: with `resolver.import_history` set to
-- `on` in its transaction, the insert guards and the receipt's lease check let it through.
-- Nobody else can: the flag counts only for a member of the owning role.
CREATE FUNCTION resolver_importing_history(p_table regclass) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('resolver.import_history', true), '') = 'on'
       AND pg_has_role(session_user, (SELECT c.relowner FROM pg_class AS c WHERE c.oid = p_table),
                       'MEMBER')
$$;

-- An execution is born `leased` at version 1 (resolver_execution_lease writes it so), a control
-- `armed` (by the start barrier); inserting either in a later state would skip the state machine.
CREATE FUNCTION resolver_guard_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF resolver_importing_history(TG_RELID) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION '%: INSERT of % rejected (%)', TG_TABLE_NAME, NEW.dispatch_id,
        CASE TG_TABLE_NAME
            WHEN 'approved_action_executions'
                THEN 'an execution is born leased, at version 1 and attempt 1, with no start or outcome'
            ELSE 'a control is born armed by the start barrier, with no recovery lease'
        END
        USING ERRCODE = 'RS006',
              HINT = 'executors write executions and controls only through the resolver_execution_* functions';
END
$$;

-- At commit, a receipt's execution must still hold a live lease: a receipt written while the
-- lease was live but committed after it expired (a slow transaction) rolls back with the
-- mutation in its transaction, instead of landing beside a human's decision on the same
-- version. Only an `executing` execution is checked (a provider's evidence may predate one).
CREATE FUNCTION resolver_check_receipt_lease() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    expires bigint;
    now_ms bigint;
BEGIN
    SELECT e.lease_expires_at_ms INTO expires FROM approved_action_executions AS e
    WHERE e.dispatch_id = NEW.dispatch_id AND e.state = 'executing';
    now_ms := resolver_now_ms(NULL);
    IF FOUND AND expires <= now_ms AND NOT resolver_importing_history(TG_RELID) THEN
        RAISE EXCEPTION 'the receipt of % would commit after its execution lease expired (at % ms, now % ms): the transaction rolls back',
            quote_literal(NEW.dispatch_id), expires, now_ms
            USING ERRCODE = 'RS002',
                  HINT = 'renew before the mutation''s transaction; nothing of this transaction committed';
    END IF;
    RETURN NULL;
END
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_check_receipt_lease(),
    resolver_guard_insert(),
    resolver_importing_history(regclass)
FROM PUBLIC;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_check_receipt_lease()',
        'resolver_guard_insert()',
        'resolver_importing_history(regclass)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;

CREATE CONSTRAINT TRIGGER action_receipts_live_lease
    AFTER INSERT ON action_receipts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION resolver_check_receipt_lease();

CREATE TRIGGER approved_action_executions_born_leased
    AFTER INSERT ON approved_action_executions FOR EACH ROW WHEN (
    NEW.state <> 'leased' OR NEW.version <> 1 OR NEW.attempt <> 1
    OR NEW.started_at_ms IS NOT NULL OR NEW.finished_at_ms IS NOT NULL
    OR NEW.result_code IS NOT NULL OR NEW.completion_mutation_id IS NOT NULL
    OR NEW.evidence_digest IS NOT NULL
) EXECUTE FUNCTION resolver_guard_insert();

CREATE TRIGGER approved_action_recovery_controls_born_armed
    AFTER INSERT ON approved_action_recovery_controls FOR EACH ROW WHEN (
    NEW.status <> 'armed' OR NEW.recovery_token IS NOT NULL OR NEW.closed_by IS NOT NULL
) EXECUTE FUNCTION resolver_guard_insert();
