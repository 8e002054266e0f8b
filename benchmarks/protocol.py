"""How a measured process talks to the harness: `ready`, wait for `go`, stats as JSON at exit."""

from __future__ import annotations

import json
import resource
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(slots=True)
class ProcessStats:
    pages: int = 0
    resolved: int = 0
    claim_ms: list[float] = field(default_factory=list)
    commit_ms: list[float] = field(default_factory=list)
    inspect_ms: list[float] = field(default_factory=list)
    cycles: int = 0
    peak_rss_kb: int = 0


def await_go() -> None:
    """Tell the harness this process is connected, then block until every process is."""
    print("ready", flush=True)
    sys.stdin.readline()


def peak_rss_kb() -> int:
    """This process's peak resident set size (KiB).

    VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork and exec,
    so a child of a large harness would report the harness's peak.
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def write_stats(path: str, stats: ProcessStats) -> None:
    stats.peak_rss_kb = peak_rss_kb()
    Path(path).write_text(json.dumps(asdict(stats)), encoding="utf-8")


def read_stats(path: Path) -> ProcessStats:
    raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return ProcessStats(**raw)
