-- Every runtime statement of the resolver and the executor API, named noun-first.
-- Loaded by resolver/db/statements.py; tests/integration/test_statements.py runs each one.
-- `resolver_now_ms(%(now_ms)s)` is the database clock; `now_ms` is NULL outside tests.
-- Global lock order: execution row, then control row, then inserts. The claim locks
-- controls only and never waits (SKIP LOCKED).

-- name: ping
SELECT 1;

-- name: dispatch_insert
-- Immutable identity; ON CONFLICT lets an exact re-create be answered idempotently.
INSERT INTO approved_action_dispatches (
    dispatch_id, approval_request_id, project_id, action_type, action_digest,
    idempotency_key, schema_version, supersedes_dispatch_id)
VALUES (
    %(dispatch_id)s, %(approval_request_id)s, %(project_id)s, %(action_type)s,
    %(action_digest)s, %(idempotency_key)s, %(schema_version)s, %(supersedes_dispatch_id)s)
ON CONFLICT DO NOTHING
RETURNING dispatch_id;

-- name: dispatch_get
SELECT dispatch_id, approval_request_id, project_id, action_type, action_digest,
       idempotency_key, schema_version, supersedes_dispatch_id, created_at_ms
FROM approved_action_dispatches
WHERE dispatch_id = %(dispatch_id)s OR idempotency_key = %(idempotency_key)s
ORDER BY dispatch_id = %(dispatch_id)s DESC
LIMIT 1;

-- name: execution_lease
-- First lease, or takeover of a `leased` execution whose lease expired (it never crossed the
-- barrier, so running it again is safe). An `executing` row is never leased again.
INSERT INTO approved_action_executions AS e (
    dispatch_id, state, owner, token, version, attempt, lease_expires_at_ms)
SELECT %(dispatch_id)s, 'leased', %(owner)s, gen_random_uuid(), 1, 1,
       resolver_now_ms(%(now_ms)s) + %(lease_ms)s
ON CONFLICT (dispatch_id) DO UPDATE
SET owner = EXCLUDED.owner,
    token = EXCLUDED.token,
    version = e.version + 1,
    attempt = e.attempt + 1,
    lease_expires_at_ms = EXCLUDED.lease_expires_at_ms
WHERE e.state = 'leased'
  AND e.lease_expires_at_ms <= EXCLUDED.lease_expires_at_ms - %(lease_ms)s
RETURNING dispatch_id, owner, token::text, version, attempt, lease_expires_at_ms, state;

-- name: execution_start
-- The start barrier: leased -> executing and the recovery control armed, one statement.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
started AS (
    UPDATE approved_action_executions AS e
    SET state = 'executing',
        version = e.version + 1,
        started_at_ms = now.ms,
        lease_expires_at_ms = now.ms + %(lease_ms)s
    FROM now
    WHERE e.dispatch_id = %(dispatch_id)s AND e.owner = %(owner)s AND e.token = %(token)s
      AND e.version = %(version)s AND e.state = 'leased' AND e.lease_expires_at_ms > now.ms
    RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt, e.lease_expires_at_ms,
              e.state, e.started_at_ms
),
armed AS (
    INSERT INTO approved_action_recovery_controls (
        dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms)
    SELECT dispatch_id, 'armed', version, lease_expires_at_ms, started_at_ms FROM started
    RETURNING dispatch_id
)
SELECT s.dispatch_id, s.owner, s.token::text, s.version, s.attempt, s.lease_expires_at_ms,
       s.state
FROM started AS s JOIN armed USING (dispatch_id);

-- name: execution_renew
-- Extends the lease; for an executing row the control follows in the same statement:
-- new execution_version, recovery lease revoked (recovery_version+1), next scan pushed to
-- the new expiry, and a manual control re-armed (the executor is alive after all).
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
renewed AS (
    UPDATE approved_action_executions AS e
    SET version = e.version + 1,
        lease_expires_at_ms = now.ms + %(lease_ms)s
    FROM now
    WHERE e.dispatch_id = %(dispatch_id)s AND e.owner = %(owner)s AND e.token = %(token)s
      AND e.version = %(version)s AND e.state IN ('leased', 'executing')
    RETURNING e.dispatch_id, e.owner, e.token, e.version, e.attempt, e.lease_expires_at_ms,
              e.state
),
rearmed AS (
    UPDATE approved_action_recovery_controls AS c
    SET execution_version = r.version,
        status = 'armed',
        manual_at_ms = NULL,
        recovery_version = c.recovery_version + 1,
        recovery_owner = NULL,
        recovery_token = NULL,
        recovery_lease_expires_at_ms = NULL,
        next_scan_at_ms = r.lease_expires_at_ms
    FROM renewed AS r
    WHERE c.dispatch_id = r.dispatch_id AND c.status IN ('armed', 'manual')
    RETURNING c.dispatch_id
)
SELECT r.dispatch_id, r.owner, r.token::text, r.version, r.attempt, r.lease_expires_at_ms,
       r.state, (SELECT count(*) FROM rearmed) AS controls_rearmed
FROM renewed AS r;

-- name: execution_complete
-- Terminal state fenced on owner/token/version, control closed by the completion.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
completed AS (
    UPDATE approved_action_executions AS e
    SET state = %(outcome)s,
        version = e.version + 1,
        finished_at_ms = now.ms,
        result_code = %(result_code)s,
        completion_mutation_id = %(mutation_id)s,
        evidence_digest = %(evidence_digest)s
    FROM now
    WHERE e.dispatch_id = %(dispatch_id)s AND e.owner = %(owner)s AND e.token = %(token)s
      AND e.version = %(version)s AND e.state = 'executing'
    RETURNING e.dispatch_id, e.version, e.finished_at_ms
),
closed AS (
    UPDATE approved_action_recovery_controls AS c
    SET status = 'resolved',
        closed_by = 'completion',
        closed_at_ms = d.finished_at_ms,
        completion_mutation_id = %(mutation_id)s,
        execution_version = d.version,
        manual_at_ms = NULL,
        recovery_version = c.recovery_version + 1,
        recovery_owner = NULL,
        recovery_token = NULL,
        recovery_lease_expires_at_ms = NULL
    FROM completed AS d
    WHERE c.dispatch_id = d.dispatch_id AND c.status <> 'resolved'
    RETURNING c.dispatch_id
)
SELECT d.dispatch_id, d.version, (SELECT count(*) FROM closed) AS controls_closed
FROM completed AS d;

-- name: execution_get
SELECT e.dispatch_id, e.state, e.owner, e.token::text, e.version, e.attempt,
       e.lease_expires_at_ms, e.started_at_ms, e.finished_at_ms, e.result_code,
       e.completion_mutation_id, e.evidence_digest,
       r.source AS resolution_source, r.outcome AS resolution_outcome,
       r.evidence_digest AS resolution_evidence_digest,
       resolver_now_ms(%(now_ms)s) AS db_now_ms
FROM approved_action_executions AS e
LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
WHERE e.dispatch_id = %(dispatch_id)s;

-- fragment: claimable_control
-- The one definition of "claimable", for the control aliased `c` and a CTE `now(ms)`: armed,
-- due, no live recovery lease, and its execution recovery_required (executing, lease
-- expired) at the version the control was armed for. The claim, the backlog (metrics and
-- `resolver status`) include it; `now` is read through scalar subqueries so that the
-- planner keeps the due index's bound and order (a join would hide them).
c.status = 'armed'
AND c.next_scan_at_ms <= (SELECT ms FROM now)
AND (c.recovery_lease_expires_at_ms IS NULL
     OR c.recovery_lease_expires_at_ms <= (SELECT ms FROM now))
AND EXISTS (
    SELECT 1 FROM approved_action_executions AS e
    WHERE e.dispatch_id = c.dispatch_id
      AND e.state = 'executing' AND e.lease_expires_at_ms <= (SELECT ms FROM now)
      AND e.version = c.execution_version)

-- name: recovery_claim_due_page
-- One keyset page of due controls whose execution is recovery_required (executing with an
-- expired lease). The claimed row's next_scan_at_ms moves to the recovery lease expiry, so
-- a replica that dies holding it hands it back by time alone.
-- `now` is read through scalar subqueries (one value, an index bound), not joined: a join
-- hides the due index's order from the planner, which then sorts every due row per claim.
-- Run alone (autocommit), the claim commits without waiting for its WAL flush
-- (set_config is_local): a claim lost in a crash only makes its page claimable again, a
-- stale holder's commit is fenced out, and the durable page commit flushes this WAL first.
WITH now AS (
    SELECT resolver_now_ms(%(now_ms)s) AS ms,
           set_config('synchronous_commit', 'off', true) AS async_commit
),
due AS (
    SELECT c.dispatch_id
    FROM approved_action_recovery_controls AS c
    WHERE
        -- include: claimable_control
    ORDER BY c.next_scan_at_ms, c.dispatch_id
    LIMIT %(page_size)s
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE approved_action_recovery_controls AS c
SET recovery_owner = %(owner)s,
    recovery_token = gen_random_uuid(),
    recovery_version = c.recovery_version + 1,
    recovery_lease_expires_at_ms = now.ms + %(lease_ms)s,
    next_scan_at_ms = now.ms + %(lease_ms)s
FROM due, now, approved_action_executions AS e, approved_action_dispatches AS d
WHERE c.dispatch_id = due.dispatch_id
  AND e.dispatch_id = c.dispatch_id
  AND d.dispatch_id = c.dispatch_id
RETURNING c.dispatch_id, c.recovery_token::text, c.recovery_version, c.execution_version,
          c.finding_count, d.schema_version, d.approval_request_id, d.project_id,
          d.action_type, d.action_digest, d.idempotency_key, e.attempt, e.started_at_ms,
          now.ms AS claimed_at_ms;

-- name: recovery_lock_executions
-- Step 1 of a page commit: lock the executions of verified items in key order.
SELECT dispatch_id FROM approved_action_executions
WHERE dispatch_id = ANY(%(dispatch_ids)s::text[])
ORDER BY dispatch_id
FOR UPDATE;

-- name: recovery_lock_controls
-- Step 2 of a page commit: lock every control of the page in key order.
SELECT dispatch_id FROM approved_action_recovery_controls
WHERE dispatch_id = ANY(%(dispatch_ids)s::text[])
ORDER BY dispatch_id
FOR UPDATE;

-- name: recovery_commit_page
-- Step 3: with the rows locked, `fenced` is exactly the set whose recovery lease and
-- execution version still hold; every write below applies to that set only, so each
-- dispatch commits all-or-nothing and a stale item writes nothing.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
item AS (
    SELECT * FROM unnest(
        %(dispatch_ids)s::text[], %(recovery_tokens)s::uuid[], %(recovery_versions)s::bigint[],
        %(execution_versions)s::bigint[], %(findings)s::text[], %(result_codes)s::text[],
        %(evidence_digests)s::text[], %(mutation_ids)s::text[], %(delays_ms)s::bigint[]
    ) AS i(dispatch_id, recovery_token, recovery_version, execution_version, finding,
           result_code, evidence_digest, mutation_id, delay_ms)
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
),
terminal AS (
    UPDATE approved_action_executions AS e
    SET state = CASE f.finding WHEN 'verified_succeeded' THEN 'succeeded' ELSE 'failed' END,
        version = e.version + 1,
        finished_at_ms = now.ms,
        result_code = f.result_code,
        evidence_digest = f.evidence_digest
    FROM fenced AS f, now
    WHERE e.dispatch_id = f.dispatch_id AND f.verified
    RETURNING e.dispatch_id
),
control AS (
    UPDATE approved_action_recovery_controls AS c
    SET status = CASE WHEN f.verified THEN 'resolved'
                      WHEN f.finding IN ('conflict', 'unsupported') THEN 'manual'
                      ELSE 'armed' END,
        execution_version = c.execution_version + CASE WHEN f.verified THEN 1 ELSE 0 END,
        closed_by = CASE WHEN f.verified THEN 'automatic' END,
        closed_at_ms = CASE WHEN f.verified THEN now.ms END,
        manual_at_ms = CASE WHEN f.finding IN ('conflict', 'unsupported') THEN now.ms END,
        last_finding = f.finding,
        finding_count = c.finding_count + 1,
        next_scan_at_ms = CASE WHEN f.verified OR f.finding IN ('conflict', 'unsupported')
                               THEN c.next_scan_at_ms ELSE now.ms + f.delay_ms END,
        recovery_version = c.recovery_version + 1,
        recovery_owner = NULL,
        recovery_token = NULL,
        recovery_lease_expires_at_ms = NULL
    FROM fenced AS f, now
    WHERE c.dispatch_id = f.dispatch_id
    RETURNING c.dispatch_id
),
resolution AS (
    INSERT INTO approved_action_recovery_resolutions (
        dispatch_id, mutation_id, source, outcome, finding, evidence_digest, result_code,
        expected_execution_version, resolved_at_ms)
    SELECT f.dispatch_id, f.mutation_id, 'automatic',
           CASE f.finding WHEN 'verified_succeeded' THEN 'succeeded' ELSE 'failed' END,
           f.finding, f.evidence_digest, f.result_code, f.execution_version, now.ms
    FROM fenced AS f, now
    WHERE f.verified
    RETURNING dispatch_id
)
SELECT f.dispatch_id,
       (SELECT count(*) FROM terminal) AS terminal_rows,
       (SELECT count(*) FROM control) AS control_rows,
       (SELECT count(*) FROM resolution) AS resolution_rows
FROM fenced AS f;

-- name: recovery_release_leases
-- Hands held recovery leases back at once (graceful shutdown), fenced on token/version.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
held AS (
    SELECT c.dispatch_id
    FROM approved_action_recovery_controls AS c
    JOIN unnest(%(dispatch_ids)s::text[], %(recovery_tokens)s::uuid[],
                %(recovery_versions)s::bigint[]) AS i(dispatch_id, recovery_token, recovery_version)
      ON c.dispatch_id = i.dispatch_id AND c.recovery_token = i.recovery_token
     AND c.recovery_version = i.recovery_version
    WHERE c.status = 'armed'
    ORDER BY c.dispatch_id
    FOR UPDATE OF c
)
UPDATE approved_action_recovery_controls AS c
SET recovery_version = c.recovery_version + 1,
    recovery_owner = NULL,
    recovery_token = NULL,
    recovery_lease_expires_at_ms = NULL,
    next_scan_at_ms = now.ms
FROM held, now
WHERE c.dispatch_id = held.dispatch_id
RETURNING c.dispatch_id;

-- name: manual_grant_get
-- The versions a manual decision will fence on at commit.
SELECT p.version AS project_version, b.version AS role_binding_version
FROM recovery_role_bindings AS b
JOIN recovery_projects AS p USING (project_id)
WHERE b.project_id = %(project_id)s AND b.user_id = %(user_id)s
  AND b.permission = 'approval.recover';

-- name: manual_context_get
-- Everything needed to explain why a manual commit did not apply.
SELECT d.project_id, e.state, e.version, e.lease_expires_at_ms,
       c.status AS control_status,
       r.mutation_id AS resolution_mutation_id, r.source AS resolution_source,
       r.outcome AS resolution_outcome, r.actor_user_id AS resolution_actor,
       r.reason_code AS resolution_reason_code,
       r.evidence_digest AS resolution_evidence_digest,
       r.expected_execution_version AS resolution_expected_version,
       m.dispatch_id AS mutation_dispatch_id,
       resolver_now_ms(%(now_ms)s) AS db_now_ms
FROM approved_action_dispatches AS d
JOIN approved_action_executions AS e USING (dispatch_id)
LEFT JOIN approved_action_recovery_controls AS c USING (dispatch_id)
LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
LEFT JOIN approved_action_recovery_resolutions AS m ON m.mutation_id = %(mutation_id)s
WHERE d.dispatch_id = %(dispatch_id)s;

-- name: manual_commit
-- A human decision: authorization fact, resolution and terminal state in one statement.
-- Fenced on: the grant and its project/role-binding versions (locked FOR SHARE so a
-- concurrent revocation waits or wins), authentication no older than the limit on the
-- database clock, the expected execution version, and the execution being recovery_required.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
granted AS (
    SELECT b.project_id
    FROM recovery_role_bindings AS b
    JOIN recovery_projects AS p USING (project_id)
    WHERE b.project_id = %(project_id)s AND b.user_id = %(user_id)s
      AND b.permission = 'approval.recover'
      AND b.version = %(role_binding_version)s AND p.version = %(project_version)s
    FOR SHARE OF b, p
),
settled AS (
    UPDATE approved_action_executions AS e
    SET state = %(outcome)s,
        version = e.version + 1,
        finished_at_ms = now.ms,
        evidence_digest = %(evidence_digest)s
    FROM now, approved_action_dispatches AS d
    WHERE e.dispatch_id = %(dispatch_id)s AND d.dispatch_id = e.dispatch_id
      AND d.project_id = %(project_id)s
      AND e.version = %(expected_execution_version)s
      AND e.state = 'executing' AND e.lease_expires_at_ms <= now.ms
      AND %(auth_time_ms)s::bigint >= now.ms - %(max_auth_age_ms)s
      AND %(auth_time_ms)s::bigint <= now.ms + %(clock_leeway_ms)s
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
    WHERE c.dispatch_id = s.dispatch_id
    RETURNING c.dispatch_id
),
resolution AS (
    INSERT INTO approved_action_recovery_resolutions (
        dispatch_id, mutation_id, source, outcome, evidence_digest,
        expected_execution_version, actor_user_id, reason_code, resolved_at_ms)
    SELECT s.dispatch_id, %(mutation_id)s, 'manual', %(outcome)s, %(evidence_digest)s,
           %(expected_execution_version)s, %(user_id)s, %(reason_code)s, s.finished_at_ms
    FROM settled AS s
    RETURNING mutation_id, resolved_at_ms
),
authorization_fact AS (
    INSERT INTO recovery_authorizations (
        mutation_id, user_id, permission, project_id, project_version, role_binding_version,
        auth_time_ms, amr, authorized_at_ms)
    SELECT r.mutation_id, %(user_id)s, 'approval.recover', %(project_id)s, %(project_version)s,
           %(role_binding_version)s, %(auth_time_ms)s, %(amr)s::text[], r.resolved_at_ms
    FROM resolution AS r
    RETURNING mutation_id
)
SELECT s.dispatch_id, s.version, (SELECT count(*) FROM closed) AS controls_closed,
       (SELECT count(*) FROM authorization_fact) AS authorizations
FROM settled AS s;

-- name: manual_queue_page
-- The human queue: manual controls in projects the user may recover, oldest first (keyset).
SELECT c.dispatch_id, d.project_id, d.action_type, c.last_finding, c.finding_count,
       c.manual_at_ms, e.version AS execution_version, e.started_at_ms, e.attempt
FROM approved_action_recovery_controls AS c
JOIN approved_action_dispatches AS d USING (dispatch_id)
JOIN approved_action_executions AS e USING (dispatch_id)
JOIN recovery_role_bindings AS b
  ON b.project_id = d.project_id AND b.user_id = %(user_id)s
 AND b.permission = 'approval.recover'
WHERE c.status = 'manual'
  AND (c.manual_at_ms, c.dispatch_id) > (%(after_manual_at_ms)s, %(after_dispatch_id)s)
ORDER BY c.manual_at_ms, c.dispatch_id
LIMIT %(limit)s;

-- name: backlog_oldest
-- The backlog read model (metrics and `resolver status`), part 1: two keyset probes, one per
-- partial index. The first row of each in index order is the oldest claimable control and
-- the oldest manual one, so a probe costs a few index lookups whatever the backlog.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms)
SELECT (SELECT ms FROM now) AS db_now_ms,
       (SELECT c.next_scan_at_ms
        FROM approved_action_recovery_controls AS c
        WHERE
            -- include: claimable_control
        ORDER BY c.next_scan_at_ms, c.dispatch_id
        LIMIT 1) AS oldest_claimable_at_ms,
       (SELECT m.manual_at_ms
        FROM approved_action_recovery_controls AS m
        WHERE m.status = 'manual' AND m.manual_at_ms IS NOT NULL
        ORDER BY m.manual_at_ms, m.dispatch_id
        LIMIT 1) AS oldest_manual_at_ms;

-- name: backlog_counts
-- Part 2: open controls by queue (due = claimable now, waiting = armed but not claimable
-- yet, manual) and action type. Each partial index is read in key order and cut at
-- %(count_cap)s rows, so a runaway backlog costs a bounded scan; a count at the cap means
-- "at least". The claimable test runs on the cut rows only.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
armed AS (
    SELECT c.dispatch_id,
           CASE WHEN
               -- include: claimable_control
           THEN 'due' ELSE 'waiting' END AS queue
    FROM approved_action_recovery_controls AS c
    WHERE c.status = 'armed'
    ORDER BY c.next_scan_at_ms, c.dispatch_id
    LIMIT %(count_cap)s
),
manual AS (
    SELECT m.dispatch_id, 'manual' AS queue
    FROM approved_action_recovery_controls AS m
    WHERE m.status = 'manual'
    ORDER BY m.manual_at_ms, m.dispatch_id
    LIMIT %(count_cap)s
),
open AS (
    SELECT dispatch_id, queue FROM armed
    UNION ALL
    SELECT dispatch_id, queue FROM manual
)
SELECT o.queue, d.action_type, count(*) AS dispatches
FROM open AS o
JOIN approved_action_dispatches AS d USING (dispatch_id)
GROUP BY o.queue, d.action_type
ORDER BY o.queue, d.action_type;
