-- The outcome feed: one record per settled outcome, appended in the transaction that settles
-- it, read in order with a cursor by the runtime that owns the run (docs/outcomes.md). Its
-- tables are in resolver/db/schema/tables/10_outcome_feed.sql.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.
--
-- Ordering without gaps. A record's place in the feed is (xid, seq): the id of the
-- transaction that wrote it (pg_current_xact_id(), assigned before the transaction commits)
-- and a sequence number. A plain sequence is not enough: transaction A takes seq 7,
-- transaction B takes 8 and commits first; a reader that saw 8 and moved its cursor past it
-- would never see 7. So a reader returns only records whose transaction id is below the
-- oldest transaction id still running in its snapshot (pg_snapshot_xmin): every transaction
-- below that horizon has ended, so nothing can still commit below a cursor the reader hands
-- out. A transaction that is running (or starts later) has an id at or above the horizon, so
-- its records sort after every cursor handed out so far. The cost: a record waits until every
-- transaction that started before it ended (an idle-in-transaction session holds the feed
-- back; its lag is the age of the oldest transaction). Transaction ids go on across a
-- failover (the standby replays them), so a cursor stays valid on the new primary.

-- Wakes the feed's listeners at COMMIT: NOTIFY resolver_outcomes, the payload the notifying
-- transaction's id. PostgreSQL folds identical notifications of one transaction into one, so a
-- transaction that appends many records notifies once. The id tells a listener what to wait
-- for: those records are readable once the horizon has passed it, and a transaction that took
-- its id earlier and still runs holds them back past this commit (nobody notifies when it
-- ends, so a listener woken too early polls until the horizon passes the id).
--
-- A notifying commit takes one lock for the whole cluster and holds it through its commit
-- record's flush, so notifying commits flush one after another (docs/performance.md measures
-- it). So a commit notifies only while a listener is registered (resolver_outcome_listen):
-- with none, executors completing at once flush together. The check runs after this
-- transaction took its id, so a listener that registers too late to be seen here took its
-- horizon afterwards and reads these records anyway (docs/outcomes.md). The database's (or a
-- role's) setting `resolver.outcomes_notify = off` leaves the NOTIFY out even then.
CREATE OR REPLACE FUNCTION resolver_outcomes_notify() RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF coalesce(current_setting('resolver.outcomes_notify', true), '') <> 'off'
       AND EXISTS (SELECT 1 FROM recovery_outcome_listeners AS l
                   WHERE l.listening_until_ms > resolver_now_ms(NULL)) THEN
        PERFORM pg_notify('resolver_outcomes', pg_current_xact_id()::text);
    END IF;
END
$$;

-- Registers the calling session as a listener of the feed's channel, or renews it, until the
-- answer (ms on the database clock). Call it after `LISTEN resolver_outcomes`, then read the
-- next transaction id (pg_snapshot_xmax(pg_current_snapshot())) in a statement of its own and
-- read the feed until its horizon passes that id: a commit that checked for listeners before
-- this registration committed did not notify. A registration lasts a minute: renew it well
-- within (both SDKs every 20 s), and after a renewal that came late, catch up the same way; a
-- listener whose process died stops being notified a minute later. Lapsed ones are removed.
CREATE OR REPLACE FUNCTION resolver_outcome_listen() RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
DECLARE
    now_ms bigint := resolver_now_ms(NULL);
    until_ms bigint := now_ms + 60000;
BEGIN
    DELETE FROM recovery_outcome_listeners AS l
    WHERE l.listening_until_ms <= now_ms AND l.pid <> pg_backend_pid();
    INSERT INTO recovery_outcome_listeners AS l (pid, listening_until_ms)
    VALUES (pg_backend_pid(), until_ms)
    ON CONFLICT (pid) DO UPDATE SET listening_until_ms = EXCLUDED.listening_until_ms;
    RETURN until_ms;
END
$$;

-- Ends the calling session's registration (before UNLISTEN, or before a pooled connection goes
-- back to its pool). Answers whether it was registered.
CREATE OR REPLACE FUNCTION resolver_outcome_unlisten() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
BEGIN
    DELETE FROM recovery_outcome_listeners AS l WHERE l.pid = pg_backend_pid();
    RETURN FOUND;
END
$$;

-- The people whose authorization facts a manual resolution carries, in a stable order (the
-- settled append's record and the dispatch's history name them alike). A function of its own,
-- called only for a manual resolution: a subquery in the append would be prepared in every
-- settling statement, the executor's completions included, which never carry one.
CREATE OR REPLACE FUNCTION resolver_decision_actors(p_mutation_id text)
RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT ARRAY(SELECT a.user_id FROM recovery_authorizations AS a
                 WHERE a.mutation_id = p_mutation_id ORDER BY a.user_id)
$$;

-- Appends, one trigger per kind of transition, each in the statement that makes it. AFTER
-- and per statement for the executions and the late evidence: a page commit of 64 settled
-- items appends with one INSERT, and the resolution and authorization facts its own statement
-- inserts (the automatic and manual commits are one statement each) are visible here.
--
-- settled: an execution reached succeeded, failed or blocked. Terminal rows never change
-- again (the state machine refuses it), so every terminal row of a statement's new rows has
-- just become terminal. Who settled it: no resolution, the executor's own completion; an
-- automatic resolution, the resolver with its finding; a manual one, the person(s) whose
-- authorization facts it carries. Neither a definer nor pinned: one of the owner's triggers
-- (04_executor_protocol.sql says why), as an execution is written only by its owner.
CREATE OR REPLACE FUNCTION resolver_outcomes_append_settled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Most updates settle nothing (every start barrier, every renewal): they read the
    -- transition table once and leave, where an INSERT of no rows would still open the feed's
    -- indexes and fire its statement trigger.
    IF NOT EXISTS (SELECT 1 FROM settled AS n WHERE n.state = ANY (resolver_terminal_states())) THEN
        RETURN NULL;
    END IF;
    INSERT INTO recovery_outcomes (
        kind, dispatch_id, approval_request_id, project_id, action_type, state, settled_by,
        finding, result_code, evidence_digest, mutation_id, reason_code, actors,
        occurred_at_ms)
    SELECT 'settled', n.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           n.state,
           CASE r.source WHEN 'automatic' THEN 'resolver' WHEN 'manual' THEN 'person'
                ELSE 'executor' END,
           r.finding, coalesce(n.result_code, r.result_code), n.evidence_digest,
           coalesce(r.mutation_id, n.completion_mutation_id), r.reason_code,
           CASE WHEN r.source = 'manual' THEN resolver_decision_actors(r.mutation_id) END,
           n.finished_at_ms
    FROM settled AS n
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
    WHERE n.state = ANY (resolver_terminal_states())
    ORDER BY n.dispatch_id;
    IF FOUND THEN
        PERFORM resolver_outcomes_notify();
    END IF;
    RETURN NULL;
END
$$;

-- contradicted: a verified late finding that disagrees with a person's decision. The terminal
-- state stays what the person decided; the record says what the evidence says.
CREATE OR REPLACE FUNCTION resolver_outcomes_append_contradicted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO recovery_outcomes (
        kind, dispatch_id, approval_request_id, project_id, action_type, state, settled_by,
        finding, result_code, evidence_digest, mutation_id, occurred_at_ms)
    SELECT 'contradicted', l.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           e.state, 'resolver', l.finding, l.result_code, l.evidence_digest,
           l.decision_mutation_id, l.observed_at_ms
    FROM observed AS l
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE NOT l.agrees
    ORDER BY l.dispatch_id;
    IF FOUND THEN
        PERFORM resolver_outcomes_notify();
    END IF;
    RETURN NULL;
END
$$;

-- superseded: a new dispatch names this one as the action it does again. The record carries
-- the old dispatch's state at that moment (`pending` when it was never leased,
-- `recovery_required` read as everywhere else) and the new dispatch's id.
CREATE OR REPLACE FUNCTION resolver_outcomes_append_superseded() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO recovery_outcomes (
        kind, dispatch_id, approval_request_id, project_id, action_type, state,
        superseded_by, occurred_at_ms)
    SELECT 'superseded', d.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           resolver_effective_state(e.state, e.lease_expires_at_ms, NEW.created_at_ms),
           NEW.dispatch_id, NEW.created_at_ms
    FROM approved_action_dispatches AS d
    LEFT JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE d.dispatch_id = NEW.supersedes_dispatch_id;
    PERFORM resolver_outcomes_notify();
    RETURN NULL;
END
$$;

-- The state a runtime reads: `pending` before the first lease, `recovery_required` for an
-- executing execution whose lease has expired (never stored), the stored state otherwise.
CREATE OR REPLACE FUNCTION resolver_effective_state(p_state text, p_lease_expires_at_ms bigint,
                                         p_now_ms bigint)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_state IS NULL THEN 'pending'
                WHEN p_state = 'executing' AND p_lease_expires_at_ms <= p_now_ms
                THEN 'recovery_required'
                ELSE p_state END
$$;

CREATE TRIGGER approved_action_executions_outcomes
    AFTER UPDATE ON approved_action_executions REFERENCING NEW TABLE AS settled
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_outcomes_append_settled();
CREATE TRIGGER recovery_late_evidence_outcomes
    AFTER INSERT ON recovery_late_evidence REFERENCING NEW TABLE AS observed
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_outcomes_append_contradicted();
CREATE TRIGGER approved_action_dispatches_outcomes
    AFTER INSERT ON approved_action_dispatches FOR EACH ROW
    WHEN (NEW.supersedes_dispatch_id IS NOT NULL)
    EXECUTE FUNCTION resolver_outcomes_append_superseded();

-- Only the appends write the feed. Each is a trigger of a settling statement, so its INSERT
-- fires this guard one trigger level deeper than any statement written by hand, the table
-- owner's included; no role but the owner holds INSERT at all. Getting past it takes a trigger
-- of one's own on another table, which is DDL, as disabling this guard is. Not the call-stack
-- check of resolver_guard_definer_write: a single completion appends with a statement of its
-- own, and reading the stack cost it more than the append itself (docs/performance.md).
CREATE OR REPLACE FUNCTION resolver_outcomes_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_trigger_depth() < 2 THEN
        IF NOT resolver_importing_history(TG_RELID) THEN
            RAISE EXCEPTION 'INSERT of recovery_outcomes only through the outcome appends'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- The feed is insert-only: only the three appends above write it, and only the prune deletes.
CREATE TRIGGER recovery_outcomes_immutable BEFORE UPDATE OR DELETE ON recovery_outcomes
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();
CREATE TRIGGER recovery_outcomes_append_only AFTER INSERT ON recovery_outcomes
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_outcomes_guard();

-- The projects the calling login may read through the feed, its status and its history: NULL
-- for every project, else those recovery_outcome_reader_scopes lists for any role the login is
-- a member of (an empty array when none is listed). Only a login in resolver_outcome_reader is
-- scoped, and not when it is also an executor (whose role reads every execution anyway) or a
-- superuser. session_user, not current_user: inside the SECURITY DEFINER reads current_user is
-- their owner. Behind a pooler the server login is the client's (PgBouncer's default).
CREATE OR REPLACE FUNCTION resolver_outcome_scope() RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF to_regrole('resolver_outcome_reader') IS NULL
       OR NOT pg_has_role(session_user, 'resolver_outcome_reader', 'MEMBER') THEN
        RETURN NULL;
    END IF;
    IF (SELECT r.rolsuper FROM pg_roles AS r WHERE r.rolname = session_user) THEN
        RETURN NULL;
    END IF;
    IF to_regrole('resolver_executor') IS NOT NULL
       AND pg_has_role(session_user, 'resolver_executor', 'MEMBER') THEN
        RETURN NULL;
    END IF;
    RETURN ARRAY(
        SELECT DISTINCT s.project_id FROM recovery_outcome_reader_scopes AS s
        WHERE CASE WHEN to_regrole(s.role_name) IS NULL THEN false
                   ELSE pg_has_role(session_user, s.role_name, 'MEMBER') END
        ORDER BY 1);
END
$$;

-- A cursor is `xid:seq`, as the reads below hand it out; '' or NULL is the beginning.
CREATE OR REPLACE FUNCTION resolver_outcome_cursor_parse(p_cursor text, OUT xid xid8, OUT seq bigint)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_cursor IS NULL OR p_cursor = '' THEN
        xid := '0'::xid8;
        seq := 0;
        RETURN;
    END IF;
    IF p_cursor !~ '^[0-9]{1,20}:[0-9]{1,19}$' THEN
        RAISE EXCEPTION 'cursor must be xid:seq as the feed handed it out'
            USING ERRCODE = 'RS005';
    END IF;
    xid := split_part(p_cursor, ':', 1)::xid8;
    seq := split_part(p_cursor, ':', 2)::bigint;
END
$$;

-- Records after a cursor, in feed order, below the horizon (see the top of this file). At
-- most p_limit (1-1000); p_project_id narrows to one project, and a scoped reader sees only its
-- projects' records (resolver_outcome_scope).
CREATE OR REPLACE FUNCTION resolver_outcomes_after(
    p_cursor text DEFAULT NULL, p_limit integer DEFAULT 100, p_project_id text DEFAULT NULL)
RETURNS TABLE (
    cursor text, kind text, dispatch_id text, approval_request_id text, project_id text,
    action_type text, state text, settled_by text, finding text, result_code text,
    evidence_digest text, mutation_id text, reason_code text, actors text[],
    superseded_by text, occurred_at_ms bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    after_xid xid8;
    after_position bigint;
    scope text[] := resolver_outcome_scope();
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'p_limit must be 1-1000' USING ERRCODE = 'RS005';
    END IF;
    SELECT c.xid, c.seq INTO after_xid, after_position
    FROM resolver_outcome_cursor_parse(p_cursor) AS c;
    RETURN QUERY
    SELECT o.xid::text || ':' || o.seq::text, o.kind::text, o.dispatch_id,
           o.approval_request_id, o.project_id, o.action_type, o.state, o.settled_by::text,
           o.finding, o.result_code, o.evidence_digest, o.mutation_id, o.reason_code,
           o.actors, o.superseded_by, o.occurred_at_ms
    FROM recovery_outcomes AS o
    WHERE (o.xid, o.seq) > (after_xid, after_position)
      AND o.xid < pg_snapshot_xmin(pg_current_snapshot())
      AND (p_project_id IS NULL OR o.project_id = p_project_id)
      AND (scope IS NULL OR o.project_id = ANY (scope))
    ORDER BY o.xid, o.seq
    LIMIT p_limit;
END
$$;

-- The cursor of "now": everything already settled lies before it, everything still to come
-- after it. A consumer that wants only new outcomes starts here.
CREATE OR REPLACE FUNCTION resolver_outcome_cursor_now() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text || ':0'
$$;

-- A registered consumer's stored cursor (NULL: not registered).
CREATE OR REPLACE FUNCTION resolver_outcome_consumer_cursor(p_consumer text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT c.cursor_xid::text || ':' || c.cursor_position::text
    FROM recovery_outcome_consumers AS c WHERE c.consumer = p_consumer
$$;

-- Saves a consumer's cursor after it handled what it read (registers it on first save). A
-- cursor never moves back: saving an older one keeps the stored one, so a slow duplicate of a
-- consumer cannot undo a faster one's progress. Answers the cursor now stored.
CREATE OR REPLACE FUNCTION resolver_outcome_consumer_save(p_consumer text, p_cursor text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
DECLARE
    at_xid xid8;
    at_position bigint;
    now_ms bigint := resolver_now_ms(NULL);
    stored text;
BEGIN
    IF NOT coalesce(resolver_is_id(p_consumer), false) THEN
        RAISE EXCEPTION 'p_consumer must be 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric'
            USING ERRCODE = 'RS005';
    END IF;
    SELECT c.xid, c.seq INTO at_xid, at_position
    FROM resolver_outcome_cursor_parse(p_cursor) AS c;
    INSERT INTO recovery_outcome_consumers AS t (
        consumer, cursor_xid, cursor_position, registered_at_ms, saved_at_ms)
    VALUES (p_consumer, at_xid, at_position, now_ms, now_ms)
    ON CONFLICT (consumer) DO UPDATE
    SET (cursor_xid, cursor_position, saved_at_ms) =
        (SELECT g.x, g.p, now_ms
         FROM (SELECT EXCLUDED.cursor_xid AS x, EXCLUDED.cursor_position AS p
               WHERE (EXCLUDED.cursor_xid, EXCLUDED.cursor_position)
                     > (t.cursor_xid, t.cursor_position)
               UNION ALL
               SELECT t.cursor_xid, t.cursor_position
               WHERE (EXCLUDED.cursor_xid, EXCLUDED.cursor_position)
                     <= (t.cursor_xid, t.cursor_position)) AS g)
    RETURNING t.cursor_xid::text || ':' || t.cursor_position::text INTO stored;
    RETURN stored;
END
$$;

-- Unregisters a consumer: retention no longer waits for it. True when it was registered.
CREATE OR REPLACE FUNCTION resolver_outcome_consumer_drop(p_consumer text) RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER AS $$
    WITH gone AS (DELETE FROM recovery_outcome_consumers AS c
                  WHERE c.consumer = p_consumer RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM gone)
$$;

-- One dispatch as a runtime sees it: its identity, the state it is in now (effective, on the
-- database clock), what settled it, and the newest dispatch that supersedes it. No row: no such
-- dispatch (or, for a scoped reader, none in its projects).
CREATE OR REPLACE FUNCTION resolver_dispatch_status(p_dispatch_id text)
RETURNS TABLE (
    dispatch_id text, approval_request_id text, project_id text, action_type text,
    idempotency_key text, supersedes_dispatch_id text, superseded_by text, state text,
    attempt integer, lease_expires_at_ms bigint, started_at_ms bigint, finished_at_ms bigint,
    result_code text, evidence_digest text, settled_by text, finding text,
    reason_code text, actors text[], control_status text, created_at_ms bigint,
    db_now_ms bigint)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    WITH now AS (SELECT resolver_now_ms(NULL) AS ms, resolver_outcome_scope() AS scope)
    SELECT d.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           d.idempotency_key, d.supersedes_dispatch_id,
           (SELECT s.dispatch_id FROM approved_action_dispatches AS s
            WHERE s.supersedes_dispatch_id = d.dispatch_id
            ORDER BY s.created_at_ms DESC, s.dispatch_id DESC LIMIT 1),
           resolver_effective_state(e.state, e.lease_expires_at_ms, now.ms),
           e.attempt, e.lease_expires_at_ms, e.started_at_ms, e.finished_at_ms,
           coalesce(e.result_code, r.result_code), e.evidence_digest,
           CASE WHEN e.state <> ALL (resolver_terminal_states()) THEN NULL
                WHEN r.source = 'automatic' THEN 'resolver'
                WHEN r.source = 'manual' THEN 'person'
                ELSE 'executor' END,
           r.finding, r.reason_code,
           CASE WHEN r.source = 'manual' THEN resolver_decision_actors(r.mutation_id) END,
           c.status, d.created_at_ms, now.ms
    FROM approved_action_dispatches AS d
    CROSS JOIN now
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_resolutions AS r ON r.dispatch_id = d.dispatch_id
    WHERE d.dispatch_id = p_dispatch_id
      AND (now.scope IS NULL OR d.project_id = ANY (now.scope))
$$;

-- One dispatch's history, oldest first: created, started (the barrier), then its feed records
-- (settled, contradicted, superseded), each with its cursor. Times are the database clock's.
-- Empty for a scoped reader when the dispatch is not in its projects.
CREATE OR REPLACE FUNCTION resolver_dispatch_history(p_dispatch_id text)
RETURNS TABLE (
    cursor text, kind text, state text, settled_by text, finding text, result_code text,
    reason_code text, actors text[], superseded_by text, attempt integer,
    occurred_at_ms bigint)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT h.cursor, h.kind, h.state, h.settled_by, h.finding, h.result_code, h.reason_code,
           h.actors, h.superseded_by, h.attempt, h.occurred_at_ms
    FROM (
        SELECT NULL::text AS cursor, 'created' AS kind, 'pending' AS state,
               NULL::text AS settled_by, NULL::text AS finding, NULL::text AS result_code,
               NULL::text AS reason_code, NULL::text[] AS actors, NULL::text AS superseded_by,
               NULL::integer AS attempt, d.created_at_ms AS occurred_at_ms,
               0 AS rank, NULL::xid8 AS xid, 0::bigint AS seq
        FROM approved_action_dispatches AS d WHERE d.dispatch_id = p_dispatch_id
        UNION ALL
        SELECT NULL, 'started', 'executing', NULL, NULL, NULL, NULL, NULL, NULL, e.attempt,
               e.started_at_ms, 1, NULL, 0
        FROM approved_action_executions AS e
        WHERE e.dispatch_id = p_dispatch_id AND e.started_at_ms IS NOT NULL
        UNION ALL
        SELECT o.xid::text || ':' || o.seq::text, o.kind, o.state, o.settled_by,
               o.finding, o.result_code, o.reason_code, o.actors, o.superseded_by, NULL,
               o.occurred_at_ms, 2, o.xid, o.seq
        FROM recovery_outcomes AS o WHERE o.dispatch_id = p_dispatch_id
    ) AS h
    CROSS JOIN (SELECT resolver_outcome_scope() AS scope) AS r
    WHERE r.scope IS NULL OR EXISTS (
        SELECT 1 FROM approved_action_dispatches AS d
        WHERE d.dispatch_id = p_dispatch_id AND d.project_id = ANY (r.scope))
    ORDER BY h.rank, h.xid, h.seq
$$;

-- Executable by PUBLIC by default: nobody may call the appends (they run as triggers) or the
-- helpers (they run inside the definers, as the owner); resolver/db/grants.sql grants the
-- reads and the consumer cursors to the roles that follow the feed.
REVOKE EXECUTE ON FUNCTION
    resolver_outcomes_notify(),
    resolver_outcomes_guard(),
    resolver_outcomes_append_settled(),
    resolver_outcomes_append_contradicted(),
    resolver_outcomes_append_superseded(),
    resolver_effective_state(text, bigint, bigint),
    resolver_decision_actors(text),
    resolver_outcome_scope(),
    resolver_outcome_cursor_parse(text),
    resolver_outcomes_after(text, integer, text),
    resolver_outcome_cursor_now(),
    resolver_outcome_consumer_cursor(text),
    resolver_outcome_consumer_save(text, text),
    resolver_outcome_listen(),
    resolver_outcome_unlisten(),
    resolver_outcome_consumer_drop(text),
    resolver_dispatch_status(text),
    resolver_dispatch_history(text)
FROM PUBLIC;

-- A definer function resolves names through a pinned path, the migrated schema first and
-- pg_temp last, so no caller can shadow a table or a function with an object of its own.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_outcomes_append_contradicted()',
        'resolver_outcomes_append_superseded()',
        'resolver_outcome_scope()',
        'resolver_outcome_cursor_parse(text)',
        'resolver_outcomes_after(text, integer, text)',
        'resolver_outcome_cursor_now()',
        'resolver_outcome_consumer_cursor(text)',
        'resolver_outcome_consumer_save(text, text)',
        'resolver_outcome_consumer_drop(text)',
        'resolver_outcome_listen()',
        'resolver_outcome_unlisten()',
        'resolver_dispatch_status(text)',
        'resolver_dispatch_history(text)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
