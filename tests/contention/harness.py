"""The cluster harness: N `resolver run` processes, one private PostgreSQL, faults, a verdict."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psycopg
import yaml
from psycopg.rows import dict_row

from resolver.db import migrate
from resolver.db.connect import Pooler
from resolver.demo import localpg
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.pgbouncer import pgbouncer
from tests.helpers.s3 import BUCKET, PREFIX, S3Server, running_s3_server
from tests.helpers.stores import Storage

from . import hostile
from .checker import (
    LATE_SNAPSHOT_SQL,
    SNAPSHOT_SQL,
    LossPoint,
    Verdict,
    check,
    read_histories,
)
from .operators import HUMAN_POLICY, Operators, grant_operators
from .patroni import PatroniCluster
from .replication import ReplicatedPostgres
from .workload import (
    OBJECT_TYPE,
    Kind,
    LiveExecutor,
    Plan,
    executor_history,
    make_plans,
    provider_config,
    publish_object_receipt,
    receipt_key_env,
    seed_crashed,
    write_scripts,
)

# Exit code 3 is `resolver run` refusing to start while PostgreSQL is down (then revived).
# Anything else (a traceback, not stopping on SIGTERM within its grace) is a violation.
EXPECTED_EXITS = frozenset({"killed -9", "exit code 3"})
RECOVERY_LEASE_SECONDS = 3.0
EXECUTOR_LEASE_SECONDS = 1.0
CRASHED_LEASE_SECONDS = 0.5


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    replicas: int
    controls: int
    waves: int
    wave_interval_seconds: float
    horizon_ms: int
    live_ratio: float
    fault_seconds: float
    fault_gap_seconds: tuple[float, float]
    pg_restarts: int
    settle_timeout_seconds: float
    page_size: int = 16
    executor_threads: int = 24
    seeder_threads: int = 6
    replication: str = "none"
    """`none` (one node), `async` or `sync`: a primary with a streaming standby."""
    failovers: int = 0
    hostile_rounds: int = 0
    """Rounds of hostile-database faults (row locks, every connection slot taken, WAL volume
    full), with a session idle in a transaction for the whole run."""
    pooler: str = "none"
    """`transaction` or `session`: replicas and executors reach PostgreSQL through a real
    PgBouncer in that pool mode, which reaches it through the fault proxies."""
    object_ratio: float = 0.0
    """Share of dispatches of OBJECT_TYPE, settled from receipt objects in an S3-compatible
    server the run starts (moto's, tests/helpers/s3.py), throttled now and then."""


QUICK = Profile(
    name="quick",
    replicas=4,
    controls=2_500,
    waves=5,
    wave_interval_seconds=8,
    horizon_ms=25_000,
    live_ratio=0.08,
    fault_seconds=70,
    fault_gap_seconds=(1.0, 3.0),
    pg_restarts=1,
    settle_timeout_seconds=90,
    object_ratio=0.06,
)
SOAK = Profile(
    name="soak",
    replicas=8,
    controls=12_000,
    waves=12,
    wave_interval_seconds=15,
    horizon_ms=60_000,
    live_ratio=0.06,
    fault_seconds=240,
    fault_gap_seconds=(1.0, 3.0),
    pg_restarts=3,
    settle_timeout_seconds=240,
    page_size=16,
    executor_threads=32,
)
SMOKE = Profile(
    name="smoke",
    replicas=2,
    controls=300,
    waves=2,
    wave_interval_seconds=4,
    horizon_ms=6_000,
    live_ratio=0.1,
    fault_seconds=15,
    fault_gap_seconds=(0.5, 1.5),
    pg_restarts=1,
    settle_timeout_seconds=40,
)
# A primary and a streaming standby; mid-run the primary is killed (every process, SIGKILL),
# the standby promoted and the old primary rebuilt as the next standby, twice.
FAILOVER_ASYNC = Profile(
    name="failover-async",
    replicas=3,
    controls=900,
    waves=3,
    wave_interval_seconds=7,
    horizon_ms=12_000,
    live_ratio=0.1,
    fault_seconds=32,
    fault_gap_seconds=(1.0, 3.0),
    pg_restarts=0,
    settle_timeout_seconds=90,
    executor_threads=16,
    replication="async",
    failovers=2,
)
FAILOVER_SYNC = replace(FAILOVER_ASYNC, name="failover-sync", replication="sync")
# Three Patroni members on etcd, reached with a multi-host URL (target_session_attrs=read-write);
# Patroni itself fails over: a switchover, the leader SIGKILLed, the leader cut off from etcd.
PATRONI_FAILOVER = replace(
    FAILOVER_ASYNC,
    name="patroni-failover",
    replicas=8,
    controls=1_500,
    waves=4,
    wave_interval_seconds=12,
    fault_seconds=130,
    settle_timeout_seconds=150,
    replication="patroni-sync",
    failovers=3,
)
FAILOVER_SOAK_ASYNC = replace(
    SOAK,
    name="failover-soak-async",
    replicas=6,
    controls=8_000,
    waves=10,
    wave_interval_seconds=15,
    fault_seconds=170,
    pg_restarts=0,
    replication="async",
    failovers=2,
)
FAILOVER_SOAK_SYNC = replace(FAILOVER_SOAK_ASYNC, name="failover-soak-sync", replication="sync")
QUICK_PGBOUNCER = replace(QUICK, name="quick-pgbouncer", pooler="transaction")
HOSTILE = replace(QUICK, name="hostile", pg_restarts=0, fault_seconds=60, hostile_rounds=1)
HOSTILE_SOAK = replace(SOAK, name="hostile-soak", pg_restarts=0, hostile_rounds=3)
PROFILES = {
    p.name: p
    for p in (
        SMOKE,
        QUICK,
        QUICK_PGBOUNCER,
        SOAK,
        FAILOVER_ASYNC,
        FAILOVER_SYNC,
        PATRONI_FAILOVER,
        FAILOVER_SOAK_ASYNC,
        FAILOVER_SOAK_SYNC,
        HOSTILE,
        HOSTILE_SOAK,
    )
}


@dataclass
class Report:
    profile: str
    seed: int
    duration_seconds: float
    verdict: Verdict
    faults: Counter[str]
    outcomes: Counter[str]
    resolutions_per_second: float
    replica_exits: Counter[str]
    workdir: Path
    failovers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.verdict.violations

    def render(self) -> str:
        ops = self.verdict.operations
        lines = [
            f"contention profile {self.profile}  seed {self.seed}  "
            f"duration {self.duration_seconds:.0f}s",
            f"operations: {sum(ops.values())} ({_fmt(ops)})",
            f"history: {self.verdict.history_lines} lines, {self.verdict.claim_pages} claimed "
            f"pages, endings {_fmt(self.verdict.completions)}, "
            f"fence rejections {self.verdict.fence_rejections}",
            f"faults injected: {sum(self.faults.values())} ({_fmt(self.faults)})",
            *self.notes,
            f"claim latency: {_percentiles(self.verdict.claim_latency_ms)}",
            f"replica exits: {_fmt(self.replica_exits)}",
            *[f"failover {n}: {line}" for n, line in enumerate(self.failovers, 1)],
            *(
                [f"acknowledged, then lost with the old primary: {_fmt(self.verdict.lost)}"]
                if self.failovers
                else []
            ),
            f"final states: {_fmt(self.outcomes)}",
            f"automatic resolutions per second: {self.resolutions_per_second:.1f}",
            f"violations: {len(self.verdict.violations)}",
            *[f"  {v}" for v in self.verdict.violations[:20]],
        ]
        if not self.ok:
            lines.append(
                f"replay: python -m tests.contention --profile {self.profile} --seed {self.seed}"
                f"   (histories kept in {self.workdir})"
            )
        return "\n".join(lines)


def _percentiles(values: list[float]) -> str:
    if not values:
        return "no claims"
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return f"p50 {at(0.5):.1f} ms, p99 {at(0.99):.1f} ms, max {ordered[-1]:.1f} ms"


def _fmt(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "none"


class PrivatePostgres:
    """A private cluster the suite may stop, restart and cut connections on."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.cluster = localpg.start(data_dir, durable=False)
        # The throwaway cluster runs with synchronous_commit=off, so an immediate stop loses
        # acknowledged commits (the suite caught it: a created dispatch vanished). A session
        # setting overrides the command line; fsync stays off (the host does not crash).
        with self.admin() as conn:
            conn.execute("ALTER ROLE postgres SET synchronous_commit = on")

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.cluster.port,)

    def restart(self, down_seconds: float) -> None:
        self.cluster.stop()  # immediate mode: like a crash, recovered from WAL on start
        time.sleep(down_seconds)  # the outage itself
        self.cluster = localpg.start(self.data_dir, durable=False)

    def admin(self) -> psycopg.Connection[dict[str, Any]]:
        return psycopg.connect(
            self.cluster.url, autocommit=True, row_factory=dict_row, connect_timeout=5
        )

    def stop(self) -> None:
        self.cluster.stop()


Database = PrivatePostgres | ReplicatedPostgres | PatroniCluster


def terminate_resolver_backends(pg: Database, rng: random.Random) -> int:
    # Only our private cluster's resolver connections (application_name resolver...).
    with pg.admin() as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name LIKE 'resolver%%' AND random() < %s",
            (rng.uniform(0.3, 1.0),),
        ).fetchall()
    return len(rows)


class Proxies:
    """A faulty and a clean proxy per PostgreSQL node. Replicas connect through the faulty
    ones, executors and the harness through the clean ones; with two nodes the connection
    string names both (libpq tries them in turn, `target_session_attrs=read-write`)."""

    def __init__(self, ports: tuple[int, ...]) -> None:
        self.faulty = [FaultProxy(p) for p in ports]
        self.clean = [FaultProxy(p) for p in ports]

    def url(self, *, clean: bool) -> str:
        proxies = self.clean if clean else self.faulty
        hosts = ",".join(f"127.0.0.1:{p.port}" for p in proxies)
        query = "?target_session_attrs=read-write" if len(proxies) > 1 else ""
        return f"postgresql://postgres@{hosts}/postgres{query}"

    def point(self, ports: tuple[int, ...]) -> None:
        """After a restart or failover: the nodes listen on new ports."""
        for proxies in (self.faulty, self.clean):
            for proxy, port in zip(proxies, ports, strict=True):
                proxy.upstream_port = port

    def set_latency(self, seconds: float) -> None:
        for proxy in self.faulty:
            proxy.set_latency(seconds)

    def set_blackhole(self, on: bool) -> None:
        for proxy in self.faulty:
            proxy.set_blackhole(on)

    def reset_all(self) -> None:
        for proxy in self.faulty:
            proxy.reset_all()

    def close(self) -> None:
        for proxy in (*self.faulty, *self.clean):
            proxy.close()


class ReplicaSet:
    """`resolver run` processes configured by RESOLVER_* variables; restarted after kills."""

    def __init__(
        self,
        profile: Profile,
        database_url: str,
        workdir: Path,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self._profile = profile
        self._pooler = (
            {} if profile.pooler == "none" else {"RESOLVER_DATABASE_POOLER": profile.pooler}
        )
        self._url = database_url
        self._extra_env = extra_env or {}
        self._workdir = workdir
        self._generation = [0] * profile.replicas
        self._procs: list[subprocess.Popen[bytes] | None] = [None] * profile.replicas
        self._logs: list[Any] = []
        self.exits: Counter[str] = Counter()
        self._lock = threading.Lock()
        (workdir / "logs").mkdir()

    def env(self, replica_id: str) -> dict[str, str]:
        return replica_env(
            self._url,
            replica_id,
            self._workdir,
            RESOLVER_PAGE_SIZE=str(self._profile.page_size),
            **self._pooler,
            **self._extra_env,
        )

    def start(self, index: int) -> None:
        with self._lock:
            self._generation[index] += 1
            replica_id = f"r{index}g{self._generation[index]}"
            log = (self._workdir / "logs" / f"{replica_id}.log").open("wb")
            self._logs.append(log)
            self._procs[index] = spawn_replica(self.env(replica_id), log)

    def start_all(self) -> None:
        for index in range(self._profile.replicas):
            self.start(index)

    def kill9(self, index: int) -> None:
        proc = self._procs[index]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            self.exits["killed -9"] += 1
        self.start(index)

    def revive_dead(self) -> None:
        """A replica that exited by itself (e.g. refused to start while PostgreSQL was down)."""
        for index, proc in enumerate(self._procs):
            if proc is not None and proc.poll() is not None:
                self.exits[f"exit code {proc.returncode}"] += 1
                self.start(index)

    def stop_all(self) -> None:
        for proc in self._procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self._procs:
            if proc is not None:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    # SIGABRT makes faulthandler dump every thread's stack into the log.
                    proc.send_signal(signal.SIGABRT)
                    proc.wait()
                    self.exits["did not stop on SIGTERM"] += 1
        for log in self._logs:
            log.close()

    @property
    def count(self) -> int:
        return len(self._procs)


def replica_env(url: str, replica_id: str, workdir: Path, **extra: str) -> dict[str, str]:
    """A replica configured only by RESOLVER_* variables, with short cadence and leases."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    env.update(
        RESOLVER_DATABASE_URL=url,
        # Read-only evidence sessions follow the primary with `primary`: `read-write` refuses
        # every read-only session (docs/deployment.md, URL attributes per role).
        RESOLVER_EVIDENCE_DATABASE_URL=url.replace(
            "target_session_attrs=read-write", "target_session_attrs=primary"
        ),
        RESOLVER_REPLICA_ID=replica_id,
        RESOLVER_CONFIG=str(workdir / "providers.yaml"),
        RESOLVER_TEST_HISTORY_FILE=str(workdir / "history" / f"{replica_id}.jsonl"),
        RESOLVER_CADENCE_SECONDS="0.2",
        RESOLVER_RECOVERY_LEASE_SECONDS=str(RECOVERY_LEASE_SECONDS),
        RESOLVER_COMMIT_MARGIN_SECONDS="0.5",
        RESOLVER_DEFAULT_PROVIDER_TIMEOUT_SECONDS="1",
        RESOLVER_BACKOFF_BASE_SECONDS="0.2",
        RESOLVER_BACKOFF_MAX_SECONDS="2",
        RESOLVER_STORAGE_RETRY_MAX_SECONDS="1",
        RESOLVER_CONNECT_TIMEOUT_SECONDS="2",
        RESOLVER_STATEMENT_TIMEOUT_MS="3000",
        RESOLVER_SHUTDOWN_GRACE_SECONDS="5",
        RESOLVER_LOG_LEVEL="WARNING",
        PYTHONFAULTHANDLER="1",
        **receipt_key_env(),
    )
    env.update(extra)
    return env


def spawn_replica(env: dict[str, str], log: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "from resolver.app.cli import main; main()", "run"],
        env=env,
        stdout=log,
        stderr=log,
    )


@dataclass
class Run:
    profile: Profile
    seed: int
    workdir: Path
    rng: random.Random = field(init=False)
    plans: dict[str, Plan] = field(default_factory=dict)
    faults: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    """One line per hostile-database fault: what it did, what happened meanwhile."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)


def run_profile(profile: Profile, seed: int, *, keep: bool = False) -> Report:
    workdir = Path(tempfile.mkdtemp(prefix=f"contention-{profile.name}-"))
    (workdir / "history").mkdir()
    volume: hostile.WalVolume | None = None
    if profile.hostile_rounds:
        if not hostile.WalVolume.available():
            raise RuntimeError("hostile profiles mount a tmpfs for pg_wal: run as root")
        volume = hostile.WalVolume(workdir / "pg", workdir / "walfs")
    pg: Database
    if profile.replication.startswith("patroni"):
        workdir.chmod(0o755)  # Patroni runs as the postgres account under it
        pg = PatroniCluster(workdir / "pg", synchronous=profile.replication == "patroni-sync")
    elif profile.replication == "none":
        pg = PrivatePostgres(workdir / "pg")
    else:
        pg = ReplicatedPostgres(workdir / "pg", synchronous=profile.replication == "sync")
    try:
        with ExitStack() as stack:
            s3 = stack.enter_context(running_s3_server()) if profile.object_ratio else None
            report = _run(Run(profile, seed, workdir), pg, volume, s3)
    finally:
        pg.stop()
        if volume is not None:
            volume.close()
    if report.ok and not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def _run(
    run: Run, pg: Database, volume: hostile.WalVolume | None, s3: S3Server | None = None
) -> Report:
    profile, workdir = run.profile, run.workdir
    migrate.upgrade(pg.cluster.url)
    # The seeder publishes a crashed executor's receipt right after starting it on a 0.5 s
    # lease, standing in for an executor that published in time: under load the PUT may land
    # a little after that lease, which the provider would read as published late.
    objects = (
        None
        if s3 is None
        else {**s3.settings(), "timeout_seconds": 1, "max_clock_skew_seconds": 30}
    )
    (workdir / "providers.yaml").write_text(yaml.safe_dump(provider_config(objects)))
    proxies = Proxies(pg.ports)
    clean_url = proxies.url(clean=True)
    with pg.admin() as conn:
        write_scripts(conn, [])  # the script table exists before any replica inspects
        grant_operators(conn)
    pooled = ExitStack()
    faulty_url, store_url = proxies.url(clean=False), clean_url
    if profile.pooler != "none":
        bouncer = pooled.enter_context(
            pgbouncer(
                pg.cluster.url,
                profile.pooler,
                users=["postgres"],
                aliases={"faulty": proxies.faulty[0].port, "clean": proxies.clean[0].port},
            )
        )
        faulty_url = f"postgresql://postgres@127.0.0.1:{bouncer.port}/faulty"
        store_url = f"postgresql://postgres@127.0.0.1:{bouncer.port}/clean"
    replicas = ReplicaSet(profile, faulty_url, workdir, None if s3 is None else s3.reader.env())
    store = Storage(
        store_url,
        max_connections=profile.executor_threads + profile.seeder_threads,
        pooler=Pooler(profile.pooler),
    )
    store.open()
    started = time.monotonic()
    stop_faults = threading.Event()
    losses: list[LossPoint] = []
    idle = hostile.IdleInTransaction(pg.cluster.url) if run.profile.hostile_rounds else None
    if idle is not None:
        idle.ensure()
    try:
        replicas.start_all()
        live = _Workload(run, store, clean_url, s3)
        operators = Operators(
            store,
            executor_history(workdir / "history", "operators"),
            random.Random(run.rng.random()),
            forge_url=clean_url,
        )
        operators.start()
        faults = threading.Thread(
            target=_inject_faults,
            args=(run, pg, replicas, proxies, losses, stop_faults, HostileKit(idle, volume)),
            daemon=True,
        )
        faults.start()
        live.seed_all()
        faults.join(timeout=max(0.0, profile.fault_seconds - (time.monotonic() - started)))
        stop_faults.set()
        faults.join()
        proxies.set_blackhole(False)
        proxies.set_latency(0)
        live.wait_executors(profile.settle_timeout_seconds)
        _wait_settled(clean_url, replicas, profile.settle_timeout_seconds)
        operators.stop()
        duration = time.monotonic() - started
    finally:
        stop_faults.set()
        replicas.stop_all()
        store.close()
        pooled.close()
        proxies.close()
    if idle is not None:
        run.notes.append(
            f"idle in transaction for the whole run: {hostile.dead_rows(pg.cluster.url)} dead "
            "row versions in controls and executions at the end"
        )
        idle.close()
    with psycopg.connect(pg.cluster.url, row_factory=dict_row) as conn:
        rows = conn.execute(SNAPSHOT_SQL).fetchall()
        late_rows = conn.execute(LATE_SNAPSHOT_SQL).fetchall()
        rate = _resolution_rate(conn)
    events = read_histories(sorted((workdir / "history").glob("*.jsonl")))
    verdict = check(events, rows, run.plans, losses, policy=HUMAN_POLICY, late_rows=late_rows)
    run.notes.append(_operator_line(events, rows))
    if s3 is not None:
        run.notes.append(_object_line(rows, s3))
    for reason, n in replicas.exits.items():
        if reason not in EXPECTED_EXITS:
            verdict.violations.append(f"[replica_lifecycle] {n} replica(s): {reason}")
    outcomes = Counter(
        f"{r['status']}/{r['closed_by'] or r['state']}" for r in rows if r["status"] is not None
    )
    return Report(
        profile.name,
        run.seed,
        duration,
        verdict,
        run.faults,
        outcomes,
        rate,
        replicas.exits,
        workdir,
        _failover_lines(pg, profile),
        run.notes,
    )


def _object_line(rows: list[dict[str, Any]], s3: S3Server) -> str:
    """How the object-storage action type ended, and what its store saw."""
    ends = Counter(
        f"{r['status']}/{r['closed_by'] or r['state']}"
        for r in rows
        if r["action_type"] == OBJECT_TYPE
    )
    methods = Counter(method for method, _ in s3.recorder.requests)
    return (
        f"object storage ({OBJECT_TYPE}): {dict(sorted(ends.items()))}; the store answered "
        f"{dict(sorted(methods.items()))} through the proxy, {s3.recorder.throttled} of them "
        "503 SlowDown"
    )


def _operator_line(events: list[dict[str, Any]], rows: list[dict[str, Any]]) -> str:
    """What the people did: their answers, and what the final rows hold."""
    answers = Counter(
        e.get("result") or e.get("error") or e["type"]
        for e in events
        if e["f"] == "decide" and e["type"] != "invoke"
    )
    two = sum(1 for r in rows if r["source"] == "manual" and (r["people"] or 0) >= 2)
    escalated = sum(1 for r in rows if r["manual_reason"] == "evidence_window_elapsed")
    return (
        f"operators: {_fmt(answers)}; manual resolutions with two people: {two}; "
        f"escalated (evidence_window_elapsed): {escalated}"
    )


def _failover_lines(pg: Database, profile: Profile) -> list[str]:
    if isinstance(pg, PatroniCluster):
        return [
            f"patroni {f.kind}: {f.old_leader} -> {f.new_leader}, new leader writable in "
            f"{f.seconds_to_promote:.1f}s, three members streaming {f.seconds_to_rejoin:.1f}s later"
            for f in pg.failovers
        ]
    if not isinstance(pg, ReplicatedPostgres):
        return []
    return [
        f"{profile.replication} replication, standby had received {f.received_lsn} and "
        f"replayed {f.replayed_lsn}; promoted in {f.seconds_to_promote:.1f}s, new standby "
        f"streaming {f.seconds_to_rejoin:.1f}s later"
        for f in pg.failovers
    ]


class _Workload:
    """Seeds crashed executions in waves and runs live executors alongside."""

    def __init__(
        self, run: Run, store: Storage, admin_url: str, s3: S3Server | None = None
    ) -> None:
        self._run = run
        self._s3 = s3
        # Past the proxy: the throttling is for the replicas' reads, not the seeding.
        self._s3_writer = None if s3 is None else s3.client(s3.writer, direct=True)
        self._store = store
        self._admin_url = admin_url
        history_dir = run.workdir / "history"
        self._seed_history = executor_history(history_dir, "seeder")
        self._exec_history = executor_history(history_dir, "executors")
        self._executors = ThreadPoolExecutor(run.profile.executor_threads, "executor")
        self._seeders = ThreadPoolExecutor(run.profile.seeder_threads, "seeder")
        self._live_futures: list[Any] = []

    def seed_all(self) -> None:
        p = self._run.profile
        per_wave = p.controls // p.waves
        for wave in range(p.waves):
            wave_started = time.monotonic()
            plans = make_plans(
                self._run.rng,
                per_wave,
                self._db_now(),
                p.horizon_ms,
                wave,
                p.live_ratio,
                p.object_ratio,
            )
            # Plans first: a failover re-writes the scripts of every plan known by then.
            self._run.plans.update((pl.spec.dispatch_id, pl) for pl in plans)
            self._write_scripts(plans)
            crashed = [
                pl
                for pl in plans
                if pl.kind in (Kind.CRASHED_VERIFIED, Kind.CRASHED_MANUAL, Kind.CRASHED_ESCALATED)
            ]
            for pl in plans:
                if pl.kind in (Kind.LIVE_REPLAY, Kind.LIVE_DRIFT):
                    executor = LiveExecutor(
                        self._store,
                        self._exec_history,
                        random.Random(self._run.rng.random()),
                        EXECUTOR_LEASE_SECONDS,
                    )
                    self._live_futures.append(self._executors.submit(executor.run, pl))
            if self._s3 is not None:
                # The store throttles a burst of the replicas' reads each wave.
                self._s3.recorder.slow_down = 25
            list(self._seeders.map(self._seed, crashed))
            # Pace the waves so faults land while work is arriving, not only after.
            remaining = p.wave_interval_seconds - (time.monotonic() - wave_started)
            if wave < p.waves - 1 and remaining > 0:
                time.sleep(remaining)

    def _seed(self, plan: Plan) -> None:
        seed_crashed(self._store, plan, self._seed_history, CRASHED_LEASE_SECONDS)
        if plan.spec.action_type == OBJECT_TYPE and self._s3 is not None:
            self._with_admin(
                lambda c: publish_object_receipt(c, plan, self._s3_writer, BUCKET, PREFIX)
            )

    def wait_executors(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for future in self._live_futures:
            future.result(timeout=max(1.0, deadline - time.monotonic()))
        self._executors.shutdown()
        self._seeders.shutdown()

    def _db_now(self) -> int:
        return int(
            self._with_admin(
                lambda c: c.execute("SELECT resolver_now_ms(NULL) AS n").fetchone()["n"]
            )
        )

    def _write_scripts(self, plans: list[Plan]) -> None:
        self._with_admin(lambda c: write_scripts(c, plans))

    def _with_admin(self, action: Any) -> Any:
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(
                    self._admin_url, autocommit=True, row_factory=dict_row, connect_timeout=3
                ) as conn:
                    return action(conn)
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)  # PostgreSQL is being restarted by the fault schedule


def _inject_faults(
    run: Run,
    pg: Database,
    replicas: ReplicaSet,
    proxies: Proxies,
    losses: list[LossPoint],
    stop: threading.Event,
    kit: HostileKit,
) -> None:
    rng = random.Random(run.rng.random())
    p = run.profile
    kinds = [k for _ in range(p.hostile_rounds) for k in HOSTILE_FAULTS]
    hostile_at = [
        ((0.1 + 0.75 * n / len(kinds)) * p.fault_seconds, kind) for n, kind in enumerate(kinds)
    ]
    restart_at = sorted(rng.uniform(0.25, 0.85) * p.fault_seconds for _ in range(p.pg_restarts))
    # Failovers spread over the fault period, each with time to rejoin before the next.
    failover_at = [
        (0.2 + 0.6 * n / max(1, p.failovers)) * p.fault_seconds for n in range(p.failovers)
    ]
    started = time.monotonic()
    weights = {"kill9": 4, "terminate_backends": 3, "latency": 2, "blackhole": 2, "reset": 2}
    while not stop.wait(rng.uniform(*p.fault_gap_seconds)):
        replicas.revive_dead()
        elapsed = time.monotonic() - started
        if restart_at and elapsed >= restart_at[0]:
            restart_at.pop(0)
            assert isinstance(pg, PrivatePostgres)
            pg.restart(rng.uniform(1.0, 3.0))
            # An immediate stop loses asynchronously committed claims (by design), nothing else.
            losses.append(LossPoint(time.time_ns(), acknowledged=False))
            proxies.point(pg.ports)
            run.faults["pg_restart"] += 1
            continue
        if failover_at and elapsed >= failover_at[0]:
            failover_at.pop(0)
            assert isinstance(pg, ReplicatedPostgres | PatroniCluster)
            record = pg.failover()
            # Asynchronous replication may lose what the old primary acknowledged last.
            losses.append(LossPoint(record.killed_at_ns, acknowledged=not pg.synchronous))
            proxies.point(pg.ports)
            # The scripted evidence stands for an external system's records, which a failover
            # of the resolver's database does not lose: written again (idempotent).
            with pg.admin() as conn:
                write_scripts(conn, list(run.plans.values()))
            run.faults["failover"] += 1
            continue
        if hostile_at and elapsed >= hostile_at[0][0]:
            kind = hostile_at.pop(0)[1]
            run.notes.append(_hostile_fault(kind, pg, proxies, kit, stop))
            run.faults[kind] += 1
            continue
        fault = rng.choices(list(weights), weights=list(weights.values()))[0]
        if fault == "kill9":
            replicas.kill9(rng.randrange(replicas.count))
        elif fault == "terminate_backends":
            try:
                terminate_resolver_backends(pg, rng)
            except psycopg.OperationalError:
                continue
        elif fault == "latency":
            proxies.set_latency(rng.uniform(0.005, 0.05))
            stop.wait(rng.uniform(1, 4))
            proxies.set_latency(0)
        elif fault == "blackhole":
            # Sometimes longer than the recovery lease: the cut-off replica's commit goes stale.
            proxies.set_blackhole(True)
            stop.wait(rng.uniform(0.5, RECOVERY_LEASE_SECONDS + 2))
            proxies.set_blackhole(False)
        elif fault == "reset":
            proxies.reset_all()
        run.faults[fault] += 1
    replicas.revive_dead()


HOSTILE_FAULTS = ("row_locks", "exhaust_connections", "wal_full")


@dataclass(frozen=True, slots=True)
class HostileKit:
    idle: hostile.IdleInTransaction | None
    volume: hostile.WalVolume | None


def _hostile_fault(
    kind: str, pg: Database, proxies: Proxies, kit: HostileKit, stop: threading.Event
) -> str:
    url = pg.cluster.url
    if kind == "row_locks":
        return hostile.hold_row_locks(url, 6.0, stop)
    if kind == "exhaust_connections":
        taker = ThreadPoolExecutor(1)
        taken = taker.submit(hostile.exhaust_connections, url, 6.0, stop)
        stop.wait(2.0)  # the slots are taken; now the resolver must reconnect
        terminate_resolver_backends(pg, random.Random(0))
        line = taken.result()
        taker.shutdown()
        return line
    assert kind == "wal_full" and kit.volume is not None and isinstance(pg, PrivatePostgres)

    def revive() -> None:
        _revive(pg, proxies)
        if kit.idle is not None:
            kit.idle.ensure()

    return hostile.wal_full(kit.volume, url, 3.0, revive)


def _revive(pg: PrivatePostgres, proxies: Proxies) -> None:
    """After a PANIC the postmaster restarts by itself, or (if its crash recovery failed
    too) exits: then it is started again, as an orchestrator would."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with pg.admin():
                return
        except psycopg.OperationalError:
            if not (pg.data_dir / "postmaster.pid").exists():
                break
            time.sleep(0.3)  # crash recovery under way
    pg.cluster = localpg.start(pg.data_dir, durable=False)
    proxies.point(pg.ports)


def _wait_settled(url: str, replicas: ReplicaSet, timeout: float) -> None:
    """Polls the database (bounded) until no control is armed: settled or manual."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        replicas.revive_dead()
        try:
            with psycopg.connect(url, connect_timeout=3) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM approved_action_recovery_controls WHERE status = 'armed'"
                ).fetchone()
        except psycopg.OperationalError:
            row = None
        if row is not None and row[0] == 0:
            return
        time.sleep(0.5)  # polling interval of a bounded wait for a database condition


def _resolution_rate(conn: psycopg.Connection[dict[str, Any]]) -> float:
    row = conn.execute(
        "SELECT count(*) AS n, min(resolved_at_ms) AS first, max(resolved_at_ms) AS last"
        " FROM approved_action_recovery_resolutions WHERE source = 'automatic'"
    ).fetchone()
    assert row is not None
    if not row["n"] or row["last"] == row["first"]:
        return float(row["n"] or 0)
    return float(row["n"]) * 1000.0 / (row["last"] - row["first"])
