"""The benchmark's own SQL: set-based seeding and measurements (it runs the product's own
claim and commit statements from resolver/db/queries.sql).

Seeding is set-based plain SQL run as the table owner, on purpose: executors go through the
protocol functions (docs/executor-protocol.md), one call per transition, which would make
seeding 100,000 rows cost minutes; these INSERTs write rows exactly as those functions leave
them (armed controls in step with their executions), so the state-machine triggers accept
them, with `resolver.import_history` on (IMPORT_HISTORY). The resolver's runtime SQL stays in
resolver/db/queries.sql.
"""

from __future__ import annotations

from typing import LiteralString

# Every seed's ids: `n` from %(first)s to %(last)s, each id %(prefix)s and `n` padded to nine
# digits (the CTE `g`).
_SEEDED_IDS: LiteralString = """
WITH g AS (
    SELECT n, %(prefix)s || lpad(n::text, 9, '0') AS id
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS n
),
"""

# Every seed's dispatches, one per row of its `g` (n, id): the CTE `d` of each statement below.
_SEEDED_DISPATCHES: LiteralString = """
d AS (
    INSERT INTO approved_action_dispatches (
        dispatch_id, approval_request_id, project_id, action_type, action_digest,
        idempotency_key, schema_version)
    SELECT id, 'ar-' || id, 'proj-' || (n %% 32), %(action_type)s,
           encode(sha256(convert_to('action:' || id, 'UTF8')), 'hex'), 'idem-' || id, 1
    FROM g
    RETURNING dispatch_id
),
"""

# Every seed's executions past the start barrier, leased until %(lease_expires_at_ms)s: the
# CTE `e` (with `g` and `d` before it), which each statement below follows with its controls.
_SEEDED_EXECUTING: LiteralString = (
    _SEEDED_IDS
    + _SEEDED_DISPATCHES
    + """e AS (
    INSERT INTO approved_action_executions (
        dispatch_id, state, owner, token, version, attempt, lease_expires_at_ms, started_at_ms)
    SELECT dispatch_id, 'executing', 'bench-executor', gen_random_uuid(), 2, 1,
           %(lease_expires_at_ms)s, %(started_at_ms)s
    FROM d
    RETURNING dispatch_id, lease_expires_at_ms, started_at_ms
)
"""
)

# Past the start barrier with a lease until %(lease_expires_at_ms)s, control armed: due
# (recovery_required) once the lease has expired, never claimable while it is live.
SEED_ARMED: LiteralString = (
    _SEEDED_EXECUTING
    + """INSERT INTO approved_action_recovery_controls (
    dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms)
SELECT dispatch_id, 'armed', 2, lease_expires_at_ms, started_at_ms FROM e
"""
)

# Settled history: completed executions (half by their executor, half by a resolution).
SEED_CLOSED: LiteralString = (
    _SEEDED_IDS
    + _SEEDED_DISPATCHES
    + """e AS (
    INSERT INTO approved_action_executions (
        dispatch_id, state, owner, token, version, attempt, lease_expires_at_ms,
        started_at_ms, finished_at_ms, result_code, completion_mutation_id)
    SELECT dispatch_id, 'succeeded', 'bench-executor', gen_random_uuid(), 3, 1,
           %(now_ms)s - 60000, %(now_ms)s - 90000, %(now_ms)s - 80000, 'ok', 'c-' || dispatch_id
    FROM d
    RETURNING dispatch_id, started_at_ms, finished_at_ms
),
r AS (
    INSERT INTO approved_action_recovery_resolutions (
        dispatch_id, mutation_id, source, outcome, finding, evidence_digest, result_code,
        expected_execution_version, resolved_at_ms)
    SELECT dispatch_id, 'auto-' || dispatch_id, 'automatic', 'succeeded', 'verified_succeeded',
           encode(sha256(convert_to(dispatch_id, 'UTF8')), 'hex'), 'ok', 2, finished_at_ms
    FROM e
    WHERE right(dispatch_id, 1) IN ('0', '2', '4', '6', '8')
)
INSERT INTO approved_action_recovery_controls (
    dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms, closed_by,
    closed_at_ms, completion_mutation_id, recovery_version, finding_count)
SELECT dispatch_id, 'resolved', 3, started_at_ms + 30000, started_at_ms,
       CASE WHEN right(dispatch_id, 1) IN ('0', '2', '4', '6', '8')
            THEN 'automatic' ELSE 'completion' END,
       finished_at_ms, 'c-' || dispatch_id, 2, 1
FROM e
"""
)

# The manual queue: executions recovery_required (lease expired long ago) whose controls a
# conflicting finding handed to a human, as the automatic commit leaves them.
SEED_MANUAL: LiteralString = (
    _SEEDED_EXECUTING
    + """INSERT INTO approved_action_recovery_controls (
    dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms, manual_at_ms,
    manual_reason, last_finding, finding_count, finding_counts, first_inspected_at_ms,
    last_inspected_at_ms, recovery_version)
SELECT dispatch_id, 'manual', 2, lease_expires_at_ms, started_at_ms, lease_expires_at_ms + 1000,
       'conflict', 'conflict', 1, '{"conflict": 1}', lease_expires_at_ms + 1000,
       lease_expires_at_ms + 1000, 2
FROM e
"""
)

# The late-evidence window: dispatches a human settled (a conflicting finding sent each to the
# manual queue, an operator confirmed `succeeded`) inside the last %(window_ms)s, spread evenly
# over it, as resolver_commit_manual leaves them: terminal execution, control closed by
# `manual`, the manual resolution, its authorization fact; the resolution's own trigger
# (resolver_open_late_watch) opens each watch, due at the decision. No audit-chain link: no
# statement the claim, the drain or the watcher runs reads the chain.
SEED_LATE: LiteralString = (
    """
WITH g AS (
    SELECT n, %(prefix)s || lpad(n::text, 9, '0') AS id,
           %(now_ms)s - 60000 - (n - 1) * ((%(window_ms)s - 120000) / %(total)s) AS decided_ms
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS n
),
"""
    + _SEEDED_DISPATCHES
    + """e AS (
    INSERT INTO approved_action_executions (
        dispatch_id, state, owner, token, version, attempt, lease_expires_at_ms,
        started_at_ms, finished_at_ms)
    SELECT d.dispatch_id, 'succeeded', 'bench-executor', gen_random_uuid(), 3, 1,
           g.decided_ms - 3600000, g.decided_ms - 3630000, g.decided_ms
    FROM d JOIN g ON g.id = d.dispatch_id
    RETURNING dispatch_id, lease_expires_at_ms, started_at_ms, finished_at_ms
),
c AS (
    INSERT INTO approved_action_recovery_controls (
        dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms, closed_by,
        closed_at_ms, manual_reason, last_finding, finding_count, finding_counts,
        first_inspected_at_ms, last_inspected_at_ms, recovery_version)
    SELECT dispatch_id, 'resolved', 3, lease_expires_at_ms, started_at_ms, 'manual',
           finished_at_ms, 'conflict', 'conflict', 1, '{"conflict": 1}',
           lease_expires_at_ms + 1000, lease_expires_at_ms + 1000, 2
    FROM e
),
r AS (
    INSERT INTO approved_action_recovery_resolutions (
        dispatch_id, mutation_id, source, outcome, finding, expected_execution_version,
        actor_user_id, reason_code, resolved_at_ms)
    SELECT dispatch_id, 'man-' || dispatch_id, 'manual', 'succeeded', 'conflict', 2,
           'bench-operator', 'operator_verified', finished_at_ms
    FROM e
    RETURNING mutation_id, resolved_at_ms
)
INSERT INTO recovery_authorizations (
    mutation_id, user_id, permission, project_id, project_version, role_binding_version,
    auth_time_ms, amr, authorized_at_ms)
SELECT r.mutation_id, 'bench-operator', 'approval.recover',
       'proj-' || (right(r.mutation_id, 9)::bigint %% 32), 1, 1, r.resolved_at_ms - 5000,
       '{pwd,otp}', r.resolved_at_ms
FROM r
"""
)

# What a receipt signer needs: the identity exactly as stored.
SEEDED_IDENTITIES: LiteralString = """
SELECT d.dispatch_id, d.approval_request_id, d.project_id, d.action_type, d.action_digest,
       d.idempotency_key, e.attempt, e.started_at_ms
FROM approved_action_dispatches AS d
JOIN approved_action_executions AS e USING (dispatch_id)
WHERE d.dispatch_id >= %(low)s AND d.dispatch_id <= %(high)s AND e.state = 'executing'
"""

# Seeding writes executions past `leased` and receipts of expired leases in one statement: the
# owner's import of history, which the state-machine triggers let through only with this flag
# set in the transaction (docs/schema.md, "Importing history").
# Waiting for evidence: expired leases, controls armed and inspected once (`missing`), the
# next look a minute away and an escalation window of an hour from the first inspection.
SEED_WAITING: LiteralString = (
    _SEEDED_EXECUTING
    + """INSERT INTO approved_action_recovery_controls (
    dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms, last_finding,
    finding_count, finding_counts, first_inspected_at_ms, last_inspected_at_ms,
    escalates_at_ms, recovery_version)
SELECT dispatch_id, 'armed', 2, %(now_ms)s + 60000, started_at_ms, 'missing', 1,
       '{"missing": 1}', lease_expires_at_ms + 1000, lease_expires_at_ms + 1000,
       lease_expires_at_ms + 1000 + 3600000, 2
FROM e
"""
)

# Open two-person proposals on the first %(last)s cases of the manual queue (prefix
# %(prefix)s), as the manual commit records a first person's decision: unsigned, which the
# list reads never look at.
SEED_PROPOSALS: LiteralString = """
INSERT INTO recovery_proposals (
    dispatch_id, mutation_id, outcome, expected_execution_version, reason_code, proposed_by,
    project_id, project_version, role_binding_version, auth_time_ms, amr, proposed_at_ms,
    expires_at_ms)
SELECT d.dispatch_id, 'p-' || d.dispatch_id, 'succeeded', 2, 'checked_downstream_succeeded',
       'bench-proposer', d.project_id, 1, 1, %(now_ms)s - 60000, '{pwd,otp}',
       %(now_ms)s - 60000, %(now_ms)s + 86400000
FROM approved_action_dispatches AS d
WHERE d.dispatch_id IN (
    SELECT %(prefix)s || lpad(n::text, 9, '0')
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS n)
"""

IMPORT_HISTORY: LiteralString = "SELECT set_config('resolver.import_history', 'on', true)"

RECEIPTS_COPY: LiteralString = (
    "COPY action_receipts (dispatch_id, receipt, written_at_ms) FROM STDIN"
)

TRUNCATE_ALL: LiteralString = """
TRUNCATE approved_action_dispatches, approved_action_executions,
         approved_action_recovery_controls, approved_action_recovery_resolutions,
         recovery_authorizations
CASCADE
"""

DB_NOW_MS: LiteralString = "SELECT resolver_now_ms(NULL) AS now_ms"

# Measurements.
COUNT_ARMED: LiteralString = (
    "SELECT /* bench-monitor */ count(*) AS n FROM approved_action_recovery_controls"
    " WHERE status = 'armed'"
)
STATEMENT_CALLS: LiteralString = """
SELECT /* bench-monitor */ coalesce(sum(s.calls), 0)::bigint AS calls
FROM pg_stat_statements AS s JOIN pg_database AS db ON db.oid = s.dbid
WHERE db.datname = current_database() AND s.query NOT LIKE '%%bench-monitor%%'
  AND s.query NOT LIKE '%%pg_stat_statements%%'
"""
# Where the server's time went: each statement's execution and planning time (top level:
# a function's own statements count in its call).
STATEMENT_PROFILE: LiteralString = """
SELECT /* bench-monitor */ left(regexp_replace(s.query, '\\s+', ' ', 'g'), 90) AS query,
       s.calls, s.total_exec_time AS exec_ms, s.total_plan_time AS plan_ms, s.plans
FROM pg_stat_statements AS s JOIN pg_database AS db ON db.oid = s.dbid
WHERE db.datname = current_database() AND s.query NOT LIKE '%%bench-monitor%%'
  AND s.query NOT LIKE '%%pg_stat_statements%%'
ORDER BY s.total_exec_time + s.total_plan_time DESC
LIMIT 8
"""
STATEMENTS_RESET: LiteralString = """
SELECT pg_stat_statements_reset(0, oid, 0) FROM pg_database WHERE datname = current_database()
"""
STATEMENT_WAL: LiteralString = """
SELECT /* bench-monitor */ coalesce(sum(s.wal_records), 0)::bigint AS records,
       coalesce(sum(s.wal_bytes), 0)::bigint AS bytes
FROM pg_stat_statements AS s JOIN pg_database AS db ON db.oid = s.dbid
WHERE db.datname = current_database() AND s.query NOT LIKE '%%bench-monitor%%'
  AND s.query NOT LIKE '%%pg_stat_statements%%'
"""
DATABASE_COUNTERS: LiteralString = """
SELECT /* bench-monitor */ xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted,
       pg_current_wal_insert_lsn()::text AS wal_lsn
FROM pg_stat_database WHERE datname = current_database()
"""
WAL_BYTES_SINCE: LiteralString = (
    "SELECT /* bench-monitor */ pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %(lsn)s::pg_lsn)"
    "::bigint AS bytes"
)

# The steady window and start-up of a drain, from the database's own records: the
# resolutions after `%(since_id)s` (the highest resolution id before the drain; identities
# only grow), so a history seeded beside the backlog (benchmarks.history) is not counted.
LAST_RESOLUTION_ID: LiteralString = (
    "SELECT /* bench-monitor */ coalesce(max(resolution_id), 0) AS id"
    " FROM approved_action_recovery_resolutions"
)
RESOLVED_SPAN: LiteralString = """
SELECT /* bench-monitor */ count(*) AS n, min(resolved_at_ms) AS first_ms,
       max(resolved_at_ms) AS last_ms
FROM approved_action_recovery_resolutions WHERE resolution_id > %(since_id)s
"""
ANY_RESOLVED: LiteralString = (
    "SELECT /* bench-monitor */ EXISTS (SELECT 1 FROM approved_action_recovery_resolutions"
    " WHERE resolution_id > %(since_id)s) AS yes"
)
ANY_ARMED: LiteralString = (
    "SELECT /* bench-monitor */ EXISTS (SELECT 1 FROM approved_action_recovery_controls"
    " WHERE status = 'armed') AS yes"
)
RESOLVED_COUNT: LiteralString = (
    "SELECT /* bench-monitor */ count(*) AS n FROM approved_action_recovery_resolutions"
    " WHERE resolution_id > %(since_id)s"
)
# A claim sets next_scan_at_ms to its own clock plus the recovery lease, and a verified
# commit leaves it there: the earliest one, less the lease, is when the first claim ran.
FIRST_CLAIM_MS: LiteralString = """
SELECT /* bench-monitor */ min(c.next_scan_at_ms) - %(lease_ms)s AS ms
FROM approved_action_recovery_resolutions AS r
JOIN approved_action_recovery_controls AS c USING (dispatch_id)
WHERE r.resolution_id > %(since_id)s AND c.status = 'resolved'
"""
# Every process of the cluster (backends and background workers) but this monitor's own
# backend; `all_databases` false limits it to the backends of the measured database.
SERVER_PIDS: LiteralString = """
SELECT /* bench-monitor */ pid FROM pg_stat_activity
WHERE pid <> pg_backend_pid()
  AND (%(all_databases)s OR datname = current_database())
"""
CLAIM_MEAN_MS: LiteralString = """
SELECT /* bench-monitor */ sum(s.total_exec_time) / nullif(sum(s.calls), 0) AS mean_ms
FROM pg_stat_statements AS s JOIN pg_database AS db ON db.oid = s.dbid
WHERE db.datname = current_database() AND s.query LIKE '%%SKIP LOCKED%%'
  AND s.query NOT LIKE '%%bench-monitor%%'
"""
