"""`python -m benchmarks.outcomes`: what the outcome feed costs, and how soon a waiting consumer
learns an outcome.

One private cluster (durable, `track_commit_timestamp` on so a record's commit time is known),
three databases migrated alike:

- `feed`: the schema as shipped, with a listener registered throughout (a settling commit
  notifies only while one is: a consumer following with LISTEN);
- `no-notify`: the same, with the database's `resolver.outcomes_notify` set to `off` (records
  appended, nobody woken: the switch docs/outcomes.md offers, and what a settling commit does
  while no listener is registered);
- `no-feed`: the same, with the three append triggers disabled in that scratch database (the
  resolver before the feed: nothing appended, nobody woken).

The variants are drained in the same run, their order rotating each round:

1. **Drains** (the feed's cost per resolution): `K` due controls with signed receipts, drained
   by `R` real `resolver run` processes (`internal_mutation`), no consumer beside them. Rate,
   replica and PostgreSQL CPU per resolution (/proc, first resolution to drained), WAL bytes per
   resolution (`pg_current_wal_lsn()` around the drain: the whole cluster's WAL).
2. **Completions** (what NOTIFY's lock costs): `E` executor processes complete their slices of
   `N` live executions, one per transaction, as fast as they can: completions/s (database
   clock), the round trip of each (p50, p99), PostgreSQL CPU and WAL per completion. At commit a
   notifying transaction takes one lock for the whole cluster and keeps it through its commit
   record's flush, so notifying commits flush one after another.
3. **Lag** (the `feed` database only): two real consumers follow the feed, one woken by LISTEN,
   one polling (the SDK's defaults), while (a) one executor completes `--trickle-rate` a
   second for `--trickle-seconds`, and (b) `R` replicas drain `K` due controls. A record's lag
   is when its consumer received it less its transaction's commit timestamp
   (`pg_xact_commit_timestamp`), both on the host clock.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import yaml

from benchmarks import seed
from benchmarks.phases import (
    RECEIPT_ACTION,
    DrainCase,
    DrainResult,
    connect,
    drain,
    percentile,
    prepare_drain,
    vacuum,
)
from benchmarks.procs import REPO_ROOT, Group, cpu_delta_us, cpu_of, cpu_us
from benchmarks.run import RECEIPT_PROVIDER, compile_sources, provider_config
from benchmarks.server import Databases, Server, open_server

VARIANTS = ("feed", "no-notify", "no-feed")
APPEND_TRIGGERS = (
    ("approved_action_executions", "approved_action_executions_outcomes"),
    ("recovery_late_evidence", "recovery_late_evidence_outcomes"),
    ("approved_action_dispatches", "approved_action_dispatches_outcomes"),
)
POLL_SECONDS = 0.05
# The records below the horizon (what a consumer can have read) and the last one's cursor.
READABLE = """
SELECT /* bench-monitor */ count(*) AS n,
       (array_agg(o.xid::text || ':' || o.seq::text ORDER BY o.xid DESC, o.seq DESC))[1] AS last
FROM recovery_outcomes AS o WHERE o.xid < pg_snapshot_xmin(pg_current_snapshot())
"""
FOLLOW = (sys.executable, "-m", "benchmarks.outcome_load", "follow")
SAVED = "SELECT /* bench-monitor */ resolver_outcome_consumer_cursor(%s) AS c"
Echo = Callable[[str], None]


@dataclass(slots=True)
class DrainFigures:
    variant: str
    round: int
    per_second: float
    resolved: int
    replica_cpu_us: float | None
    server_cpu_us: float | None
    wal_bytes: float


@dataclass(slots=True)
class CompletionFigures:
    variant: str
    round: int
    per_second: float
    completed: int
    p50_ms: float
    p99_ms: float
    server_cpu_us: float | None
    executor_cpu_us: float | None
    wal_bytes: float


@dataclass(slots=True)
class LagFigures:
    load: str
    wake: str
    records: int
    """Records the consumer received (every one of the load's, or the run fails)."""
    p50_ms: float | None
    """None on a given server without `track_commit_timestamp`: no commit time to count from."""
    p99_ms: float | None
    max_ms: float | None
    consumer_cpu_us: float | None
    """The consumer process's CPU per record it received."""


@dataclass(slots=True)
class Result:
    server: str
    count: int
    replicas: int
    page_size: int
    executors: int
    completions: int
    rounds: int
    drains: list[DrainFigures] = field(default_factory=list)
    completions_runs: list[CompletionFigures] = field(default_factory=list)
    lags: list[LagFigures] = field(default_factory=list)


# -- the three databases -------------------------------------------------------------------


def _variants(dbs: Databases) -> dict[str, str]:
    urls = {}
    for variant in VARIANTS:
        url = dbs.create(variant.replace("-", "_"), migrated=True)
        with connect(url) as conn:
            if variant == "feed":
                # A listener that never lapses (a LISTEN consumer renews its minute forever).
                conn.execute(
                    "INSERT INTO recovery_outcome_listeners VALUES (0, 9223372036854775807)"
                )
            elif variant == "no-notify":
                # The shipped switch, for every session of that database from now on.
                name = url.rsplit("/", 1)[-1]
                conn.execute(f"ALTER DATABASE {name} SET resolver.outcomes_notify = off")
            elif variant == "no-feed":
                for table, trigger in APPEND_TRIGGERS:
                    conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
        urls[variant] = url
    return urls


def _fresh(url: str) -> None:
    """Every table empty, the feed's too (TRUNCATE fires no row trigger)."""
    with connect(url) as conn:
        seed.reset(conn)
        conn.execute("TRUNCATE recovery_outcomes, recovery_outcome_consumers")


def _wal_lsn(conn: psycopg.Connection[dict[str, Any]]) -> str:
    row = conn.execute("SELECT /* bench-monitor */ pg_current_wal_lsn()::text AS lsn").fetchone()
    assert row is not None
    return str(row["lsn"])


def _wal_since(conn: psycopg.Connection[dict[str, Any]], lsn: str) -> int:
    row = conn.execute(
        "SELECT /* bench-monitor */ pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint AS n",
        (lsn,),
    ).fetchone()
    assert row is not None
    return int(row["n"])


# -- 1. drains --------------------------------------------------------------------------------


def _drain_case(page_size: int) -> DrainCase:
    return DrainCase(f"receipts-p{page_size}", "resolver", page_size, RECEIPT_ACTION, True)


def _measured_drain(
    url: str, case: DrainCase, *, count: int, replicas: int, work_dir: Path, env: dict[str, str]
) -> tuple[DrainResult, int]:
    _fresh(url)
    prepare_drain(url, case, count)
    with connect(url) as monitor:
        before = _wal_lsn(monitor)
        result = drain(
            url,
            case,
            count=count,
            processes=replicas,
            work_dir=work_dir,
            replica_env={**env, "RESOLVER_DATABASE_URL": url},
            statements=False,
            max_seconds=600,
            all_server_processes=True,
            prepared=True,
        )
        wal = _wal_since(monitor, before)
    return result, wal


# -- 2. completions ------------------------------------------------------------------------


def _seed_live(url: str, count: int, prefix: str) -> None:
    with connect(url) as conn:
        seed.seed_live(conn, count, prefix=prefix, now_ms=seed.db_now_ms(conn))
    vacuum(url, checkpoint=True)


def _server_pids(conn: psycopg.Connection[dict[str, Any]]) -> list[int]:
    rows = conn.execute(
        "SELECT /* bench-monitor */ pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
    ).fetchall()
    return [int(r["pid"]) for r in rows]


def _completions(
    url: str, variant: str, round_: int, *, count: int, executors: int, work_dir: Path
) -> CompletionFigures:
    _fresh(url)
    prefix = f"c{round_}-"
    _seed_live(url, count, prefix)
    argv = [
        ["benchmarks.outcome_load", "complete", url, prefix, str(i), str(executors), "0"]
        for i in range(executors)
    ]
    group = Group.start(argv, work_dir=work_dir, name=f"complete-{variant}-{round_}")
    with connect(url) as monitor:
        server_before = cpu_of(_server_pids(monitor))
        executors_before = cpu_of(group.pids)
        wal_before = _wal_lsn(monitor)
        group.go()
        span = _await_completed(monitor, prefix, count)
        server_after = cpu_of(_server_pids(monitor))
        executors_after = cpu_of(group.pids)
        wal = _wal_since(monitor, wal_before)
    stats = group.stop()
    done = int(span["n"])
    seconds = max(0.001, ((span["last_ms"] or 0) - (span["first_ms"] or 0)) / 1000)
    trips = [ms for s in stats for ms in s.commit_ms]
    return CompletionFigures(
        variant,
        round_,
        done / seconds,
        done,
        percentile(trips, 50),
        percentile(trips, 99),
        cpu_delta_us(server_before, server_after) / done if done else None,
        cpu_delta_us(executors_before, executors_after) / done if done else None,
        wal / done if done else 0.0,
    )


def _await_completed(
    monitor: psycopg.Connection[dict[str, Any]], prefix: str, count: int, limit: float = 600
) -> dict[str, Any]:
    """Until every seeded execution under `prefix` is settled; their span on the db clock."""
    deadline = time.monotonic() + limit
    while True:
        span = monitor.execute(
            "SELECT /* bench-monitor */ count(*) AS n, min(finished_at_ms) AS first_ms,"
            " max(finished_at_ms) AS last_ms FROM approved_action_executions"
            " WHERE dispatch_id >= %s AND dispatch_id < %s AND state = 'succeeded'",
            (prefix, prefix + "\uffff"),
        ).fetchone()
        assert span is not None
        if span["n"] >= count or time.monotonic() > deadline:
            return dict(span)
        time.sleep(POLL_SECONDS)


# -- 3. lag -------------------------------------------------------------------------------------


@contextmanager
def _consumers(url: str, work_dir: Path, name: str) -> Iterator[dict[str, Path]]:
    """A LISTEN and a polling consumer, registered at the feed's current end; yields where each
    writes its records (filled once the block ends and they stopped)."""
    paths = {wake: work_dir / f"{name}-{wake}.tsv" for wake in ("listen", "poll")}
    with connect(url) as conn:
        for wake in paths:
            conn.execute(
                "SELECT resolver_outcome_consumer_save(%s, resolver_outcome_cursor_now())",
                (f"{name}-{wake}",),
            )
    procs = {}
    try:
        for wake, path in paths.items():
            log = (work_dir / f"{name}-{wake}.log").open("w", encoding="utf-8")
            procs[wake] = subprocess.Popen(
                [*FOLLOW, url, wake, f"{name}-{wake}", str(path)],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=REPO_ROOT,
            )
            log.close()
        for wake, proc in procs.items():
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the {wake} consumer did not start; see {work_dir}")
        _await_following(url, len(procs))
        cpu_before = {wake: cpu_us(proc.pid) or 0 for wake, proc in procs.items()}
        yield paths
        cpu_after = {wake: cpu_us(proc.pid) or 0 for wake, proc in procs.items()}
        for wake in procs:
            (work_dir / f"{name}-{wake}.cpu").write_text(
                str(cpu_after[wake] - cpu_before[wake]), encoding="utf-8"
            )
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


def _await_following(url: str, count: int, limit: float = 60) -> None:
    """Until each consumer has its session (it reads right after connecting) and the LISTEN
    one its listening session too. A late start loses nothing (each starts from its stored
    cursor); it would only add to the first records' lag."""
    deadline = time.monotonic() + limit
    with connect(url) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT /* bench-monitor */ count(*) AS n,"
                " count(*) FILTER (WHERE query LIKE 'SELECT pg_snapshot_xmax%%') AS listening"
                " FROM pg_stat_activity WHERE application_name = 'approved-action-outcomes'"
            ).fetchone()
            if row is not None and row["n"] >= count + 1 and row["listening"] >= 1:
                return
            time.sleep(POLL_SECONDS)
    raise RuntimeError("the consumers never connected")


def _lag(url: str, load: str, paths: dict[str, Path], work_dir: Path) -> list[LagFigures]:
    out = []
    with connect(url) as conn:
        tracked = conn.execute("SHOW track_commit_timestamp").fetchone()
        for wake, path in paths.items():
            received = [line.split("\t") for line in path.read_text("utf-8").splitlines()]
            cpu = int((work_dir / f"{path.stem}.cpu").read_text("utf-8"))
            per_record = cpu / len(received) if received else None
            if not received or tracked is None or tracked["track_commit_timestamp"] != "on":
                out.append(LagFigures(load, wake, len(received), None, None, None, per_record))
                continue
            xids = sorted({int(cursor.split(":")[0]) for cursor, _ in received})
            commits = {
                int(r["xid"]): int(r["ns"])
                for r in conn.execute(
                    "SELECT /* bench-monitor */ x AS xid,"
                    " (extract(epoch FROM pg_xact_commit_timestamp((x %% 4294967296)::text::xid))"
                    " * 1e9)::bigint AS ns FROM unnest(%s::bigint[]) AS x",
                    (xids,),
                )
                if r["ns"] is not None
            }
            lags = [
                (int(ns) - commits[int(cursor.split(":")[0])]) / 1e6
                for cursor, ns in received
                if int(cursor.split(":")[0]) in commits
            ]
            out.append(
                LagFigures(
                    load,
                    wake,
                    len(received),
                    percentile(lags, 50),
                    percentile(lags, 99),
                    max(lags),
                    per_record,
                )
            )
    return out


def _trickle(url: str, rate: float, seconds: float, work_dir: Path) -> list[LagFigures]:
    _fresh(url)
    count = int(rate * seconds)
    _seed_live(url, count, "t-")
    with _consumers(url, work_dir, "lag-trickle") as paths:
        group = Group.start(
            [["benchmarks.outcome_load", "complete", url, "t-", "0", "1", str(rate)]],
            work_dir=work_dir,
            name="trickle",
        )
        group.go()
        with connect(url) as monitor:
            _await_completed(monitor, "t-", count)
        group.stop()
        _await_received(url, paths, count)
    return _lag(url, "trickle", paths, work_dir)


def _await_received(url: str, paths: dict[str, Path], count: int, limit: float = 120) -> None:
    """Until the feed holds the load's `count` records below the horizon and every consumer
    saved its cursor at the last of them (it saves after handling a batch)."""
    deadline = time.monotonic() + limit
    names = [path.stem for path in paths.values()]
    with connect(url) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(READABLE).fetchone()
            assert row is not None
            if row["n"] >= count:
                saved = {
                    str(conn.execute(SAVED, (name,)).fetchone()["c"])  # type: ignore[index]
                    for name in names
                }
                if saved == {row["last"]}:
                    return
            time.sleep(POLL_SECONDS)
    raise RuntimeError(f"the consumers did not receive {count} records within {limit:g}s")


def _drain_lag(
    url: str, case: DrainCase, *, count: int, replicas: int, work_dir: Path, env: dict[str, str]
) -> list[LagFigures]:
    _fresh(url)
    prepare_drain(url, case, count)
    with _consumers(url, work_dir, "lag-drain") as paths:
        drain(
            url,
            case,
            count=count,
            processes=replicas,
            work_dir=work_dir,
            replica_env={**env, "RESOLVER_DATABASE_URL": url},
            statements=False,
            max_seconds=600,
            all_server_processes=True,
            prepared=True,
        )
        _await_received(url, paths, count)
    return _lag(url, "drain", paths, work_dir)


# -- the run ------------------------------------------------------------------------------------


def run(
    *,
    database_url: str | None,
    count: int,
    replicas: int,
    page_size: int,
    rounds: int,
    executors: int,
    completions: int,
    trickle_rate: float,
    trickle_seconds: float,
    work_dir: Path | None = None,
    echo: Echo = print,
) -> Result:
    compile_sources()
    work_dir = work_dir or Path(tempfile.mkdtemp(prefix="resolver-bench-outcomes-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    config = work_dir / "providers.yaml"
    config.write_text(yaml.safe_dump(provider_config({RECEIPT_PROVIDER})), encoding="utf-8")
    env = {
        "RESOLVER_CONFIG": str(config),
        "RESOLVER_LOG_LEVEL": "WARNING",
        **seed.keys_env(seed.BENCH_KEYS),
    }
    case = _drain_case(page_size)
    settings = {"track_commit_timestamp": "on"}
    with open_server(database_url, durable=True, settings=settings) as server:
        result = Result(
            _describe(server), count, replicas, page_size, executors, completions, rounds
        )
        dbs = Databases(server)
        try:
            urls = _variants(dbs)
            for round_ in range(rounds):
                order = VARIANTS[round_ % 3 :] + VARIANTS[: round_ % 3]
                for variant in order:
                    drained, wal = _measured_drain(
                        urls[variant], case, count=count, replicas=replicas,
                        work_dir=work_dir, env=env,
                    )  # fmt: skip
                    figures = DrainFigures(
                        variant,
                        round_,
                        drained.per_second,
                        drained.resolved,
                        drained.process_cpu_us,
                        drained.server_cpu_us,
                        wal / drained.resolved if drained.resolved else 0.0,
                    )
                    result.drains.append(figures)
                    echo(f"drain {variant} round {round_}: {_drain_line(figures)}")
                for variant in order:
                    done = _completions(
                        urls[variant], variant, round_, count=completions,
                        executors=executors, work_dir=work_dir,
                    )  # fmt: skip
                    result.completions_runs.append(done)
                    echo(f"completions {variant} round {round_}: {_completion_line(done)}")
            result.lags += _trickle(urls["feed"], trickle_rate, trickle_seconds, work_dir)
            result.lags += _drain_lag(
                urls["feed"], case, count=count, replicas=replicas, work_dir=work_dir, env=env
            )
            for lag in result.lags:
                echo(f"lag {lag.load} {lag.wake}: {_lag_line(lag)}")
        finally:
            dbs.close()
    return result


def _describe(server: Server) -> str:
    return f"PostgreSQL {server.version}, {'private cluster' if server.private else 'given'}"


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def _drain_line(d: DrainFigures) -> str:
    return (
        f"{d.per_second:,.0f}/s, replica {_num(d.replica_cpu_us)} µs, PostgreSQL "
        f"{_num(d.server_cpu_us)} µs, {d.wal_bytes:,.0f} WAL bytes per resolution"
    )


def _completion_line(c: CompletionFigures) -> str:
    return (
        f"{c.per_second:,.0f}/s, round trip p50 {c.p50_ms:.2f} ms p99 {c.p99_ms:.2f} ms, "
        f"PostgreSQL {_num(c.server_cpu_us)} µs, {c.wal_bytes:,.0f} WAL bytes per completion"
    )


def _lag_line(lag: LagFigures) -> str:
    return (
        f"{lag.records:,} records, p50 {_num(lag.p50_ms, '{:.1f}')} ms, "
        f"p99 {_num(lag.p99_ms, '{:.1f}')} ms, max {_num(lag.max_ms, '{:.1f}')} ms, "
        f"consumer {_num(lag.consumer_cpu_us)} µs per record"
    )


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


def markdown(result: Result) -> str:
    lines = [
        f"{result.server}; {result.replicas} replicas, page {result.page_size}, "
        f"{result.count:,} resolutions per drain; {result.executors} executors, "
        f"{result.completions:,} completions; {result.rounds} rounds, medians:",
        "",
        "| drain | /s | x no-feed | replica CPU µs | PostgreSQL CPU µs | WAL bytes |",
        "|---|---|---|---|---|---|",
    ]
    base = _median([d.per_second for d in result.drains if d.variant == "no-feed"])
    for variant in VARIANTS:
        runs = [d for d in result.drains if d.variant == variant]
        rate = _median([d.per_second for d in runs])
        replica = _median([d.replica_cpu_us or 0.0 for d in runs])
        server = _median([d.server_cpu_us or 0.0 for d in runs])
        wal = _median([d.wal_bytes for d in runs])
        ratio = rate / base if base else 0.0
        lines.append(
            f"| {variant} | {rate:,.0f} | {ratio:.2f} | {replica:.0f} | {server:.0f} | {wal:,.0f} |"
        )
    lines += [
        "",
        "| completions | /s | x no-feed | round trip p50 / p99 ms | executor CPU µs "
        "| PostgreSQL CPU µs | WAL bytes |",
        "|---|---|---|---|---|---|---|",
    ]
    base = _median([c.per_second for c in result.completions_runs if c.variant == "no-feed"])
    for variant in VARIANTS:
        done = [c for c in result.completions_runs if c.variant == variant]
        rate = _median([c.per_second for c in done])
        p50 = _median([c.p50_ms for c in done])
        p99 = _median([c.p99_ms for c in done])
        server = _median([c.server_cpu_us or 0.0 for c in done])
        executor = _median([c.executor_cpu_us or 0.0 for c in done])
        wal = _median([c.wal_bytes for c in done])
        ratio = rate / base if base else 0.0
        lines.append(
            f"| {variant} | {rate:,.0f} | {ratio:.2f} | {p50:.2f} / {p99:.2f} | {executor:.0f} "
            f"| {server:.0f} | {wal:,.0f} |"
        )
    lines += [
        "",
        "| lag, commit to consumer | records | p50 ms | p99 ms | max ms | consumer CPU µs/record |",
        "|---|---|---|---|---|---|",
    ]
    for lag in result.lags:
        lines.append(
            f"| {lag.load}, {lag.wake} | {lag.records:,} | {_num(lag.p50_ms, '{:.1f}')} "
            f"| {_num(lag.p99_ms, '{:.1f}')} | {_num(lag.max_ms, '{:.1f}')} "
            f"| {_num(lag.consumer_cpu_us)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.outcomes", description=__doc__)
    p.add_argument("--database-url", help="measure this server instead of a private cluster")
    p.add_argument("-K", "--count", type=int, default=20_000, help="due controls per drain")
    p.add_argument("-R", "--replicas", type=int, default=2)
    p.add_argument("--page-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-E", "--executors", type=int, default=4, help="completing processes")
    p.add_argument("-N", "--completions", type=int, default=4_000, help="completions per run")
    p.add_argument("--trickle-rate", type=float, default=100.0, help="completions/s")
    p.add_argument("--trickle-seconds", type=float, default=20.0)
    p.add_argument("--work-dir", type=Path, help="keep the processes' logs and records here")
    p.add_argument("--json", type=Path, help="also write the result as JSON here")
    args = p.parse_args(argv)
    result = run(
        database_url=args.database_url,
        count=args.count,
        replicas=args.replicas,
        page_size=args.page_size,
        rounds=args.rounds,
        executors=args.executors,
        completions=args.completions,
        trickle_rate=args.trickle_rate,
        trickle_seconds=args.trickle_seconds,
        work_dir=args.work_dir,
    )
    print()
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(asdict(result), indent=2), encoding="utf-8")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
