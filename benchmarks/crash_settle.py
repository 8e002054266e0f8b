"""`python -m benchmarks.crash_settle`: how long a crash waits to be settled, and what idle
replicas cost while they wait for one.

Crash to settled: executions crash past the barrier at `--rate` per second (their executor
wrote its receipt and died; the lease of the next one runs out every 1/rate seconds, on the
database clock) for `--seconds`, while `-R` real `resolver run` replicas (the product's
default settings, `internal_mutation` over the receipts) recover them. Each crash's figure
is its resolution's time less its lease's expiry, both on the database clock: p50, p95,
p99 and the worst.

Idle: `--idle-replicas` real `resolver run` replicas beside 1,000 live executions (leases an
hour long) and the settled rows of the first phase, nothing due: their CPU and that of their
PostgreSQL backends, as a share of one core, and the rows the database wrote meanwhile
(`pg_stat_database`). Twice, each window `--idle-seconds` long: right after they have all
started (their first cycles prepare the claim: the driver prepares it at its fifth run, and the
server plans the first five runs of a prepared statement anew), and once
`--idle-warmup-seconds` have passed since the first window began (what idle replicas cost from
then on). CPU is the scheduler's count in nanoseconds of every thread, not clock ticks: a tick
(10 ms) per process and reading is more than an idle replica uses in a second.

On its own private durable cluster, like `benchmarks.run`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, LiteralString

import psycopg
import yaml
from psycopg.rows import dict_row

from benchmarks import seed
from benchmarks import sql as bench_sql
from benchmarks.phases import RECEIPT_ACTION
from benchmarks.procs import Replicas, cpu_delta_us, cpu_of, oncpu_us
from benchmarks.run import compile_sources, installed_providers, provider_config
from benchmarks.server import Databases, open_server

# Crashes past the barrier, as the executor left them: the dispatch, the execution
# `executing` with its lease running out at %(t0)s + (n - 1) / %(rate)s seconds, the armed
# control due then (its receipt follows, signed, as the executor wrote it).
SEED_CRASHES: LiteralString = """
WITH g AS (
    SELECT n, %(prefix)s || lpad(n::text, 9, '0') AS id,
           %(t0)s::bigint + ((n - 1) * 1000) / %(rate)s AS expires
    FROM generate_series(1, %(count)s::bigint) AS n
),
d AS (
    INSERT INTO approved_action_dispatches (
        dispatch_id, approval_request_id, project_id, action_type, action_digest,
        idempotency_key, schema_version)
    SELECT id, 'ar-' || id, 'proj-' || (n %% 32), %(action_type)s,
           encode(sha256(convert_to('action:' || id, 'UTF8')), 'hex'), 'idem-' || id, 1
    FROM g
    RETURNING dispatch_id
),
e AS (
    INSERT INTO approved_action_executions (
        dispatch_id, state, owner, token, version, attempt, lease_expires_at_ms, started_at_ms)
    SELECT g.id, 'executing', 'bench-executor', gen_random_uuid(), 2, 1, g.expires,
           g.expires - 30000
    FROM d JOIN g ON g.id = d.dispatch_id
    RETURNING dispatch_id, lease_expires_at_ms, started_at_ms
)
INSERT INTO approved_action_recovery_controls (
    dispatch_id, status, execution_version, next_scan_at_ms, armed_at_ms)
SELECT dispatch_id, 'armed', 2, lease_expires_at_ms, started_at_ms FROM e
"""
SETTLED: LiteralString = """
SELECT /* bench-monitor */ count(*) AS n FROM approved_action_recovery_resolutions
WHERE dispatch_id LIKE %(pattern)s
"""
# The resolution's time less the lease's expiry, both the database's clock.
CRASH_TO_SETTLED: LiteralString = """
SELECT /* bench-monitor */ r.resolved_at_ms - e.lease_expires_at_ms AS ms
FROM approved_action_recovery_resolutions AS r
JOIN approved_action_executions AS e USING (dispatch_id)
WHERE r.dispatch_id LIKE %(pattern)s
"""
# How far ahead of now the first lease runs out: every replica has started by then.
LEAD_MS = 8_000
PREFIX = "k-"


@dataclass(frozen=True, slots=True)
class Options:
    database_url: str | None = None
    rate: int = 1_000
    seconds: float = 20.0
    replicas: int = 4
    idle_replicas: int = 32
    idle_seconds: float = 20.0
    idle_warmup_seconds: float = 30.0
    work_dir: Path | None = None


@dataclass(slots=True)
class CrashResult:
    crashes: int
    settled: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


@dataclass(slots=True)
class IdleShare:
    """What the idle replicas used over one window, each as a share of one core."""

    replicas: float
    server: float | None
    """Their PostgreSQL backends' (None on a server the benchmark does not own)."""

    @property
    def total(self) -> float:
        return self.replicas + (self.server or 0.0)


@dataclass(slots=True)
class IdleResult:
    replicas: int
    seconds: float
    warmup_seconds: float
    started: IdleShare
    """The window right after every replica started."""
    steady: IdleShare
    """The window after the warm-up: the figure the target is about."""
    rows_written: int
    """In both windows and between them."""


@dataclass(slots=True)
class Report:
    options: dict[str, Any]
    crash: CrashResult | None = None
    idle: IdleResult | None = None
    seconds: float = 0.0


def _quantile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))]) if ordered else 0.0


def crash_to_settled(
    url: str, options: Options, replica_env: dict[str, str], work_dir: Path
) -> CrashResult:
    count = int(options.rate * options.seconds)
    with psycopg.connect(url, autocommit=True) as conn:
        t0 = seed.db_now_ms(conn) + LEAD_MS
        with conn.transaction():
            conn.execute(bench_sql.IMPORT_HISTORY)
            conn.execute(
                SEED_CRASHES,
                {
                    "prefix": PREFIX,
                    "t0": t0,
                    "rate": options.rate,
                    "count": count,
                    "action_type": RECEIPT_ACTION,
                },
            )
    seed.seed_receipts(url, prefix=PREFIX, keys=seed.BENCH_KEYS, finished_ms=t0)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    group = Replicas.start(options.replicas, work_dir=work_dir, name="crash", env=replica_env)
    pattern = {"pattern": PREFIX + "%"}
    try:
        deadline = time.monotonic() + LEAD_MS / 1000 + options.seconds + 60
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as monitor:
            while (settled := _count(monitor, SETTLED, pattern)) < count:
                if time.monotonic() > deadline:
                    break
                group.check_alive()
                time.sleep(0.5)
            latencies = [int(r["ms"]) for r in monitor.execute(CRASH_TO_SETTLED, pattern)]
        group.stop()
    except BaseException:
        group.kill()
        raise
    return CrashResult(
        crashes=count,
        settled=settled,
        p50_ms=_quantile(latencies, 0.50),
        p95_ms=_quantile(latencies, 0.95),
        p99_ms=_quantile(latencies, 0.99),
        max_ms=float(max(latencies, default=0)),
    )


def _count(conn: psycopg.Connection[Any], query: LiteralString, params: dict[str, Any]) -> int:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return int(row["n"])


def idle_cost(
    url: str, options: Options, replica_env: dict[str, str], work_dir: Path, *, private: bool
) -> IdleResult:
    with psycopg.connect(url, autocommit=True) as conn:
        seed.seed_live(conn, 1_000, prefix="l-", now_ms=seed.db_now_ms(conn) + 3_600_000)
        conn.execute("VACUUM ANALYZE")
    # The seeding backends report their row counts as they exit.
    time.sleep(1.5)
    group = Replicas.start(options.idle_replicas, work_dir=work_dir, name="idle", env=replica_env)
    try:
        deadline = time.monotonic() + 120
        while len(group.started_ms()) < options.idle_replicas:
            if time.monotonic() > deadline:
                raise RuntimeError("idle replicas did not all start")
            group.check_alive()
            time.sleep(0.5)
        time.sleep(2.0)  # past every replica's first cycle
        with psycopg.connect(url, autocommit=True) as monitor:
            first = _window(monitor, group, options.idle_seconds, private=private)
            rest = max(0.0, options.idle_warmup_seconds - first.seconds)
            time.sleep(rest)
            steady = _window(monitor, group, options.idle_seconds, private=private)
        group.stop()
    except BaseException:
        group.kill()
        raise
    return IdleResult(
        replicas=options.idle_replicas,
        seconds=options.idle_seconds,
        warmup_seconds=options.idle_warmup_seconds,
        started=first.share,
        steady=steady.share,
        rows_written=sum(
            steady.after["counters"][k] - first.before["counters"][k]
            for k in ("tup_inserted", "tup_updated", "tup_deleted")
        ),
    )


@dataclass(slots=True)
class _Window:
    before: dict[str, Any]
    after: dict[str, Any]
    seconds: float
    share: IdleShare


def _window(
    monitor: psycopg.Connection[Any], group: Replicas, seconds: float, *, private: bool
) -> _Window:
    before = _sample(monitor, group.pids)
    started = time.monotonic()
    time.sleep(seconds)
    group.check_alive()
    after = _sample(monitor, group.pids)
    elapsed_us = (time.monotonic() - started) * 1_000_000
    share = IdleShare(
        replicas=cpu_delta_us(before["replicas"], after["replicas"]) / elapsed_us,
        server=cpu_delta_us(before["server"], after["server"]) / elapsed_us if private else None,
    )
    return _Window(before, after, elapsed_us / 1_000_000, share)


def _sample(monitor: psycopg.Connection[Any], replicas: list[int]) -> dict[str, Any]:
    # Counters a backend reports at most once a second: wait for the last report to land.
    time.sleep(1.2)
    counters = monitor.cursor(row_factory=dict_row).execute(bench_sql.DATABASE_COUNTERS).fetchone()
    # The replicas' own backends (this database's), not the cluster's background processes,
    # which run whether replicas exist or not.
    backends = [int(r[0]) for r in monitor.execute(bench_sql.SERVER_PIDS, {"all_databases": False})]
    return {
        "replicas": cpu_of(replicas, oncpu_us),
        "server": cpu_of(backends, oncpu_us),
        "counters": counters,
    }


def run(options: Options) -> Report:
    started = time.monotonic()
    compile_sources()
    work_dir = options.work_dir or Path(tempfile.mkdtemp(prefix="resolver-bench-crash-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    report = Report(options={k: str(v) for k, v in asdict(options).items()})
    with open_server(options.database_url, durable=True) as server:
        dbs = Databases(server)
        try:
            url = dbs.create("crash", migrated=True)
            config_path = work_dir / "providers.yaml"
            config_path.write_text(
                yaml.safe_dump(provider_config(installed_providers())), encoding="utf-8"
            )
            replica_env = {
                "RESOLVER_DATABASE_URL": url,
                "RESOLVER_CONFIG": str(config_path),
                **seed.keys_env(seed.BENCH_KEYS),
            }
            if options.rate > 0 and options.seconds > 0:
                report.crash = crash_to_settled(url, options, replica_env, work_dir)
                print(f"crash to settled: {report.crash}", flush=True)
            if options.idle_replicas > 0 and options.idle_seconds > 0:
                report.idle = idle_cost(url, options, replica_env, work_dir, private=server.private)
                print(f"idle: {report.idle}", flush=True)
        finally:
            dbs.close()
    report.seconds = time.monotonic() - started
    return report


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _share(share: IdleShare) -> str:
    server = "n/a" if share.server is None else f"{100 * share.server:.2f} %"
    return f"{100 * share.total:.2f} % ({100 * share.replicas:.2f} % + {server})"


def markdown(report: Report) -> str:
    lines = ["| figure | measured | target | met |", "|---|---|---|---|"]
    if report.crash is not None:
        c = report.crash
        lines.append(
            f"| crash to settled at {report.options['rate']}/s, {report.options['replicas']} "
            f"replicas: p50 / p95 / p99 / max ms ({c.settled} of {c.crashes} settled) "
            f"| {c.p50_ms:,.0f} / {c.p95_ms:,.0f} / {c.p99_ms:,.0f} / {c.max_ms:,.0f} "
            f"| p99 <= 1,000 ms | {_met(c.p99_ms <= 1000 and c.settled == c.crashes)} |"
        )
    if report.idle is not None:
        i = report.idle
        lines.append(
            f"| {i.replicas} idle replicas, from {i.warmup_seconds:g} s after they started: "
            f"share of one core (replicas + PostgreSQL) | {_share(i.steady)} "
            f"| <= 2 % | {_met(i.steady.total <= 0.02)} |"
        )
        lines.append(
            f"| {i.replicas} idle replicas, their first {i.seconds:g} s (the claim prepared) "
            f"| {_share(i.started)} | | |"
        )
        lines.append(
            f"| {i.replicas} idle replicas: rows written | {i.rows_written} "
            f"| 0 | {_met(i.rows_written == 0)} |"
        )
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> tuple[Options, Path | None]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.crash_settle", description=__doc__)
    p.add_argument("--database-url", help="measure this server instead of a private cluster")
    p.add_argument("--rate", type=int, default=1_000, help="crashes per second")
    p.add_argument("--seconds", type=float, default=20.0, help="for how long crashes come")
    p.add_argument("-R", "--replicas", type=int, default=4)
    p.add_argument("--idle-replicas", type=int, default=32)
    p.add_argument("--idle-seconds", type=float, default=20.0, help="each idle window")
    p.add_argument(
        "--idle-warmup-seconds",
        type=float,
        default=30.0,
        help="from the first idle window's start to the steady one's",
    )
    p.add_argument("--work-dir", type=Path, help="every replica's log")
    p.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = p.parse_args(argv)
    return Options(
        database_url=args.database_url,
        rate=args.rate,
        seconds=args.seconds,
        replicas=args.replicas,
        idle_replicas=args.idle_replicas,
        idle_seconds=args.idle_seconds,
        idle_warmup_seconds=args.idle_warmup_seconds,
        work_dir=args.work_dir,
    ), args.json


def main(argv: list[str] | None = None) -> None:
    options, json_path = parse(argv)
    report = run(options)
    print(markdown(report))
    print(f"\n(total {report.seconds:.0f}s)")
    if json_path:
        json_path.write_text(json.dumps(asdict(report), indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
