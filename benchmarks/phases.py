"""The measured phases: drains (bare loop and resolver), claim scan cost, idle writes."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from benchmarks import seed, sql
from benchmarks.procs import Group
from benchmarks.protocol import ProcessStats
from resolver.db.statements import statement

POLL_SECONDS = 0.25

# Action type -> provider, as the replicas' RESOLVER_CONFIG maps them.
RECEIPT_ACTION = "bench.receipt"
INSTANT_ACTION = "bench.instant"
DELAYED_ACTION = "bench.delayed"


@dataclass(frozen=True, slots=True)
class DrainCase:
    name: str
    kind: str  # "bare" or "resolver"
    page_size: int
    action_type: str = INSTANT_ACTION
    receipts: bool = False


@dataclass(slots=True)
class DrainResult:
    case: DrainCase
    seeded: int
    resolved: int
    seconds: float
    claim_ms_p50: float
    claim_ms_p99: float
    statements_per_resolution: float | None
    peak_rss_mb: float
    processes: int
    timed_out: bool = False

    @property
    def per_second(self) -> float:
        return self.resolved / self.seconds if self.seconds > 0 else 0.0


@dataclass(slots=True)
class ScanResult:
    closed_small: int
    closed_large: int
    samples: int
    small_p50_ms: float
    large_p50_ms: float
    small_p99_ms: float
    large_p99_ms: float

    @property
    def ratio(self) -> float:
        return self.large_p50_ms / self.small_p50_ms if self.small_p50_ms else float("inf")


@dataclass(slots=True)
class IdleResult:
    seconds: float
    cycles: int
    tuples_written: int
    statement_wal_bytes: int | None
    """WAL written by the statements run in the resolver's database (pg_stat_statements)."""
    cluster_wal_bytes: int | None
    """All WAL of the private cluster, autovacuum and checkpointer included."""
    transactions: int = 0

    @property
    def writes_nothing(self) -> bool:
        return self.tuples_written == 0 and not self.statement_wal_bytes


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@contextmanager
def connect(url: str) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def vacuum(url: str, *, checkpoint: bool) -> None:
    with connect(url) as conn:
        conn.execute("VACUUM ANALYZE")
        if checkpoint:
            # Not a superuser on a given server: the phase still runs, without the checkpoint.
            with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                conn.execute("CHECKPOINT")


def prepare_drain(url: str, case: DrainCase, count: int) -> None:
    """Fresh tables with `count` due controls (and signed receipts when the case reads them)."""
    with connect(url) as conn:
        seed.reset(conn)
        due_ms = seed.db_now_ms(conn) - 1_000
        seed.seed_due(conn, count, action_type=case.action_type, prefix="b-", due_ms=due_ms)
    if case.receipts:
        seed.seed_receipts(url, prefix="b-", keys=seed.BENCH_KEYS, finished_ms=due_ms + 500)
    vacuum(url, checkpoint=True)


def drain(
    url: str,
    case: DrainCase,
    *,
    count: int,
    processes: int,
    work_dir: Path,
    replica_env: dict[str, str],
    statements: bool,
    max_seconds: float,
) -> DrainResult:
    prepare_drain(url, case, count)
    if case.kind == "bare":
        argv = [
            ["benchmarks.bare", url, str(case.page_size), f"bare-{i}"] for i in range(processes)
        ]
        env: dict[str, str] = {}
    else:
        argv = [["benchmarks.replica"] for _ in range(processes)]
        env = {**replica_env, "RESOLVER_PAGE_SIZE": str(case.page_size)}
    group = Group.start(argv, work_dir=work_dir, name=case.name, env=env)
    try:
        with connect(url) as monitor:
            if statements:
                monitor.execute(sql.STATEMENTS_RESET)
            go_ms = seed.db_now_ms(monitor)
            group.go()
            timed_out = _wait_drained(monitor, group, max_seconds)
            calls = _statement_calls(monitor) if statements else None
            stats = group.stop()
            span = monitor.execute(sql.RESOLVED_SPAN).fetchone()
    except BaseException:
        group.kill()
        raise
    assert span is not None
    resolved = int(span["n"])
    seconds = max(0.001, ((span["last_ms"] or go_ms) - go_ms) / 1000)
    return _drain_result(case, count, resolved, seconds, stats, calls, timed_out)


def _wait_drained(monitor: psycopg.Connection[dict[str, Any]], group: Group, limit: float) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        row = monitor.execute(sql.COUNT_ARMED).fetchone()
        if row is not None and row["n"] == 0:
            return False
        if group.all_exited():
            return False
    return True


def _statement_calls(monitor: psycopg.Connection[dict[str, Any]]) -> int:
    row = monitor.execute(sql.STATEMENT_CALLS).fetchone()
    return int(row["calls"]) if row else 0


def _drain_result(
    case: DrainCase,
    count: int,
    resolved: int,
    seconds: float,
    stats: list[ProcessStats],
    calls: int | None,
    timed_out: bool,
) -> DrainResult:
    claims = [ms for s in stats for ms in s.claim_ms]
    return DrainResult(
        case=case,
        seeded=count,
        resolved=resolved,
        seconds=seconds,
        claim_ms_p50=percentile(claims, 50),
        claim_ms_p99=percentile(claims, 99),
        statements_per_resolution=(calls / resolved) if calls is not None and resolved else None,
        peak_rss_mb=max((s.peak_rss_kb for s in stats), default=0) / 1024,
        processes=len(stats),
        timed_out=timed_out,
    )


# -- claim cost against history ------------------------------------------------------------


def scan_cost(
    small_url: str,
    large_url: str,
    *,
    closed_small: int,
    closed_large: int,
    due: int,
    page_size: int,
    samples: int,
) -> ScanResult:
    """Claim latency with little vs much settled history; both databases hold the same due
    set, and the samples alternate between them so machine noise hits both alike."""
    for url, closed in ((small_url, closed_small), (large_url, closed_large)):
        with connect(url) as conn:
            now_ms = seed.db_now_ms(conn)
            seed.seed_closed(conn, closed, first=1, prefix="c-", now_ms=now_ms)
            seed.seed_live(conn, due, prefix="l-", now_ms=now_ms)
            seed.seed_due(conn, due, action_type=INSTANT_ACTION, prefix="q-", due_ms=now_ms)
        vacuum(url, checkpoint=True)
    small: list[float] = []
    large: list[float] = []
    with connect(small_url) as a, connect(large_url) as b:
        for _ in range(max(1, samples // 25)):
            small += _claim_samples(a, page_size, 25)
            large += _claim_samples(b, page_size, 25)
    return ScanResult(
        closed_small=closed_small,
        closed_large=closed_large,
        samples=len(small),
        small_p50_ms=percentile(small, 50),
        large_p50_ms=percentile(large, 50),
        small_p99_ms=percentile(small, 99),
        large_p99_ms=percentile(large, 99),
    )


def _claim_samples(conn: psycopg.Connection[dict[str, Any]], page_size: int, n: int) -> list[float]:
    """Time the real claim statement; each claim is rolled back so the due set stays put."""
    params = {"owner": "scan", "page_size": page_size, "lease_ms": 60_000, "now_ms": None}
    claim = statement("recovery_claim_due_page")
    timings = []
    for _ in range(n):
        with conn.transaction(force_rollback=True):
            started = time.perf_counter()
            rows = conn.execute(claim, params, prepare=True).fetchall()
            timings.append((time.perf_counter() - started) * 1000)
        assert len(rows) == page_size, "the scan phase needs a full page every time"
    return timings


# -- idle writes -----------------------------------------------------------------------------


def idle_writes(
    url: str,
    *,
    seconds: float,
    work_dir: Path,
    replica_env: dict[str, str],
    private: bool,
    statements: bool,
) -> IdleResult:
    """One replica with nothing due (but live and settled rows to scan) for `seconds`."""
    with connect(url) as conn:
        seed.reset(conn)
        now_ms = seed.db_now_ms(conn)
        seed.seed_live(conn, 1_000, prefix="l-", now_ms=now_ms)
        seed.seed_closed(conn, 1_000, first=1, prefix="c-", now_ms=now_ms)
    # The seeding backend reports its row counts as it exits; were that to land after the
    # ANALYZE, autovacuum would analyze again inside the idle window.
    time.sleep(1.5)
    vacuum(url, checkpoint=True)
    time.sleep(1.5)
    group = Group.start([["benchmarks.replica"]], work_dir=work_dir, name="idle", env=replica_env)
    try:
        if statements:
            with connect(url) as conn:
                conn.execute(sql.STATEMENTS_RESET)
        before = _counters(url)
        group.go()
        time.sleep(seconds)
        (stats,) = group.stop()
    except BaseException:
        group.kill()
        raise
    time.sleep(1.5)  # the replica's backend flushed its counters at exit
    after = _counters(url)
    with connect(url) as conn:
        statement_wal = _statement_wal(conn) if statements else None
        cluster_wal = None
        if private:
            row = conn.execute(sql.WAL_BYTES_SINCE, {"lsn": before["wal_lsn"]}).fetchone()
            cluster_wal = int(row["bytes"]) if row else None
    return IdleResult(
        seconds=seconds,
        cycles=stats.cycles,
        tuples_written=sum(
            after[k] - before[k] for k in ("tup_inserted", "tup_updated", "tup_deleted")
        ),
        statement_wal_bytes=statement_wal,
        cluster_wal_bytes=cluster_wal,
        transactions=after["xact_commit"] - before["xact_commit"],
    )


def _statement_wal(conn: psycopg.Connection[dict[str, Any]]) -> int:
    row = conn.execute(sql.STATEMENT_WAL).fetchone()
    return int(row["bytes"]) if row else 0


def _counters(url: str) -> dict[str, Any]:
    with connect(url) as conn:
        row = conn.execute(sql.DATABASE_COUNTERS).fetchone()
    assert row is not None
    return dict(row)
