"""One executor of `python -m benchmarks.executor_path`: a process that runs approved actions
one after another, each through the whole happy path, and times every call.

    python -m benchmarks.executor_loop CASE URL PREFIX COUNT STATS

CASE is `sql` (the documented SQL functions called by hand, one connection, each call its
own transaction), `sql2` (the same calls in the two transactions the protocol allows at
least: the dispatch, its lease and the start barrier; then the mutation, its receipt and the
completion), `bare` and `bare2` (the same durable transactions written by hand on tables of
the same shape, without the protocol's functions and triggers), `python` (the Python SDK
exactly as docs/executor-sdk.md shows it) or `graphile` (graphile-worker's `add_job`, one job
at a time: its workers run beside). The process prints `ready` once connected, starts on
`go` (stdin), prints `done` after COUNT actions, and writes its figures as JSON to STATS when
the harness sends SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, LiteralString

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from benchmarks.protocol import await_go, peak_rss_kb
from benchmarks.seed import BENCH_KEYS
from resolver.core.domain import DispatchIdentity, Outcome, sha256_hex
from resolver.db.statements import statement
from resolver.evidence.receipts import encode_receipt, sign_receipt

OWNER = "bench-executor"
LEASE_MS = 30_000
ACTION_TYPE = "bench.mutation"
# The executor's own mutation: one row of the platform's table, spread so loops rarely meet.
ACCOUNTS = 10_000
CALLS = ("create", "lease", "start", "mutation", "complete")
# The two-transaction path's calls, and an SDK's (its run leases and starts before the body).
CALLS_TWO = ("create+lease+start", "mutation+complete")
CALLS_SDK = ("create", "lease+start", "mutation+complete")

# The platform's table the mutation writes (created by the harness in every database).
ACCOUNTS_TABLE: LiteralString = """
CREATE TABLE bench_accounts (id integer PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO bench_accounts SELECT n, 1000000 FROM generate_series(0, 9999) AS n;
ANALYZE bench_accounts
"""
MUTATION: LiteralString = "UPDATE bench_accounts SET balance = balance - 1 WHERE id = %s"

# -- the bare baseline: the same durable facts, written by hand ------------------------------
# The database clock as the protocol reads it, without the protocol's helper.
_NOW: LiteralString = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
BARE_CREATE: LiteralString = """
INSERT INTO approved_action_dispatches (
    dispatch_id, approval_request_id, project_id, action_type, action_digest,
    idempotency_key, schema_version)
VALUES (%(dispatch_id)s, %(approval_request_id)s, %(project_id)s, %(action_type)s,
        %(action_digest)s, %(idempotency_key)s, 1)
"""
BARE_LEASE: LiteralString = (
    """
INSERT INTO approved_action_executions (
    dispatch_id, state, owner, token, version, attempt, lease_expires_at_ms)
VALUES (%(dispatch_id)s, 'leased', %(owner)s, gen_random_uuid(), 1, 1, """
    + _NOW
    + """ + %(lease_ms)s)
RETURNING dispatch_id, owner, token::text, version
"""
)
BARE_START: LiteralString = (
    """
WITH n AS (SELECT """
    + _NOW
    + """ AS ms),
e AS (
    UPDATE approved_action_executions AS e
    SET state = 'executing', version = e.version + 1, started_at_ms = n.ms,
        lease_expires_at_ms = n.ms + %(lease_ms)s
    FROM n
    WHERE e.dispatch_id = %(dispatch_id)s AND e.owner = %(owner)s AND e.token = %(token)s::uuid
      AND e.version = %(version)s AND e.state = 'leased' AND e.lease_expires_at_ms > n.ms
    RETURNING e.dispatch_id, e.owner, e.token, e.version, e.lease_expires_at_ms, e.started_at_ms
)
INSERT INTO approved_action_recovery_controls (
    dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms)
SELECT dispatch_id, 'armed', version, lease_expires_at_ms, started_at_ms FROM e
RETURNING dispatch_id, %(owner)s AS owner, %(token)s AS token, execution_version AS version
"""
)
BARE_IDENTITY: LiteralString = (
    """
SELECT d.schema_version::integer, d.dispatch_id, d.approval_request_id, d.project_id,
       d.action_type, d.action_digest, d.idempotency_key, e.attempt, e.started_at_ms,
       """
    + _NOW
    + """ AS db_now_ms
FROM approved_action_executions AS e
JOIN approved_action_dispatches AS d USING (dispatch_id)
WHERE e.dispatch_id = %(dispatch_id)s AND e.owner = %(owner)s AND e.token = %(token)s::uuid
  AND e.version = %(version)s AND e.state = 'executing' AND e.lease_expires_at_ms > """
    + _NOW
    + """
FOR SHARE OF e
"""
)
BARE_RECEIPT: LiteralString = """
INSERT INTO action_receipts (dispatch_id, receipt) VALUES (%(dispatch_id)s, %(receipt)s)
"""
BARE_COMPLETE: LiteralString = (
    """
WITH n AS (SELECT """
    + _NOW
    + """ AS ms),
e AS (
    UPDATE approved_action_executions AS e
    SET state = %(outcome)s, version = e.version + 1, finished_at_ms = n.ms,
        result_code = %(result_code)s, completion_mutation_id = %(mutation_id)s,
        evidence_digest = %(evidence_digest)s
    FROM n
    WHERE e.dispatch_id = %(dispatch_id)s AND e.owner = %(owner)s AND e.token = %(token)s::uuid
      AND e.version = %(version)s AND e.state = 'executing'
    RETURNING e.dispatch_id, e.version, e.state, e.finished_at_ms
),
-- The outcome record every settled action gets in its completion's transaction (the SQL path's
-- trigger appends it).
o AS (
    INSERT INTO recovery_outcomes (
        kind, dispatch_id, approval_request_id, project_id, action_type, state, settled_by,
        result_code, evidence_digest, mutation_id, occurred_at_ms)
    SELECT 'settled', e.dispatch_id, d.approval_request_id, d.project_id, d.action_type,
           e.state, 'executor', %(result_code)s, %(evidence_digest)s, %(mutation_id)s,
           e.finished_at_ms
    FROM e JOIN approved_action_dispatches AS d USING (dispatch_id)
)
UPDATE approved_action_recovery_controls AS c
SET status = 'resolved', closed_by = 'completion', closed_at_ms = e.finished_at_ms,
    completion_mutation_id = %(mutation_id)s, execution_version = e.version,
    recovery_version = c.recovery_version + 1
FROM e
WHERE c.dispatch_id = e.dispatch_id AND c.status <> 'resolved'
RETURNING c.dispatch_id
"""
)

GRAPHILE_ADD: LiteralString = (
    "SELECT id FROM graphile_worker.add_job('noop', json_build_object('id', %s::text))"
)


@dataclass(slots=True)
class LoopStats:
    actions: int = 0
    started_at: float = 0.0
    """Wall clock (s) when the first action began."""
    finished_at: float = 0.0
    """Wall clock (s) when the last action ended."""
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    peak_rss_kb: int = 0


class Timer:
    """Each call's latency, in milliseconds, by call name."""

    def __init__(self, stats: LoopStats) -> None:
        self._stats = stats

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self.since(name, started)

    def since(self, name: str, started: float) -> None:
        """Record the span from `started` (a `time.perf_counter()` reading) to now."""
        elapsed = (time.perf_counter() - started) * 1000
        self._stats.latency_ms.setdefault(name, []).append(elapsed)


@dataclass(frozen=True, slots=True)
class Action:
    """One approved action: its dispatch and the account its mutation writes."""

    dispatch_id: str
    account: int

    @property
    def spec(self) -> dict[str, Any]:
        return {
            "dispatch_id": self.dispatch_id,
            "approval_request_id": f"ar-{self.dispatch_id}",
            "project_id": f"proj-{self.account % 32}",
            "action_type": ACTION_TYPE,
            "action_digest": sha256_hex(f"action:{self.dispatch_id}".encode()),
            "idempotency_key": f"idem-{self.dispatch_id}",
        }


def actions(prefix: str, count: int) -> list[Action]:
    return [Action(f"{prefix}{n:09d}", n * 7919 % ACCOUNTS) for n in range(count)]


def _signed(identity_row: dict[str, Any], receipt_id: str) -> tuple[dict[str, Any], str]:
    row = dict(identity_row)
    now_ms = row.pop("db_now_ms")
    receipt = sign_receipt(
        DispatchIdentity(**row),
        outcome=Outcome.SUCCEEDED,
        result_code="applied",
        finished_at_ms=now_ms,
        receipt_id=receipt_id,
        keys=BENCH_KEYS,
    )
    return receipt, sha256_hex(encode_receipt(receipt))


def _fence(lease: dict[str, Any]) -> dict[str, Any]:
    return {k: lease[k] for k in ("dispatch_id", "owner", "token", "version")}


# -- the cases -------------------------------------------------------------------------------

Runner = Callable[[Action, Timer], None]


class Steps:
    """One path's steps on one connection: the documented SQL functions, or (`bare`) the same
    durable facts written by hand on tables whose protocol triggers the harness disabled, the
    fences in their WHERE clauses. The cases group the steps into transactions."""

    def __init__(self, url: str, *, bare: bool) -> None:
        self.conn = psycopg.connect(url, autocommit=True, row_factory=dict_row)
        self.bare = bare
        names = ("dispatch_create", "execution_lease", "execution_start", "receipt_identity",
                 "receipt_write", "execution_complete")  # fmt: skip
        self._sql = {name: statement(name) for name in names}

    def create(self, action: Action) -> None:
        if self.bare:
            self.conn.execute(BARE_CREATE, action.spec)
            return
        spec = {"schema_version": 1, "supersedes_dispatch_id": None, "action_summary": None}
        self.conn.execute(self._sql["dispatch_create"], {**action.spec, **spec})

    def lease(self, action: Action) -> dict[str, Any]:
        params = {"dispatch_id": action.dispatch_id, "owner": OWNER, "lease_ms": LEASE_MS}
        query = BARE_LEASE if self.bare else self._sql["execution_lease"]
        leased = self.conn.execute(query, params if self.bare else {**params, "now_ms": None})
        row = leased.fetchone()
        assert row is not None, "lease"
        return _fence(row)

    def start(self, leased: dict[str, Any]) -> dict[str, Any]:
        params = {**leased, "lease_ms": LEASE_MS}
        query = BARE_START if self.bare else self._sql["execution_start"]
        row = self.conn.execute(query, params if self.bare else {**params, "now_ms": None})
        started = row.fetchone()
        assert started is not None, "start fence"
        return _fence(started)

    def receipt(self, action: Action, fence: dict[str, Any]) -> str:
        """The mutation and its signed receipt, in the transaction the caller holds open."""
        self.conn.execute(MUTATION, (action.account,))
        query = BARE_IDENTITY if self.bare else self._sql["receipt_identity"]
        row = self.conn.execute(query, fence if self.bare else {**fence, "now_ms": None})
        identity = row.fetchone()
        assert identity is not None, "receipt fence"
        receipt, digest = _signed(identity, f"r-{action.dispatch_id}")
        if self.bare:
            params = {"dispatch_id": action.dispatch_id, "receipt": Jsonb(receipt)}
            self.conn.execute(BARE_RECEIPT, params)
        else:
            self.conn.execute(self._sql["receipt_write"], {**fence, "receipt": Jsonb(receipt)})
        return digest

    def complete(self, fence: dict[str, Any], digest: str) -> None:
        params = {
            **fence,
            "outcome": "succeeded",
            "result_code": "applied",
            "mutation_id": f"c-{fence['token']}",
            "evidence_digest": digest,
        }
        query = BARE_COMPLETE if self.bare else self._sql["execution_complete"]
        done = self.conn.execute(query, params if self.bare else {**params, "now_ms": None})
        assert done.fetchone() is not None, "complete fence"


def five_transactions(url: str, *, bare: bool) -> tuple[Runner, Callable[[], None]]:
    """Each protocol call its own transaction, the mutation and its receipt one more (`sql`,
    `bare`): five durable transactions."""
    path = Steps(url, bare=bare)
    return in_five(path), path.conn.close


def in_five(path: Steps) -> Runner:
    """The steps on `path` in five transactions."""

    def run(action: Action, time_it: Timer) -> None:
        with time_it("create"):
            path.create(action)
        with time_it("lease"):
            leased = path.lease(action)
        with time_it("start"):
            fence = path.start(leased)
        with time_it("mutation"), path.conn.transaction():
            digest = path.receipt(action, fence)
        with time_it("complete"):
            path.complete(fence, digest)

    return run


def two_transactions(url: str, *, bare: bool) -> tuple[Runner, Callable[[], None]]:
    """The fewest transactions the protocol allows (`sql2`, `bare2`): the dispatch, its lease
    and the start barrier commit together (the side effect begins only once that COMMIT has
    returned); the mutation, its receipt and the completion commit together."""
    path = Steps(url, bare=bare)
    return in_two(path), path.conn.close


def in_two(path: Steps) -> Runner:
    """The steps on `path` in two transactions."""

    def run(action: Action, time_it: Timer) -> None:
        with time_it("create+lease+start"), path.conn.transaction():
            path.create(action)
            fence = path.start(path.lease(action))
        with time_it("mutation+complete"), path.conn.transaction():
            path.complete(fence, path.receipt(action, fence))

    return run


# The path cases by name: bare or not, and how the steps group into transactions.
PATH_CASES: dict[str, tuple[bool, Callable[[Steps], Runner]]] = {
    "sql": (False, in_five),
    "sql2": (False, in_two),
    "bare": (True, in_five),
    "bare2": (True, in_two),
}


def graphile_case(url: str) -> tuple[Runner, Callable[[], None]]:
    """graphile-worker's side of a job's life a client pays: one `add_job` per action, its own
    transaction; the harness runs graphile-worker's workers beside."""
    conn = psycopg.connect(url, autocommit=True)

    def run(action: Action, time_it: Timer) -> None:
        with time_it("add_job"):
            conn.execute(GRAPHILE_ADD, (action.dispatch_id,))

    return run, conn.close


def python_case(url: str) -> tuple[Runner, Callable[[], None]]:
    """The Python SDK exactly as docs/executor-sdk.md shows it: the store and the runner once
    per process, and per action `create_dispatch`, then `run` with the mutation, its receipt
    and the completion in `effect.transaction(complete=True)`."""
    from resolver.executor import (
        DispatchSpec,
        ExecutionClient,
        PostgresExecutionStore,
        PostgresHandle,
        SideEffectRunner,
    )

    store = PostgresExecutionStore(PostgresHandle(url))
    store.__enter__()
    platform = ExecutionClient(store, owner="platform")
    runner = SideEffectRunner(
        store, database_url=url, owner=OWNER, keys=BENCH_KEYS, lease_seconds=LEASE_MS / 1000
    )

    def run(action: Action, time_it: Timer) -> None:
        with time_it("create"):
            platform.create_dispatch(DispatchSpec(**action.spec))
        body_started = time.perf_counter()
        with runner.run(action.dispatch_id) as effect:
            time_it.since("lease+start", body_started)
            effect.check()
            with time_it("mutation+complete"), effect.transaction(complete=True) as conn:
                conn.execute(MUTATION, (action.account,))
                effect.write_receipt(
                    conn, Outcome.SUCCEEDED, "applied", receipt_id=f"r-{action.dispatch_id}"
                )
        assert effect.result is not None

    def close() -> None:
        runner.close()
        store.__exit__(None, None, None)

    return run, close


CASES: dict[str, Callable[[str], tuple[Runner, Callable[[], None]]]] = {
    "sql": partial(five_transactions, bare=False),
    "sql2": partial(two_transactions, bare=False),
    "bare": partial(five_transactions, bare=True),
    "bare2": partial(two_transactions, bare=True),
    "python": python_case,
    "graphile": graphile_case,
}

_stop = threading.Event()


def main(argv: list[str]) -> None:
    case, url, prefix, count, stats_path = argv[0], argv[1], argv[2], int(argv[3]), argv[4]
    signal.signal(signal.SIGTERM, lambda *_: _stop.set())
    run, close = CASES[case](url)
    todo = actions(prefix, count)
    stats = LoopStats()
    time_it = Timer(stats)
    await_go()
    stats.started_at = time.time()
    for action in todo:
        run(action, time_it)
        stats.actions += 1
    stats.finished_at = time.time()
    print("done", flush=True)
    # Stay connected and idle until the harness has read this process's CPU.
    _stop.wait()
    close()
    stats.peak_rss_kb = peak_rss_kb()
    Path(stats_path).write_text(json.dumps(asdict(stats)), encoding="utf-8")


def read_stats(path: Path) -> LoopStats:
    return LoopStats(**json.loads(path.read_text(encoding="utf-8")))


if __name__ == "__main__":
    main(sys.argv[1:])
