"""Measured processes: start them, stop them, read what the kernel says they used.

Resolver replicas are real `resolver run` processes, configured only by `RESOLVER_*`
variables (and the provider file those name), exactly as a user starts them. The bare loop
still uses a ready/go handshake: it is the ceiling, not the product.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.protocol import ProcessStats, read_stats

# Measured processes run `python -m benchmarks...` from the checkout, wherever we are.
REPO_ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# `totals:`, not `summary:`, which holds only what was collected since the last toggle.
CALLGRIND_TOTAL = re.compile(rb"^totals: (\d+)", re.MULTILINE)


def callgrind_total(path: Path) -> int | None:
    """The instructions a callgrind output file counts (what callgrind_annotate calls the
    program totals), or None while the process runs (callgrind writes the file as it exits)."""
    if not path.exists():
        return None
    found = CALLGRIND_TOTAL.search(path.read_bytes())
    return int(found.group(1)) if found else None


def cpu_us(pid: int) -> int | None:
    """User + system CPU of one process (µs), or None once it is gone or unreadable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    # The command name (field 2) may hold spaces: split after its closing parenthesis.
    fields = raw.rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) * 1_000_000 // CLOCK_TICKS


def oncpu_us(pid: int) -> int | None:
    """Time on a CPU of every thread of one process (µs), from the scheduler's own count in
    nanoseconds (`/proc/<pid>/task/*/schedstat`), or None once it is gone or unreadable.
    `cpu_us` reads clock ticks (10 ms): over a short window, each process's reading is off
    by up to a tick, which is more than an idle process uses in it."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        total_ns = 0
        for task in tasks:
            total_ns += int((task / "schedstat").read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total_ns // 1_000


def reaped_children_cpu_us(pid: int) -> int | None:
    """User + system CPU (µs) of the children `pid` has waited for (cutime + cstime): for a
    PostgreSQL postmaster, every backend that exited, which /proc no longer lists."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) * 1_000_000 // CLOCK_TICKS


def parent_pid(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    return int(raw.rsplit(")", 1)[1].split()[1])


def cpu_of(pids: Iterable[int], read: Callable[[int], int | None] = cpu_us) -> dict[int, int]:
    """Each live process's CPU (µs) as `read` counts it: clock ticks (`cpu_us`) or the
    scheduler's nanoseconds (`oncpu_us`)."""
    out = {}
    for pid in pids:
        used = read(pid)
        if used is not None:
            out[pid] = used
    return out


def cpu_delta_us(before: Mapping[int, int], after: Mapping[int, int]) -> int:
    """CPU used between two samples; a process born in between counts from zero."""
    return sum(used - before.get(pid, 0) for pid, used in after.items())


def peak_rss_kb(pid: int) -> int:
    """VmHWM (peak resident set) of a live process, 0 when unreadable."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


# The `resolver` script to measure instead, e.g. one in a virtualenv holding only the product
# (the image's environment), for start-up figures (benchmarks.startup).
RESOLVER_SCRIPT_ENV = "BENCH_RESOLVER_SCRIPT"


def resolver_command() -> list[str]:
    """`resolver` as installed next to this interpreter (what a user runs), else -m."""
    given = os.environ.get(RESOLVER_SCRIPT_ENV)
    if given:
        return [given]
    script = Path(sys.executable).with_name("resolver")
    if script.exists():
        return [str(script)]
    found = shutil.which("resolver")
    return [found] if found else [sys.executable, "-m", "resolver"]


def terminate(procs: Sequence[subprocess.Popen[Any]], timeout_seconds: float) -> list[int]:
    """SIGTERM every live process, wait (SIGKILL past the timeout); the indices of those that
    exited with an error (a clean exit or the SIGTERM itself is no error)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout_seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return [i for i, p in enumerate(procs) if p.returncode not in (0, -signal.SIGTERM)]


def kill_all(procs: Sequence[subprocess.Popen[Any]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@dataclass
class Replicas:
    """R `resolver run` processes started together; their stderr goes to log files."""

    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    spawned_ms: float = 0.0
    """Wall clock (ms) just before the first spawn: same host clock as the database's."""

    @classmethod
    def start(
        cls,
        count: int,
        *,
        work_dir: Path,
        name: str,
        env: Mapping[str, str],
        per_replica: Callable[[int], Mapping[str, str]] | None = None,
    ) -> Replicas:
        group = cls()
        base = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
        group.spawned_ms = time.time() * 1000
        for index in range(count):
            log_path = work_dir / f"{name}-{index}.log"
            with log_path.open("wb") as log:
                proc = subprocess.Popen(
                    [*resolver_command(), "run"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env={
                        **base,
                        "RESOLVER_REPLICA_ID": f"{name}-{index}",
                        **env,
                        **(per_replica(index) if per_replica else {}),
                    },
                )
            group.procs.append(proc)
            group.logs.append(log_path)
        return group

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def all_exited(self) -> bool:
        return all(proc.poll() is not None for proc in self.procs)

    def check_alive(self) -> None:
        dead = [i for i, p in enumerate(self.procs) if p.poll() is not None]
        if dead:
            tail = self.logs[dead[0]].read_text(encoding="utf-8", errors="replace")[-2000:]
            self.kill()
            raise RuntimeError(f"replica {dead[0]} exited early:\n{tail}")

    def peak_rss_kb(self) -> int:
        return max((peak_rss_kb(pid) for pid in self.pids), default=0)

    def stop(self, timeout_seconds: float = 30.0) -> None:
        """SIGTERM (the graceful stop `resolver run` documents), then wait."""
        failed = terminate(self.procs, timeout_seconds)
        if failed:
            raise RuntimeError(f"replicas {failed} exited with an error; see {self.logs[0]}")

    def kill(self) -> None:
        kill_all(self.procs)

    def log_events(self, event: str) -> list[dict[str, object]]:
        """The JSON log lines named `event`, from every replica's log."""
        out: list[dict[str, object]] = []
        for path in self.logs:
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if f'"{event}"' not in line:
                    continue
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                if isinstance(doc, dict) and doc.get("event") == event:
                    out.append(doc)
        return out

    def started_ms(self) -> list[float]:
        """When each replica logged `resolver_started` (its loop starts right after)."""
        return [
            datetime.datetime.fromisoformat(str(doc["timestamp"])).timestamp() * 1000
            for doc in self.log_events("resolver_started")
            if "timestamp" in doc
        ]


@dataclass
class Group:
    """R bare-loop processes that start working at the same instant (ready/go)."""

    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    stats_paths: list[Path] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        argv_for: Sequence[Sequence[str]],
        *,
        work_dir: Path,
        name: str,
        env: Mapping[str, str] | None = None,
    ) -> Group:
        group = cls()
        for index, argv in enumerate(argv_for):
            stats_path = work_dir / f"{name}-{index}.json"
            stats_path.unlink(missing_ok=True)
            log = (work_dir / f"{name}-{index}.log").open("w", encoding="utf-8")
            proc = subprocess.Popen(
                [sys.executable, "-m", *argv, str(stats_path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=REPO_ROOT,
                env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
            )
            log.close()
            group.procs.append(proc)
            group.stats_paths.append(stats_path)
        group._await_ready(work_dir, name)
        return group

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def _await_ready(self, work_dir: Path, name: str) -> None:
        for index, proc in enumerate(self.procs):
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line != "ready":
                self.kill()
                log = (work_dir / f"{name}-{index}.log").read_text(encoding="utf-8")[-2000:]
                raise RuntimeError(f"{name}-{index} did not start (got {line!r}):\n{log}")

    def go(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()

    def all_exited(self) -> bool:
        return all(proc.poll() is not None for proc in self.procs)

    def peak_rss_kb(self) -> int:
        return max((peak_rss_kb(pid) for pid in self.pids), default=0)

    def stop(self, timeout_seconds: float = 30.0) -> list[ProcessStats]:
        """SIGTERM, then collect every stats file."""
        failed = terminate(self.procs, timeout_seconds)
        if failed:
            raise RuntimeError(f"processes {failed} exited with an error; see their logs")
        return [read_stats(path) for path in self.stats_paths]

    def kill(self) -> None:
        kill_all(self.procs)
