"""The measured phases: drains (bare loop and resolver), claim scan cost, idle writes."""

from __future__ import annotations

import contextlib
import json
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import yaml
from psycopg.rows import dict_row

from benchmarks import seed, sql
from benchmarks.procs import REPO_ROOT, Group, Replicas, cpu_delta_us, cpu_of
from benchmarks.profile import Profile
from resolver.db.statements import claim_statement

POLL_SECONDS = 0.05
START_POLL_SECONDS = 0.01
RECOVERY_LEASE_MS = 60_000

# Action type -> provider, as the replicas' RESOLVER_CONFIG maps them.
RECEIPT_ACTION = "bench.receipt"
INSTANT_ACTION = "bench.instant"
DELAYED_ACTION = "bench.delayed"
HTTP_ACTION = "bench.http"
HTTP_TOKEN_ENV = "BENCH_RECEIPT_TOKEN"


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
    """First to last resolution (`resolved_at_ms`, the database's clock)."""
    claim_ms_mean: float | None
    """Server-side mean of the claim statement (pg_stat_statements)."""
    statements_per_resolution: float | None
    peak_rss_mb: float
    processes: int
    startup_ms: float | None = None
    """Process spawn to the first claim of any replica (database clock; resolver cases)."""
    slowest_started_ms: float | None = None
    """Process spawn to the last replica's `resolver_started` log line (its loop starts)."""
    window_resolved: int = 0
    """Resolutions between the two CPU samples (first resolution seen, backlog drained)."""
    process_cpu_us: float | None = None
    """CPU µs per resolution of the measured processes (replicas or bare loops), /proc."""
    server_cpu_us: float | None = None
    """CPU µs per resolution of PostgreSQL's processes, /proc."""
    http: dict[str, Any] | None = None
    timed_out: bool = False
    profile: list[tuple[float, str]] | None = None
    """`--profile-seconds`: py-spy's inclusive share of one replica's samples per frame."""
    statements: list[dict[str, Any]] | None = None
    """The statements with the most server time: calls, µs per resolution executing and
    planning (pg_stat_statements, the whole drain)."""

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
    all_server_processes: bool,
    prepared: bool = False,
    per_replica: Callable[[int], Mapping[str, str]] | None = None,
    profile_seconds: float = 0.0,
) -> DrainResult:
    """Seed `count` due controls, drain them with `processes` processes, measure.

    Resolver cases spawn real `resolver run` processes configured by `replica_env` alone;
    the steady rate, the start-up and the CPU figures all come from outside the process
    (the database's rows and clock, /proc).
    """
    if not prepared:
        prepare_drain(url, case, count)
    with connect(url) as monitor:
        if statements:
            monitor.execute(sql.STATEMENTS_RESET)
        since = _since(monitor)
        bare: Group | None = None
        replicas: Replicas | None = None
        if case.kind == "bare":
            argv = [
                ["benchmarks.bare", url, str(case.page_size), f"bare-{i}"] for i in range(processes)
            ]
            bare = Group.start(argv, work_dir=work_dir, name=case.name)
            bare.go()
            pids = bare.pids
        else:
            env = {
                **replica_env,
                "RESOLVER_PAGE_SIZE": str(case.page_size),
                "RESOLVER_RECOVERY_LEASE_SECONDS": str(RECOVERY_LEASE_MS // 1000),
            }
            replicas = Replicas.start(
                processes, work_dir=work_dir, name=case.name, env=env, per_replica=per_replica
            )
            pids = replicas.pids
        alive = replicas.check_alive if replicas is not None else lambda: None
        profile = (
            Profile(profile_seconds, work_dir / f"{case.name}.pyspy.txt")
            if profile_seconds > 0 and replicas is not None
            else None
        )
        try:
            window = _measure(
                monitor,
                since,
                pids,
                alive,
                max_seconds,
                all_server_processes,
                on_first=(lambda: profile.start(pids[0])) if profile is not None else None,
            )
            calls = _statement_calls(monitor) if statements else None
            statement_rows = monitor.execute(sql.STATEMENT_PROFILE).fetchall() if statements else []
            claim_mean = _claim_mean(monitor) if statements else None
            group_rss = (replicas or bare).peak_rss_kb()  # type: ignore[union-attr]
            if replicas is not None:
                replicas.stop()
            if bare is not None:
                bare.stop()
            span = monitor.execute(sql.RESOLVED_SPAN, since).fetchone()
            first_claim = monitor.execute(
                sql.FIRST_CLAIM_MS, {"lease_ms": RECOVERY_LEASE_MS, **since}
            ).fetchone()
        except BaseException:
            for group in (replicas, bare):
                if group is not None:
                    group.kill()
            raise
    assert span is not None and first_claim is not None
    resolved = int(span["n"])
    seconds = max(0.001, ((span["last_ms"] or 0) - (span["first_ms"] or 0)) / 1000)
    result = DrainResult(
        case=case,
        seeded=count,
        resolved=resolved,
        seconds=seconds,
        claim_ms_mean=claim_mean,
        statements_per_resolution=(calls / resolved) if calls is not None and resolved else None,
        peak_rss_mb=group_rss / 1024,
        processes=processes,
        window_resolved=window.resolved,
        process_cpu_us=window.per_resolution(window.process_cpu_us),
        server_cpu_us=window.per_resolution(window.server_cpu_us),
        timed_out=window.timed_out,
        statements=_per_resolution(statement_rows, resolved) if statement_rows else None,
        profile=profile.finish() if profile is not None else None,
    )
    if replicas is not None:
        if first_claim["ms"] is not None:
            result.startup_ms = float(first_claim["ms"]) - replicas.spawned_ms
        started = replicas.started_ms()
        if len(started) == processes:
            result.slowest_started_ms = max(started) - replicas.spawned_ms
    return result


@dataclass(slots=True)
class Window:
    """CPU used between the first resolution and the end of the backlog."""

    resolved: int = 0
    process_cpu_us: int = 0
    server_cpu_us: int | None = None
    timed_out: bool = False

    def per_resolution(self, cpu: int | None) -> float | None:
        if cpu is None or self.resolved <= 0:
            return None
        return cpu / self.resolved


def _since(monitor: psycopg.Connection[dict[str, Any]]) -> dict[str, int]:
    """The drain's resolutions are those after this mark (history seeded beside the backlog,
    or an earlier drain's rows, are not counted)."""
    row = monitor.execute(sql.LAST_RESOLUTION_ID).fetchone()
    return {"since_id": int(row["id"]) if row else 0}


def _measure(
    monitor: psycopg.Connection[dict[str, Any]],
    since: dict[str, int],
    pids: list[int],
    alive: Any,
    limit: float,
    all_server_processes: bool,
    on_first: Callable[[], None] | None = None,
) -> Window:
    deadline = time.monotonic() + limit
    window = Window()
    while not _flag(monitor, sql.ANY_RESOLVED, since):
        alive()
        if time.monotonic() > deadline:
            window.timed_out = True
            return window
        time.sleep(START_POLL_SECONDS)
    first = _sample(monitor, since, pids, all_server_processes)
    if on_first is not None:
        on_first()
    while _flag(monitor, sql.ANY_ARMED):
        alive()
        if time.monotonic() > deadline:
            window.timed_out = True
            break
        time.sleep(POLL_SECONDS)
    last = _sample(monitor, since, pids, all_server_processes)
    window.resolved = last.resolved - first.resolved
    window.process_cpu_us = cpu_delta_us(first.process, last.process)
    if first.server and last.server:
        window.server_cpu_us = cpu_delta_us(first.server, last.server)
    return window


@dataclass(frozen=True, slots=True)
class _Sample:
    resolved: int
    process: dict[int, int]
    server: dict[int, int]


def _sample(
    monitor: psycopg.Connection[dict[str, Any]],
    since: dict[str, int],
    pids: list[int],
    all_server_processes: bool,
) -> _Sample:
    server_pids = [
        int(r["pid"])
        for r in monitor.execute(sql.SERVER_PIDS, {"all_databases": all_server_processes})
    ]
    process = cpu_of(pids)
    server = cpu_of(server_pids)
    row = monitor.execute(sql.RESOLVED_COUNT, since).fetchone()
    return _Sample(int(row["n"]) if row else 0, process, server)


def _flag(monitor: psycopg.Connection[dict[str, Any]], query: Any, params: Any = None) -> bool:
    row = monitor.execute(query, params).fetchone()
    return bool(row and row["yes"])


def _per_resolution(profile: list[dict[str, Any]], resolved: int) -> list[dict[str, Any]]:
    n = max(1, resolved)
    return [
        {
            "query": row["query"],
            "calls_per_resolution": round(row["calls"] / n, 3),
            "exec_us_per_resolution": round(row["exec_ms"] * 1000 / n, 1),
            "plan_us_per_resolution": round(row["plan_ms"] * 1000 / n, 1),
            "plans": row["plans"],
        }
        for row in profile
    ]


def _statement_calls(monitor: psycopg.Connection[dict[str, Any]]) -> int:
    row = monitor.execute(sql.STATEMENT_CALLS).fetchone()
    return int(row["calls"]) if row else 0


def _claim_mean(monitor: psycopg.Connection[dict[str, Any]]) -> float | None:
    row = monitor.execute(sql.CLAIM_MEAN_MS).fetchone()
    return float(row["mean_ms"]) if row and row["mean_ms"] is not None else None


# -- http_receipt against a receipt service with a fixed latency ----------------------------


@dataclass(frozen=True, slots=True)
class HttpCase:
    latency_ms: float = 20.0
    max_in_flight: int = 16
    max_requests_per_second: float = 450.0
    timeout_seconds: float = 2.0


def http_drain(
    url: str,
    case: DrainCase,
    http: HttpCase,
    *,
    count: int,
    processes: int,
    work_dir: Path,
    replica_env: dict[str, str],
    keys: Any,
    statements: bool,
    max_seconds: float,
    all_server_processes: bool,
    profile_seconds: float = 0.0,
) -> DrainResult:
    """`http_receipt` replicas against a local receipt service that answers after a fixed
    latency; each replica has its own bearer token, so the service can tell them apart."""
    with connect(url) as conn:
        seed.reset(conn)
        due_ms = seed.db_now_ms(conn) - 1_000
        seed.seed_due(conn, count, action_type=case.action_type, prefix="h-", due_ms=due_ms)
    receipts_path = work_dir / "http-receipts.tsv"
    seed.write_receipt_file(url, receipts_path, prefix="h-", keys=keys, finished_ms=due_ms + 500)
    vacuum(url, checkpoint=True)
    stats_path = work_dir / "http-service.json"
    stats_path.unlink(missing_ok=True)
    service = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.receipt_service",
            str(receipts_path),
            str(http.latency_ms),
            str(stats_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert service.stdout is not None
        ready = service.stdout.readline().split()
        if len(ready) != 2 or ready[0] != "ready":
            raise RuntimeError(f"receipt service did not start: {ready!r}")
        config_path = work_dir / "providers-http.yaml"
        config_path.write_text(
            yaml.safe_dump(
                {
                    "action_types": {
                        case.action_type: {
                            "provider": "http_receipt",
                            "base_url": f"http://127.0.0.1:{ready[1]}",
                            "token_env": HTTP_TOKEN_ENV,
                            "timeout_seconds": http.timeout_seconds,
                            "max_in_flight": http.max_in_flight,
                            "max_requests_per_second": http.max_requests_per_second,
                        }
                    }
                }
            ),
            encoding="utf-8",
        )
        result = drain(
            url,
            case,
            count=count,
            processes=processes,
            work_dir=work_dir,
            replica_env={**replica_env, "RESOLVER_CONFIG": str(config_path)},
            statements=statements,
            max_seconds=max_seconds,
            all_server_processes=all_server_processes,
            prepared=True,
            per_replica=lambda i: {HTTP_TOKEN_ENV: f"bench-replica-{i}"},
            profile_seconds=profile_seconds,
        )
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(30)
    counters = json.loads(stats_path.read_text(encoding="utf-8"))
    result.http = http_figures(counters, http)
    return result


def http_figures(counters: dict[str, dict[str, list[float]]], http: HttpCase) -> dict[str, Any]:
    """What the receipt service saw, per replica token: connections and request pacing."""
    cap = http.max_requests_per_second
    connections: list[int] = []
    steady_per_minute: list[float] = []
    busiest: list[float] = []
    mean_rates: list[float] = []
    for token, seen in sorted(counters.items()):
        if not token.startswith("bench-replica-"):
            continue
        requests = sorted(seen["requests"])
        opened = sorted(seen["connections"])
        if not requests:
            continue
        connections.append(len(opened))
        # The pool grows to max_in_flight connections as concurrency needs them; every
        # connection beyond that replaced one the pool failed to keep (closed, broken).
        span_minutes = (requests[-1] - requests[0]) / 60_000
        reopened = max(0, len(opened) - http.max_in_flight)
        steady_per_minute.append(reopened / span_minutes if span_minutes > 0 else 0.0)
        busiest.append(busiest_window(requests, 1000) / cap)
        span_s = (requests[-1] - requests[0]) / 1000
        mean_rates.append((len(requests) / span_s) / cap if span_s > 0 else 0.0)
    return {
        "latency_ms": http.latency_ms,
        "cap_per_second": cap,
        "max_in_flight": http.max_in_flight,
        "replicas_seen": len(connections),
        "connections_per_replica": max(connections, default=0),
        "steady_new_connections_per_replica_per_minute": max(steady_per_minute, default=0.0),
        "max_window_over_cap": max(busiest, default=0.0),
        "mean_rate_over_cap": sum(mean_rates) / len(mean_rates) if mean_rates else 0.0,
    }


def busiest_window(times_ms: list[float], width_ms: float) -> int:
    """Most requests that arrived within any `width_ms` (two pointers over sorted times)."""
    best = 0
    low = 0
    for high, t in enumerate(times_ms):
        while t - times_ms[low] >= width_ms:
            low += 1
        best = max(best, high - low + 1)
    return best


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
            small += claim_samples(a, page_size, 25)
            large += claim_samples(b, page_size, 25)
    return ScanResult(
        closed_small=closed_small,
        closed_large=closed_large,
        samples=len(small),
        small_p50_ms=percentile(small, 50),
        large_p50_ms=percentile(large, 50),
        small_p99_ms=percentile(small, 99),
        large_p99_ms=percentile(large, 99),
    )


def claim_samples(conn: psycopg.Connection[dict[str, Any]], page_size: int, n: int) -> list[float]:
    """Time the real claim statement; each claim is rolled back so the due set stays put."""
    params = {"owner": "scan", "lease_ms": 60_000, "now_ms": None}
    claim = claim_statement(page_size)
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
    if statements:
        with connect(url) as conn:
            conn.execute(sql.STATEMENTS_RESET)
    # Counted from before the spawn: start-up must write nothing either.
    before = _counters(url)
    group = Replicas.start(1, work_dir=work_dir, name="idle", env=replica_env)
    try:
        time.sleep(seconds)
        group.check_alive()
        group.stop()
    except BaseException:
        group.kill()
        raise
    stopped = group.log_events("resolver_stopped")
    cycles = int(str(stopped[-1].get("cycles", 0))) if stopped else 0
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
        cycles=cycles,
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
