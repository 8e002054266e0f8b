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
    cycles: int = 0
    peak_rss_kb: int = 0


def await_go() -> None:
    """Tell the harness this process is connected, then block until every process is."""
    print("ready", flush=True)
    sys.stdin.readline()


def write_stats(path: str, stats: ProcessStats) -> None:
    # ru_maxrss is the peak resident set size in KiB on Linux.
    stats.peak_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    Path(path).write_text(json.dumps(asdict(stats)), encoding="utf-8")


def read_stats(path: Path) -> ProcessStats:
    raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return ProcessStats(**raw)
