"""Measured processes: start them, release them together, stop them, read their stats."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.protocol import ProcessStats, read_stats

# Measured processes run `python -m benchmarks...` from the checkout, wherever we are.
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Group:
    """R processes of one kind that start working at the same instant."""

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

    def stop(self, timeout_seconds: float = 30.0) -> list[ProcessStats]:
        """SIGTERM (the replica's graceful stop), then collect every stats file."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout_seconds)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        failed = [i for i, p in enumerate(self.procs) if p.returncode not in (0, -signal.SIGTERM)]
        if failed:
            raise RuntimeError(f"processes {failed} exited with an error; see their logs")
        return [read_stats(path) for path in self.stats_paths]

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
