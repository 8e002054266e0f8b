"""The graphile-worker peer: the queue a user would pick for raw throughput, same PostgreSQL.

Its published performance method (graphile-worker's `perfTest`): no-op jobs queued with its
own `add_job`, 4 worker processes x 24 concurrent jobs, a local queue of 500 jobs per fetch
and batched completion. The npm package is pinned by `benchmarks/graphile/package.json` and
its lock file and installed with `npm ci` into a cache directory (never into the checkout);
without `node` and `npm` the case is skipped with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, LiteralString

import psycopg

from benchmarks import sql
from benchmarks.procs import (
    REPO_ROOT,
    cpu_delta_us,
    cpu_of,
    kill_all,
    parent_pid,
    peak_rss_kb,
    reaped_children_cpu_us,
    terminate,
)

PACKAGE_DIR = REPO_ROOT / "benchmarks" / "graphile"
PACKAGE_FILES = ("package.json", "package-lock.json", "peer.js", "executor.mjs")
PROCESSES = 4
CONCURRENCY = 24  # per process: peer.js sets it, with the local queue and batch settings
CACHE_ENV = "RESOLVER_BENCH_CACHE"

# graphile-worker's own published seeding: one add_job per job, set-based.
QUEUE_JOBS: LiteralString = """
DO $$ BEGIN
  PERFORM graphile_worker.add_job('log_if_999', json_build_object('id', i))
  FROM generate_series(1, %s) AS i;
END $$
"""
JOBS_LEFT: LiteralString = (
    "SELECT /* bench-monitor */ count(*) AS n FROM graphile_worker._private_jobs"
)


@dataclass(slots=True)
class PeerResult:
    jobs: int
    completed: int
    seconds: float
    """First job started to last job finished, over every process (host clock)."""
    process_cpu_us: float | None
    server_cpu_us: float | None
    peak_rss_mb: float
    left: int
    """Jobs still queued after the processes finished (0 unless something failed)."""

    @property
    def per_second(self) -> float:
        return self.completed / self.seconds if self.seconds > 0 else 0.0


def unavailable_reason() -> str | None:
    """Why the peer cannot run here, or None."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found: graphile-worker peer not measured"
    return None


def install(cache_root: Path | None = None) -> Path:
    """`npm ci` the pinned package into a cache directory named by the lock's digest."""
    digest = hashlib.sha256()
    for name in PACKAGE_FILES:
        digest.update((PACKAGE_DIR / name).read_bytes())
    root = cache_root or Path(
        os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "resolver-benchmarks"
    )
    target = root / f"graphile-worker-{digest.hexdigest()[:16]}"
    if (target / "node_modules" / "graphile-worker").is_dir():
        return target
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in PACKAGE_FILES:
        shutil.copy2(PACKAGE_DIR / name, staging / name)
    # --ignore-scripts: no install script of any dependency runs on the benchmark machine.
    subprocess.run(
        ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=staging,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def migrate(install_dir: Path, url: str) -> None:
    subprocess.run(
        ["node", "peer.js", "migrate"],
        cwd=install_dir,
        env={**os.environ, "DATABASE_URL": url},
        check=True,
    )


def queue_jobs(url: str, count: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE graphile_worker._private_jobs, graphile_worker._private_job_queues")
        conn.execute(QUEUE_JOBS % count)  # an int, formatted: DO takes no parameters
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


def run(install_dir: Path, url: str, count: int, *, all_server_processes: bool) -> PeerResult:
    """Queue `count` jobs, run the 4 workers until the queue is empty, measure from outside:
    CPU from /proc between the first job any process ran and the last process finishing."""
    queue_jobs(url, count)
    env = {**os.environ, "DATABASE_URL": url}
    with psycopg.connect(url, autocommit=True) as monitor:
        procs = [
            subprocess.Popen(
                ["node", "peer.js", "work"],
                cwd=install_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        pids = [p.pid for p in procs]
        try:
            first_job = threading.Event()
            reports: list[dict[str, Any]] = []
            readers = [
                threading.Thread(target=_read, args=(p, first_job, reports), daemon=True)
                for p in procs
            ]
            for reader in readers:
                reader.start()
            first_job.wait(120)
            before = cpu_sample(monitor, pids, all_server_processes)
            for reader in readers:
                reader.join(120)
            after = cpu_sample(monitor, pids, all_server_processes)
            rss = max((peak_rss_kb(pid) for pid in pids), default=0)
            row = monitor.execute(JOBS_LEFT).fetchone()
            left = int(row[0]) if row else -1
        finally:
            terminate(procs, 10.0)
            kill_all(procs)
    done = [r for r in reports if r.get("first_ms") is not None]
    completed = sum(int(r["jobs"]) for r in reports)
    seconds = (
        (max(r["last_ms"] for r in done) - min(r["first_ms"] for r in done)) / 1000 if done else 0.0
    )
    return PeerResult(
        jobs=count,
        completed=completed,
        seconds=max(0.001, seconds),
        process_cpu_us=_per(cpu_delta_us(before[0], after[0]), completed),
        # On a given server the workers' backends are gone before the last sample.
        server_cpu_us=(
            _per(cpu_delta_us(before[1], after[1]), completed) if all_server_processes else None
        ),
        peak_rss_mb=rss / 1024,
        left=left,
    )


def _read(
    proc: subprocess.Popen[str], first_job: threading.Event, reports: list[dict[str, Any]]
) -> None:
    """A worker prints `first` when it runs its first job and one JSON line once the queue is
    empty; it then idles until SIGTERM, so its CPU is still readable."""
    assert proc.stdout is not None
    for line in proc.stdout:
        text = line.strip()
        if text == "first":
            first_job.set()
        elif text.startswith("{"):
            reports.append(json.loads(text))
            return


def cpu_sample(
    monitor: psycopg.Connection[Any], pids: list[int], all_server_processes: bool
) -> tuple[Mapping[int, int], Mapping[int, int]]:
    """CPU of the workers and of the server. The workers close their connections when the
    queue is empty, before the last sample: on a private cluster the backends that exited
    are counted from the postmaster's reaped-children time (a pseudo-entry keyed -pid)."""
    server_pids = [
        int(r[0]) for r in monitor.execute(sql.SERVER_PIDS, {"all_databases": all_server_processes})
    ]
    server = cpu_of(server_pids)
    if all_server_processes:
        row = monitor.execute("SELECT pg_backend_pid()").fetchone()
        postmaster = parent_pid(int(row[0])) if row else None
        reaped = reaped_children_cpu_us(postmaster) if postmaster else None
        if postmaster and reaped is not None:
            server[-postmaster] = reaped
    return cpu_of(pids), server


def _per(cpu_us: int, completed: int) -> float | None:
    return cpu_us / completed if completed > 0 else None


def describe(result: PeerResult) -> str:
    line = (
        f"{result.per_second:,.0f} jobs/s ({result.completed} in {result.seconds:.2f}s steady)"
        f", cpu/job {_num(result.process_cpu_us)} us, postgres {_num(result.server_cpu_us)} us"
    )
    if result.left:
        line += f", {result.left} JOBS LEFT"
    return line


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"
