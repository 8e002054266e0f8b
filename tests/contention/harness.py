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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import yaml
from psycopg.rows import dict_row

from resolver.db import migrate
from resolver.db.repository import PostgresStore
from resolver.demo import localpg

from .checker import SNAPSHOT_SQL, Verdict, check, read_histories
from .proxy import FaultProxy
from .workload import (
    Kind,
    LiveExecutor,
    Plan,
    executor_history,
    make_plans,
    provider_config,
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
PROFILES = {p.name: p for p in (SMOKE, QUICK, SOAK)}


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
            f"replica exits: {_fmt(self.replica_exits)}",
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

    def restart(self, down_seconds: float) -> int:
        self.cluster.stop()  # immediate mode: like a crash, recovered from WAL on start
        time.sleep(down_seconds)  # the outage itself
        self.cluster = localpg.start(self.data_dir, durable=False)
        return self.cluster.port

    def admin(self) -> psycopg.Connection[dict[str, Any]]:
        return psycopg.connect(
            self.cluster.url, autocommit=True, row_factory=dict_row, connect_timeout=5
        )

    def terminate_resolver_backends(self, rng: random.Random) -> int:
        # Only our private cluster's resolver connections (application_name resolver...).
        with self.admin() as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name LIKE 'resolver%%' AND random() < %s",
                (rng.uniform(0.3, 1.0),),
            ).fetchall()
        return len(rows)

    def stop(self) -> None:
        self.cluster.stop()


class ReplicaSet:
    """`resolver run` processes configured by RESOLVER_* variables; restarted after kills."""

    def __init__(self, profile: Profile, database_url: str, workdir: Path) -> None:
        self._profile = profile
        self._url = database_url
        self._workdir = workdir
        self._generation = [0] * profile.replicas
        self._procs: list[subprocess.Popen[bytes] | None] = [None] * profile.replicas
        self._logs: list[Any] = []
        self.exits: Counter[str] = Counter()
        self._lock = threading.Lock()
        (workdir / "logs").mkdir()

    def env(self, replica_id: str) -> dict[str, str]:
        return replica_env(
            self._url, replica_id, self._workdir, RESOLVER_PAGE_SIZE=str(self._profile.page_size)
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

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)


def run_profile(profile: Profile, seed: int, *, keep: bool = False) -> Report:
    workdir = Path(tempfile.mkdtemp(prefix=f"contention-{profile.name}-"))
    (workdir / "history").mkdir()
    pg = PrivatePostgres(workdir / "pg")
    try:
        report = _run(Run(profile, seed, workdir), pg)
    finally:
        pg.stop()
    if report.ok and not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def _run(run: Run, pg: PrivatePostgres) -> Report:
    profile, workdir = run.profile, run.workdir
    migrate.upgrade(pg.cluster.url)
    (workdir / "providers.yaml").write_text(yaml.safe_dump(provider_config()))
    faulty, clean = FaultProxy(pg.cluster.port), FaultProxy(pg.cluster.port)
    clean_url = f"postgresql://postgres@127.0.0.1:{clean.port}/postgres"
    with pg.admin() as conn:
        write_scripts(conn, [])  # the script table exists before any replica inspects
    replicas = ReplicaSet(
        profile, f"postgresql://postgres@127.0.0.1:{faulty.port}/postgres", workdir
    )
    store = PostgresStore(
        clean_url, max_connections=profile.executor_threads + profile.seeder_threads
    )
    store.open()
    started = time.monotonic()
    stop_faults = threading.Event()
    try:
        replicas.start_all()
        live = _Workload(run, store, clean_url)
        faults = threading.Thread(
            target=_inject_faults,
            args=(run, pg, replicas, (faulty, clean), stop_faults),
            daemon=True,
        )
        faults.start()
        live.seed_all()
        faults.join(timeout=max(0.0, profile.fault_seconds - (time.monotonic() - started)))
        stop_faults.set()
        faults.join()
        faulty.set_blackhole(False)
        faulty.set_latency(0)
        live.wait_executors(profile.settle_timeout_seconds)
        _wait_settled(clean_url, replicas, profile.settle_timeout_seconds)
        duration = time.monotonic() - started
    finally:
        stop_faults.set()
        replicas.stop_all()
        store.close()
        faulty.close()
        clean.close()
    with psycopg.connect(pg.cluster.url, row_factory=dict_row) as conn:
        rows = conn.execute(SNAPSHOT_SQL).fetchall()
        rate = _resolution_rate(conn)
    events = read_histories(sorted((workdir / "history").glob("*.jsonl")))
    verdict = check(events, rows, run.plans)
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
    )


class _Workload:
    """Seeds crashed executions in waves and runs live executors alongside."""

    def __init__(self, run: Run, store: PostgresStore, admin_url: str) -> None:
        self._run = run
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
                self._run.rng, per_wave, self._db_now(), p.horizon_ms, wave, p.live_ratio
            )
            self._write_scripts(plans)
            self._run.plans.update((pl.spec.dispatch_id, pl) for pl in plans)
            crashed = [
                pl for pl in plans if pl.kind in (Kind.CRASHED_VERIFIED, Kind.CRASHED_MANUAL)
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
            list(
                self._seeders.map(
                    lambda pl: seed_crashed(
                        self._store, pl, self._seed_history, CRASHED_LEASE_SECONDS
                    ),
                    crashed,
                )
            )
            # Pace the waves so faults land while work is arriving, not only after.
            remaining = p.wave_interval_seconds - (time.monotonic() - wave_started)
            if wave < p.waves - 1 and remaining > 0:
                time.sleep(remaining)

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
    pg: PrivatePostgres,
    replicas: ReplicaSet,
    proxies: tuple[FaultProxy, FaultProxy],
    stop: threading.Event,
) -> None:
    rng = random.Random(run.rng.random())
    faulty, clean = proxies
    restart_at = sorted(
        rng.uniform(0.25, 0.85) * run.profile.fault_seconds for _ in range(run.profile.pg_restarts)
    )
    started = time.monotonic()
    weights = {"kill9": 4, "terminate_backends": 3, "latency": 2, "blackhole": 2, "reset": 2}
    while not stop.wait(rng.uniform(*run.profile.fault_gap_seconds)):
        replicas.revive_dead()
        if restart_at and time.monotonic() - started >= restart_at[0]:
            restart_at.pop(0)
            port = pg.restart(rng.uniform(1.0, 3.0))
            faulty.upstream_port = clean.upstream_port = port
            run.faults["pg_restart"] += 1
            continue
        fault = rng.choices(list(weights), weights=list(weights.values()))[0]
        if fault == "kill9":
            replicas.kill9(rng.randrange(replicas.count))
        elif fault == "terminate_backends":
            try:
                pg.terminate_resolver_backends(rng)
            except psycopg.OperationalError:
                continue
        elif fault == "latency":
            faulty.set_latency(rng.uniform(0.005, 0.05))
            stop.wait(rng.uniform(1, 4))
            faulty.set_latency(0)
        elif fault == "blackhole":
            # Sometimes longer than the recovery lease: the cut-off replica's commit goes stale.
            faulty.set_blackhole(True)
            stop.wait(rng.uniform(0.5, RECOVERY_LEASE_SECONDS + 2))
            faulty.set_blackhole(False)
        elif fault == "reset":
            faulty.reset_all()
        run.faults[fault] += 1
    replicas.revive_dead()


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
