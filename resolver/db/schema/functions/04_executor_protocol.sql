-- The executor protocol. Every executor transition is a `resolver_…` function (SECURITY
-- DEFINER, search_path pinned) that fences on the database clock and refuses with a SQLSTATE
-- of class RS (docs/executor-protocol.md); triggers reject any write outside the state
-- machine, even from the table owner.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

-- Helpers the protocol functions call (not part of the protocol; no EXECUTE for anyone else).
-- The protocol's clock: the database clock, or the test clock an override asks for. One SQL
-- expression the planner inlines into each protocol function, so the common call (no
-- override) costs no function call and no search_path switch of its own.
CREATE OR REPLACE FUNCTION resolver_protocol_now_ms(
    p_now_ms bigint
)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN p_now_ms IS NULL THEN resolver_now_ms(NULL)
                ELSE resolver_protocol_test_clock(p_now_ms) END
$$;

CREATE OR REPLACE FUNCTION resolver_protocol_test_clock(
    p_now_ms bigint
)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
BEGIN
    -- The clock override is the test clock: only the schema owner's own sessions (the
    -- test suites) may move time; an executor role gets the database clock or a refusal.
    IF p_now_ms IS NOT NULL AND NOT pg_has_role(session_user, current_user, 'MEMBER') THEN
        RAISE EXCEPTION 'p_now_ms (the test clock) is refused for role %', session_user
            USING ERRCODE = 'RS005',
                  HINT = 'pass NULL: the protocol runs on the database clock';
    END IF;
    RETURN resolver_now_ms(p_now_ms);
END
$$;

-- The lease arguments' rule, one expression inlined where a function reads it: an owner of 1
-- to 128 characters, a lease of 1 ms to one day.
CREATE OR REPLACE FUNCTION resolver_protocol_lease_ok(
    p_owner text, p_lease_ms bigint
)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(length(p_owner) BETWEEN 1 AND 128 AND p_lease_ms BETWEEN 1 AND 86400000,
                    false)
$$;

-- Says which lease argument breaks the rule (called only when one does).
CREATE OR REPLACE FUNCTION resolver_protocol_check_lease(
    p_owner text, p_lease_ms bigint
)
RETURNS void
LANGUAGE plpgsql IMMUTABLE SECURITY DEFINER AS $$
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, 1) THEN
        RAISE EXCEPTION 'p_owner must be 1-128 characters' USING ERRCODE = 'RS005';
    END IF;
    IF NOT resolver_protocol_lease_ok('-', p_lease_ms) THEN
        RAISE EXCEPTION 'p_lease_ms must be between 1 and 86400000 (one day)'
            USING ERRCODE = 'RS005';
    END IF;
END
$$;

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

-- The protocol: each function is SECURITY DEFINER with its search_path pinned (below), fences
-- inside the database on the database clock, and refuses with SQLSTATE RS001 fence conflict,
-- RS002 lease lost, RS003 not leasable, RS004 not found, RS005 invalid input (RS006: a
-- state-machine trigger refused a write). The completion, resolver_execution_complete, is one
-- of the three commits and lives beside the other two in 08_commits.sql.
--
-- Each answers one row or raises, and says so (ROWS 1): a statement that composes calls (the
-- SDKs lease, cross the barrier and read the receipt's identity in one, each call LATERAL to
-- the one before) is planned as the one row it is, where the default estimate of a thousand
-- rows per call multiplies into a plan costly enough to be compiled (JIT) at every call.
--
-- A signature never changes in place (docs/executor-protocol.md, Versioning): the action
-- summary came with resolver_dispatch_create_v2, beside 0.1.0's eight arguments, which 0.3.0
-- dropped.
CREATE OR REPLACE FUNCTION resolver_dispatch_create_v2(
    p_dispatch_id text, p_approval_request_id text, p_project_id text, p_action_type text,
    p_action_digest text, p_idempotency_key text, p_schema_version integer DEFAULT 1,
    p_supersedes_dispatch_id text DEFAULT NULL, p_action_summary jsonb DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, created boolean, created_at_ms bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    field text;
    existing approved_action_dispatches%ROWTYPE;
    problem text;
BEGIN
    -- The four ids in one expression; the loop below only names the first bad one.
    IF NOT coalesce(resolver_is_id(p_dispatch_id) AND resolver_is_id(p_approval_request_id)
                    AND resolver_is_id(p_project_id) AND resolver_is_id(p_idempotency_key),
                    false) THEN
        FOREACH field IN ARRAY ARRAY['p_dispatch_id', 'p_approval_request_id',
                                     'p_project_id', 'p_idempotency_key'] LOOP
            IF NOT coalesce(resolver_is_id(CASE field
                    WHEN 'p_dispatch_id' THEN p_dispatch_id
                    WHEN 'p_approval_request_id' THEN p_approval_request_id
                    WHEN 'p_project_id' THEN p_project_id
                    ELSE p_idempotency_key END), false) THEN
                RAISE EXCEPTION '% must be 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric', field
                    USING ERRCODE = 'RS005';
            END IF;
        END LOOP;
    END IF;
    IF NOT coalesce(resolver_is_action_type(p_action_type), false) THEN
        RAISE EXCEPTION 'p_action_type must match [a-z][a-z0-9_.-]{0,63}'
            USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_sha256_hex(p_action_digest), false) THEN
        RAISE EXCEPTION 'p_action_digest must be a lowercase hex sha256'
            USING ERRCODE = 'RS005';
    END IF;
    IF p_schema_version IS NULL OR p_schema_version < 1 THEN
        RAISE EXCEPTION 'p_schema_version must be >= 1' USING ERRCODE = 'RS005';
    END IF;
    -- What was approved, for people: optional; an executor that does not
    -- pass it records none. Refused with the rule it breaks, never with its content.
    problem := resolver_action_summary_problem(p_action_summary);
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'p_action_summary %', problem
            USING ERRCODE = 'RS005',
                  HINT = 'a title and up to 8 labelled facts for people; never secrets, tool arguments or raw responses';
    END IF;
    -- Nested, so a dispatch that supersedes nothing (nearly all) runs no query for it.
    IF p_supersedes_dispatch_id IS NOT NULL THEN
        IF p_supersedes_dispatch_id = p_dispatch_id
           OR NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS s
                          WHERE s.dispatch_id = p_supersedes_dispatch_id) THEN
            RAISE EXCEPTION 'supersedes_dispatch_id % names no dispatch', quote_literal(p_supersedes_dispatch_id)
                USING ERRCODE = 'RS005';
        END IF;
    END IF;
    INSERT INTO approved_action_dispatches AS d (
        dispatch_id, approval_request_id, project_id, action_type, action_digest,
        idempotency_key, schema_version, supersedes_dispatch_id, action_summary)
    VALUES (p_dispatch_id, p_approval_request_id, p_project_id, p_action_type,
            p_action_digest, p_idempotency_key, p_schema_version, p_supersedes_dispatch_id,
            p_action_summary)
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
       AND existing.supersedes_dispatch_id IS NOT DISTINCT FROM p_supersedes_dispatch_id
       AND existing.action_summary IS NOT DISTINCT FROM p_action_summary THEN
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

CREATE OR REPLACE FUNCTION resolver_execution_lease(
    p_dispatch_id text, p_owner text, p_lease_ms bigint, p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, owner text, token uuid, version bigint, attempt integer,
    lease_expires_at_ms bigint, state text
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    seen approved_action_executions%ROWTYPE;
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, p_lease_ms) THEN
        PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- First lease: an INSERT for an existing dispatch, checked in the statement. Not an
    -- upsert: INSERT ... ON CONFLICT DO UPDATE fires the table's statement-level UPDATE
    -- triggers (settled-closed, proposals) even when it inserts.
    INSERT INTO approved_action_executions AS e (
        dispatch_id, state, owner, token, version, attempt, lease_expires_at_ms)
    SELECT d.dispatch_id, 'leased', p_owner, gen_random_uuid(), 1, 1, now_ms + p_lease_ms
    FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = p_dispatch_id
    ON CONFLICT (dispatch_id) DO NOTHING
    RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
              e.lease_expires_at_ms, e.state
    INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state;
    IF NOT FOUND THEN
        -- Takeover of a `leased` execution whose lease expired (it never crossed the
        -- barrier, so running it again is safe). `executing` never leases again.
        UPDATE approved_action_executions AS e
        SET owner = p_owner,
            token = gen_random_uuid(),
            version = e.version + 1,
            attempt = e.attempt + 1,
            lease_expires_at_ms = now_ms + p_lease_ms
        WHERE e.dispatch_id = p_dispatch_id
          AND e.state = 'leased' AND e.lease_expires_at_ms <= now_ms
        RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
                  e.lease_expires_at_ms, e.state
        INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state;
    END IF;
    IF FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS d
                   WHERE d.dispatch_id = p_dispatch_id) THEN
        RAISE EXCEPTION 'dispatch % does not exist', quote_literal(p_dispatch_id)
            USING ERRCODE = 'RS004';
    END IF;
    SELECT * INTO seen FROM approved_action_executions AS e
    WHERE e.dispatch_id = p_dispatch_id;
    IF seen.state = 'leased' THEN
        RAISE EXCEPTION 'dispatch % is leased by % until its lease expires (at % ms, now % ms)',
            quote_literal(p_dispatch_id), quote_literal(seen.owner),
            seen.lease_expires_at_ms, now_ms
            USING ERRCODE = 'RS003', HINT = 'retry after the lease expires';
    END IF;
    RAISE EXCEPTION 'dispatch % is %: past the start barrier only recovery or a human may settle it',
        quote_literal(p_dispatch_id), seen.state
        USING ERRCODE = 'RS003';
END
$$;

CREATE OR REPLACE FUNCTION resolver_execution_start(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_lease_ms bigint,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, owner text, token uuid, version bigint, attempt integer,
    lease_expires_at_ms bigint, state text, started_at_ms bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, p_lease_ms) THEN
        PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- The start barrier: leased -> executing and the control armed, one statement. Lock
    -- order: the execution row (the UPDATE, whose rows the INSERT reads), then the control.
    WITH started AS (
        UPDATE approved_action_executions AS e
        SET state = 'executing',
            version = e.version + 1,
            started_at_ms = now_ms,
            lease_expires_at_ms = now_ms + p_lease_ms
        WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
          AND e.version = p_version AND e.state = 'leased' AND e.lease_expires_at_ms > now_ms
        RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt,
                  e.lease_expires_at_ms, e.state, e.started_at_ms
    ),
    armed AS (
        INSERT INTO approved_action_recovery_controls (
            dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms)
        SELECT s.dispatch_id, 'armed', s.version, s.lease_expires_at_ms, s.started_at_ms
        FROM started AS s
    )
    SELECT s.dispatch_id, s.owner, s.token, s.version, s.attempt, s.lease_expires_at_ms,
           s.state, s.started_at_ms
    INTO dispatch_id, owner, token, version, attempt, lease_expires_at_ms, state,
         started_at_ms
    FROM started AS s;
    IF NOT FOUND THEN
        PERFORM resolver_protocol_refuse(
            'start', p_dispatch_id, p_owner, p_token, p_version, now_ms);
    END IF;
    RETURN NEXT;
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
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    was text;
BEGIN
    IF NOT resolver_protocol_lease_ok(p_owner, p_lease_ms) THEN
        PERFORM resolver_protocol_check_lease(p_owner, p_lease_ms);
    END IF;
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
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
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
           d.action_type, d.action_digest::text, d.idempotency_key, e.attempt, e.started_at_ms,
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
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint := resolver_now_ms(NULL);
    identity jsonb;
    field text;
BEGIN
    -- One statement checks everything a receipt is written under: the fence and the live
    -- lease of resolver_receipt_identity (the execution locked FOR SHARE the same way), a JSON
    -- object whose integers are JSON numbers (drivers hand bigints back as strings), naming
    -- this execution field by field. Shape and signature are the provider's to verify when it
    -- reads (a tampered receipt is a `conflict` there, never success).
    INSERT INTO action_receipts AS a (dispatch_id, receipt)
    SELECT e.dispatch_id, p_receipt
    FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
      AND e.version = p_version AND e.state = 'executing' AND e.lease_expires_at_ms > now_ms
      AND jsonb_typeof(p_receipt) = 'object'
      AND coalesce(jsonb_typeof(p_receipt -> 'v'), 'number') = 'number'
      AND coalesce(jsonb_typeof(p_receipt -> 'attempt'), 'number') = 'number'
      AND coalesce(jsonb_typeof(p_receipt -> 'started_at_ms'), 'number') = 'number'
      AND coalesce(jsonb_typeof(p_receipt -> 'finished_at_ms'), 'number') = 'number'
      AND p_receipt -> 'dispatch_id' = to_jsonb(d.dispatch_id)
      AND p_receipt -> 'approval_request_id' = to_jsonb(d.approval_request_id)
      AND p_receipt -> 'project_id' = to_jsonb(d.project_id)
      AND p_receipt -> 'action_type' = to_jsonb(d.action_type)
      AND p_receipt -> 'action_digest' = to_jsonb(d.action_digest)
      AND p_receipt -> 'idempotency_key' = to_jsonb(d.idempotency_key)
      AND p_receipt -> 'attempt' = to_jsonb(e.attempt)
      AND p_receipt -> 'started_at_ms' = to_jsonb(e.started_at_ms)
    FOR SHARE OF e
    RETURNING a.dispatch_id, a.written_at_ms INTO dispatch_id, written_at_ms;
    IF FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- Written nothing: say why, in the order the checks are documented. A fence that does
    -- not hold is refused by resolver_receipt_identity itself.
    SELECT to_jsonb(i) INTO identity FROM resolver_receipt_identity(
        p_dispatch_id, p_owner, p_token, p_version, NULL) AS i;
    IF p_receipt IS NULL OR jsonb_typeof(p_receipt) <> 'object' THEN
        RAISE EXCEPTION 'p_receipt must be a JSON object (receipt v1)'
            USING ERRCODE = 'RS005';
    END IF;
    FOREACH field IN ARRAY ARRAY['v', 'attempt', 'started_at_ms', 'finished_at_ms'] LOOP
        IF p_receipt ? field AND jsonb_typeof(p_receipt -> field) <> 'number' THEN
            RAISE EXCEPTION 'receipt field % must be a JSON integer, not a JSON %', field,
                jsonb_typeof(p_receipt -> field)
                USING ERRCODE = 'RS005',
                      HINT = 'convert the bigint your driver returned as a string (Number() in JavaScript)';
        END IF;
    END LOOP;
    FOREACH field IN ARRAY ARRAY['dispatch_id', 'approval_request_id', 'project_id',
                                 'action_type', 'action_digest', 'idempotency_key',
                                 'attempt', 'started_at_ms'] LOOP
        IF (p_receipt -> field) IS DISTINCT FROM (identity -> field) THEN
            RAISE EXCEPTION 'receipt field % does not match dispatch %', field,
                quote_literal(p_dispatch_id)
                USING ERRCODE = 'RS005';
        END IF;
    END LOOP;
    -- Every check passes now: the execution moved on between the write and these reads.
    RAISE EXCEPTION 'receipt of % was not written: its execution changed while it was written',
        quote_literal(p_dispatch_id)
        USING ERRCODE = 'RS001';
END
$$;

-- A bulk import of history (a benchmark's seed, a restore) by the tables' owner may write rows
-- the functions would write one transition at a time: with `resolver.import_history` set to
-- `on` in its transaction, the insert guards and the receipt's lease check let it through.
-- Nobody else can: the flag counts only for a member of the owning role.
CREATE OR REPLACE FUNCTION resolver_importing_history(p_table regclass) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('resolver.import_history', true), '') = 'on'
       AND pg_has_role(session_user, (SELECT c.relowner FROM pg_class AS c WHERE c.oid = p_table),
                       'MEMBER')
$$;

-- An execution is born `leased` at version 1 (resolver_execution_lease writes it so), a control
-- `armed` (by the start barrier); inserting either in a later state would skip the state machine.
-- An execution is also never born for a dispatch a resolution settled: retention may have
-- pruned the settled execution and kept the resolution, and a new execution of that identity
-- would run an approved action twice. Only when no execution exists: INSERT ... ON CONFLICT
-- (the lease) fires a BEFORE trigger before the conflict check, and a settled execution that
-- still exists is the lease's to refuse (RS003, past the start barrier). Both rules of an
-- execution's birth in one BEFORE row trigger: the lease inserts one row, and a WHEN asking a
-- function beside a second trigger cost it two calls and a WHEN read back per statement.
CREATE OR REPLACE FUNCTION resolver_execution_born() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.state <> 'leased' OR NEW.version <> 1 OR NEW.attempt <> 1
        OR NEW.started_at_ms IS NOT NULL OR NEW.finished_at_ms IS NOT NULL
        OR NEW.result_code IS NOT NULL OR NEW.completion_mutation_id IS NOT NULL
        OR NEW.evidence_digest IS NOT NULL)
       AND NOT resolver_importing_history(TG_RELID) THEN
        RAISE EXCEPTION '%: INSERT of % rejected (%)', TG_TABLE_NAME, NEW.dispatch_id,
            'an execution is born leased, at version 1 and attempt 1, with no start or outcome'
            USING ERRCODE = 'RS006',
                  HINT = 'executors write executions and controls only through the resolver_execution_* functions';
    END IF;
    -- Two statements, not one condition: an expression prepares both reads before it
    -- evaluates either, and nearly every lease stops at the first (no resolution).
    IF EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS r
               WHERE r.dispatch_id = NEW.dispatch_id) THEN
        IF NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                       WHERE e.dispatch_id = NEW.dispatch_id) THEN
            RAISE EXCEPTION 'dispatch % was settled by a resolution (its execution was pruned): it is never leased again; a new action needs a new dispatch',
                quote_literal(NEW.dispatch_id)
                USING ERRCODE = 'restrict_violation';
        END IF;
    END IF;
    RETURN NEW;
END
$$;

-- A control's birth: its trigger's WHEN asks resolver_control_born_broken (below) and this says
-- what the row should have been.
CREATE OR REPLACE FUNCTION resolver_guard_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF resolver_importing_history(TG_RELID) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION '%: INSERT of % rejected (%)', TG_TABLE_NAME, NEW.dispatch_id,
        'a control is born armed by the start barrier, with no recovery lease'
        USING ERRCODE = 'RS006',
              HINT = 'executors write executions and controls only through the resolver_execution_* functions';
END
$$;

-- At commit, a receipt's execution must still hold a live lease: a receipt written while the
-- lease was live but committed after it expired (a slow transaction) rolls back with the
-- mutation in its transaction, instead of landing beside a human's decision on the same
-- version. Only an `executing` execution is checked (a provider's evidence may predate one).
CREATE OR REPLACE FUNCTION resolver_check_receipt_lease() RETURNS trigger
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

-- Functions are executable by PUBLIC by default; resolver/db/grants.sql grants the protocol
-- to the executor role. The helpers (resolver_protocol_*) are nobody else's to call.
REVOKE EXECUTE ON FUNCTION
    resolver_protocol_now_ms(bigint),
    resolver_protocol_test_clock(bigint),
    resolver_protocol_lease_ok(text, bigint),
    resolver_protocol_check_lease(text, bigint),
    resolver_protocol_refuse(text, text, text, uuid, bigint, bigint),
    resolver_dispatch_create_v2(text, text, text, text, text, text, integer, text, jsonb),
    resolver_execution_lease(text, text, bigint, bigint),
    resolver_execution_start(text, text, uuid, bigint, bigint, bigint),
    resolver_execution_renew(text, text, uuid, bigint, bigint, bigint),
    resolver_receipt_identity(text, text, uuid, bigint, bigint),
    resolver_receipt_write(text, text, uuid, bigint, jsonb)
FROM PUBLIC;

-- The control's birth, written once: a function answers whether a new control breaks the rule,
-- the trigger's WHEN asks it, and resolver_guard_insert says what the row should have been. A
-- function, not the rule spelled out in WHEN: a trigger's WHEN is stored as an expression tree
-- that PostgreSQL reads back from its text and prepares again in every statement that writes
-- the table; a plpgsql function is compiled once per session. A `record` argument: the
-- functions are created before the tables (resolver/db/README.md).
CREATE OR REPLACE FUNCTION resolver_control_born_broken(n record)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN n.status <> 'armed' OR n.recovery_token IS NOT NULL OR n.closed_by IS NOT NULL;
END
$$;

-- An execution keeps its dispatch_id (the trigger below fires only for a statement that
-- assigns it). The other rules of its state machine are checked per statement by
-- resolver_executions_changed, which pairs each row's old and new values by that id.
CREATE OR REPLACE FUNCTION resolver_guard_execution() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'approved_action_executions %: % rejected (an execution keeps its dispatch_id)',
        OLD.dispatch_id, TG_OP
        USING ERRCODE = 'RS006',
              HINT = 'executors change executions only through the resolver_execution_* functions';
END
$$;

-- Names the rule a write broke (the trigger below calls it only then).
CREATE OR REPLACE FUNCTION resolver_guard_control() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    rule text;
BEGIN
    rule := CASE
        WHEN OLD.status = 'resolved' THEN 'a resolved control never reopens or changes'
        WHEN NEW.dispatch_id <> OLD.dispatch_id THEN 'a control keeps its dispatch_id'
        WHEN NEW.execution_version < OLD.execution_version
          OR NEW.recovery_version < OLD.recovery_version
            THEN 'execution_version and recovery_version never decrease'
        ELSE 'a recovery lease changes only with a recovery_version bump'
    END;
    RAISE EXCEPTION 'approved_action_recovery_controls %: % rejected (%)',
        NEW.dispatch_id, TG_OP, rule
        USING ERRCODE = 'RS006',
              HINT = 'controls change only through the resolver_execution_* functions and the resolver';
END
$$;

-- At commit, every open control follows its execution's version: a renew or completion that
-- forgot the control (a hand-written executor) fails instead of leaving recovery a stale fence.
CREATE OR REPLACE FUNCTION resolver_check_control_in_step() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    control_version bigint;
    execution_version bigint;
BEGIN
    SELECT c.execution_version, e.version INTO control_version, execution_version
    FROM approved_action_recovery_controls AS c
    JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE c.dispatch_id = NEW.dispatch_id AND c.status <> 'resolved';
    IF FOUND AND control_version <> execution_version THEN
        RAISE EXCEPTION 'dispatch %: an open control''s execution_version (%) must equal its execution''s version (%) at commit',
            NEW.dispatch_id, control_version, execution_version
            USING ERRCODE = 'RS006',
                  HINT = 'update the control in the same transaction (resolver_execution_renew does)';
    END IF;
    RETURN NULL;
END
$$;

-- Which rule of an execution's state machine a change from one version of its row (o_*) to the
-- next (n_*) breaks, or NULL when it breaks none: the rules of resolver_executions_changed
-- (below), written once. SQL and one expression, so the planner inlines it into the statement
-- that asks (a call per row would cost a page commit of 64 rows 64 calls); scalar arguments,
-- as the functions are created before the tables. No search_path of its own, which would keep
-- it from being inlined: it runs inside its caller's.
CREATE OR REPLACE FUNCTION resolver_execution_broken_rule(
    o_state text, n_state text, o_version bigint, n_version bigint,
    o_attempt integer, n_attempt integer,
    o_lease_expires_at_ms bigint, n_lease_expires_at_ms bigint,
    o_owner text, n_owner text, o_token uuid, n_token uuid,
    o_started_at_ms bigint, n_started_at_ms bigint
)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN o_state = ANY (resolver_terminal_states())
            THEN 'a terminal execution never changes'
        WHEN o_state = 'executing' AND n_state = 'leased'
            THEN 'executing never returns to leased'
        WHEN NOT (n_state = o_state OR (o_state = 'leased' AND n_state = 'executing')
                  OR (o_state = 'executing' AND n_state = ANY (resolver_terminal_states())))
            THEN 'only leased -> executing -> terminal (the start barrier cannot be skipped)'
        WHEN n_version < o_version OR n_attempt < o_attempt
            THEN 'version and attempt never decrease'
        WHEN n_version = o_version AND n_lease_expires_at_ms > o_lease_expires_at_ms
            THEN 'a lease is extended only with a version bump'
        WHEN n_version = o_version
             AND (n_state <> o_state OR n_owner <> o_owner OR n_token <> o_token)
            THEN 'a state, owner or token change needs a version bump'
        WHEN o_started_at_ms IS NOT NULL AND n_started_at_ms IS DISTINCT FROM o_started_at_ms
            THEN 'started_at_ms is set once, at the start barrier'
    END
$$;

-- After every statement that changes executions, one trigger, once per statement over its
-- transition tables, keeps the state machine and the two rules that span tables:
--
-- * Only leased -> executing -> terminal, with every change of a lease, state, owner or token
--   bumping the version (above; the dispatch_id rule has its own trigger, so the old and new
--   rows pair by that id). The rules are written once, in resolver_execution_broken_rule
--   (above), an expression the planner inlines, so the session's cached plan evaluates it per
--   row. Not a row trigger's WHEN: PostgreSQL reads a WHEN back from its stored text and
--   prepares it again in every statement that writes the table, which for these rules cost
--   more than the protocol's own statement (docs/performance.md); not a function called per
--   row either, which costs a page commit of 64 rows 64 calls. The statement asks only which
--   row breaks a rule, and the rule's name is read again for that row when there is one: the
--   name in the same answer put the rules into the statement's plan twice (or inside a
--   subquery of their own), which every statement prepared again.
-- * A terminal transition closes its control in the same statement (the functions and the
--   resolver's commits do, in one statement), so settling a page of 64 costs one set-based
--   lookup, not 64 deferred row checks. A semi-join from the settled rows to the controls'
--   primary key: the planner knows how many rows the statement settled, so for one (every
--   completion) a single key probe is the plan, on tables never analyzed too. (An `= ANY
--   (array)` over the controls was planned there as a scan of every control, and a long-lived
--   session kept that plan as the table grew.) A statement that settles nothing (the start
--   barrier, a renewal) reads no control.
-- * A new execution version (a renew, a completion, any resolution, a takeover) voids the open
--   proposal fenced on the old one, in the same transaction: a confirmation can only ever
--   follow the very state the proposer saw. The (nearly always empty) open index is probed
--   first, so writers that never meet a proposal pay next to nothing.
--
-- One trigger and one query, not one per rule: every statement trigger is a call and a read
-- of the transition tables whether or not its rule has anything to do, and most statements
-- (every start barrier, every renewal) settle nothing and meet no proposal. It runs as whoever
-- wrote the executions, which is always their owner (see the owner's triggers below). The
-- outcome feed appends from a trigger of its own (10_outcome_feed.sql), which fires after this
-- one.
CREATE OR REPLACE FUNCTION resolver_executions_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
    rule text;
    left_open text;
    proposals_open boolean;
BEGIN
    SELECT (SELECT n.dispatch_id
            FROM before AS o
            JOIN changed AS n USING (dispatch_id)
            WHERE resolver_execution_broken_rule(
                o.state, n.state, o.version, n.version, o.attempt, n.attempt,
                o.lease_expires_at_ms, n.lease_expires_at_ms, o.owner, n.owner,
                o.token, n.token, o.started_at_ms, n.started_at_ms) IS NOT NULL
            LIMIT 1),
           (SELECT n.dispatch_id FROM changed AS n
            WHERE n.state = ANY (resolver_terminal_states())
              AND EXISTS (SELECT 1 FROM approved_action_recovery_controls AS c
                          WHERE c.dispatch_id = n.dispatch_id AND c.status <> 'resolved')
            LIMIT 1),
           EXISTS (SELECT 1 FROM recovery_proposals AS p WHERE p.closed_as IS NULL)
    INTO broken, left_open, proposals_open;
    IF broken IS NOT NULL THEN
        SELECT resolver_execution_broken_rule(
                   o.state, n.state, o.version, n.version, o.attempt, n.attempt,
                   o.lease_expires_at_ms, n.lease_expires_at_ms, o.owner, n.owner,
                   o.token, n.token, o.started_at_ms, n.started_at_ms)
        INTO rule
        FROM before AS o
        JOIN changed AS n USING (dispatch_id)
        WHERE n.dispatch_id = broken;
        RAISE EXCEPTION 'approved_action_executions %: % rejected (%)', broken, TG_OP, rule
            USING ERRCODE = 'RS006',
                  HINT = 'executors change executions only through the resolver_execution_* functions';
    END IF;
    IF left_open IS NOT NULL THEN
        RAISE EXCEPTION 'dispatch %: an open control''s execution_version must equal its execution''s version; a terminal execution''s control is closed by the same statement',
            left_open
            USING ERRCODE = 'RS006',
                  HINT = 'settle through resolver_execution_complete (or close the control in the same statement)';
    END IF;
    IF proposals_open THEN
        UPDATE recovery_proposals AS p
        SET closed_as = 'voided', closed_at_ms = resolver_now_ms(NULL),
            close_reason_code = 'execution_changed'
        FROM changed AS n
        WHERE p.dispatch_id = n.dispatch_id AND p.closed_as IS NULL
          AND p.expected_execution_version <> n.version;
    END IF;
    RETURN NULL;
END
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_execution_broken_rule(text, text, bigint, bigint, integer, integer, bigint, bigint,
                                   text, text, uuid, uuid, bigint, bigint),
    resolver_execution_born(),
    resolver_control_born_broken(record),
    resolver_guard_execution(),
    resolver_guard_control(),
    resolver_check_control_in_step(),
    resolver_executions_changed(),
    resolver_check_receipt_lease(),
    resolver_guard_insert(),
    resolver_importing_history(regclass)
FROM PUBLIC;

-- The commit-time checks read both tables whoever commits (an executor reaches them only
-- through the functions above).
ALTER FUNCTION resolver_check_control_in_step() SECURITY DEFINER;

-- Each function resolves names through a search_path pinned to the migrated schema, with
-- pg_temp last so a caller's temporary table can never shadow a protocol table.
--
-- Not pinned, and not SECURITY DEFINER: the owner's triggers, those that fire only for a write
-- no role but the owner may make (an execution's INSERT or UPDATE, a control's INSERT; no
-- role is granted either, and the tests hold the grants to it). Such a write is made inside
-- one of the protocol's or the resolver's definer functions, which run as the owner under
-- this pinned path, and a row or statement trigger that is not deferred runs inside that same
-- call, so it inherits both; a pin of its own would set the same path again, which PostgreSQL
-- pays at every call (about 15,000 instructions on PostgreSQL 15). The owner's own
-- hand-written statement runs them as the owner under its own path, as it runs everything
-- else. The commit-time checks stay pinned definers: they run at COMMIT, outside any call.
-- They are resolver_execution_born, resolver_executions_changed, resolver_control_born_broken
-- and, for the outcome feed, resolver_outcomes_append_settled.
DO $$
DECLARE
    fn text;
BEGIN
    -- (Not the inlined helpers, resolver_protocol_now_ms and resolver_protocol_lease_ok: a
    -- pinned search_path would keep the planner from inlining them. They run inside the
    -- protocol functions' own pinned search_path.)
    FOREACH fn IN ARRAY ARRAY[
        'resolver_protocol_test_clock(bigint)',
        'resolver_protocol_check_lease(text, bigint)',
        'resolver_protocol_refuse(text, text, text, uuid, bigint, bigint)',
        'resolver_dispatch_create_v2(text, text, text, text, text, text, integer, text, jsonb)',
        'resolver_execution_lease(text, text, bigint, bigint)',
        'resolver_execution_start(text, text, uuid, bigint, bigint, bigint)',
        'resolver_execution_renew(text, text, uuid, bigint, bigint, bigint)',
        'resolver_receipt_identity(text, text, uuid, bigint, bigint)',
        'resolver_receipt_write(text, text, uuid, bigint, jsonb)',
        'resolver_guard_execution()',
        'resolver_guard_control()',
        'resolver_check_control_in_step()',
        'resolver_check_receipt_lease()',
        'resolver_guard_insert()',
        'resolver_importing_history(regclass)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;

-- The state machine, enforced for every writer (the table owner included): the executions'
-- rules by resolver_executions_changed (below), the controls' here. Each WHEN holds exactly when
-- a rule is broken, so an allowed write never calls a function. AFTER, not BEFORE: a BEFORE ROW
-- UPDATE trigger makes PostgreSQL lock (and WAL-log the lock of) every old row before it can
-- even evaluate WHEN; an AFTER row trigger's WHEN is evaluated when the event would be queued,
-- at no extra cost, and its error aborts the statement alike. The controls' rules stay a WHEN:
-- a page of claims or commits updates 64 controls in one statement.
CREATE TRIGGER approved_action_executions_keeps_dispatch_id
    AFTER UPDATE OF dispatch_id ON approved_action_executions FOR EACH ROW
    WHEN (NEW.dispatch_id <> OLD.dispatch_id) EXECUTE FUNCTION resolver_guard_execution();

CREATE TRIGGER approved_action_recovery_controls_state_machine
    AFTER UPDATE ON approved_action_recovery_controls FOR EACH ROW WHEN (
    OLD.status = 'resolved'
    OR NEW.dispatch_id <> OLD.dispatch_id
    OR NEW.execution_version < OLD.execution_version
    OR NEW.recovery_version < OLD.recovery_version
    OR (NEW.recovery_version = OLD.recovery_version
        AND (NEW.recovery_token IS DISTINCT FROM OLD.recovery_token
             OR NEW.recovery_lease_expires_at_ms > OLD.recovery_lease_expires_at_ms))
) EXECUTE FUNCTION resolver_guard_control();

-- Who checks the rule at commit, for each write that can break it: a new version of an
-- execution in the same state (a renew, a takeover), here; a control born, or its
-- execution_version changed, by the controls' triggers below. The two transitions that change
-- the state each settle their control in the same statement: the start barrier inserts it
-- (the birth's own check reads the same pair at commit, once, where this trigger would
-- read it a second time) and a terminal transition closes it (resolver_executions_changed
-- refuses the statement otherwise). Written without the terminal states' function, which a
-- WHEN would call again in every statement that updates executions.
CREATE CONSTRAINT TRIGGER approved_action_executions_control_in_step
    AFTER UPDATE OF version ON approved_action_executions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.version <> OLD.version AND NEW.state = OLD.state)
    EXECUTE FUNCTION resolver_check_control_in_step();

CREATE TRIGGER approved_action_executions_changed
    AFTER UPDATE ON approved_action_executions REFERENCING OLD TABLE AS before NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_executions_changed();

CREATE CONSTRAINT TRIGGER approved_action_recovery_controls_armed_in_step
    AFTER INSERT ON approved_action_recovery_controls
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.status <> 'resolved')
    EXECUTE FUNCTION resolver_check_control_in_step();

CREATE CONSTRAINT TRIGGER approved_action_recovery_controls_in_step
    AFTER UPDATE OF execution_version ON approved_action_recovery_controls
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.status <> 'resolved' AND NEW.execution_version <> OLD.execution_version)
    EXECUTE FUNCTION resolver_check_control_in_step();

CREATE CONSTRAINT TRIGGER action_receipts_live_lease
    AFTER INSERT ON action_receipts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION resolver_check_receipt_lease();

CREATE TRIGGER approved_action_executions_born
    BEFORE INSERT ON approved_action_executions
    FOR EACH ROW EXECUTE FUNCTION resolver_execution_born();

CREATE TRIGGER approved_action_recovery_controls_born_armed
    AFTER INSERT ON approved_action_recovery_controls FOR EACH ROW
    WHEN (resolver_control_born_broken(NEW)) EXECUTE FUNCTION resolver_guard_insert();
