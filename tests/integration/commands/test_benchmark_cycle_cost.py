"""The loop-cost benchmark in a tiny configuration: both loops drain the backlog, and the
replica's stages are the real composition's. Never a timing threshold: the costs are
compared by `python -m benchmarks.cycle_cost` itself."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SMALL = ("-K", "200", "--page-size", "16")


def test_both_loops_resolve_the_same_backlog_and_the_stages_are_named(pg_server: str) -> None:
    # In its own process, as it is run: the benchmark points the process's logging at a file
    # it closes when done, and loggers cache that on first use; in the test worker's process
    # the tests after it would log into the closed file.
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.cycle_cost", "--database-url", pg_server, *SMALL],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    loops = dict(re.findall(r"^(replica|bare): (\d+) resolutions, CPU [\d.]+ ", out, re.M))
    # The first page of each loop prepares its statements outside the measured loop.
    assert loops == {"replica": "184", "bare": "184"}
    stages = set(re.findall(r"^ +[\d.]+ µs  (.+)$", out, re.M))
    assert {"claim_due_page", "commit_outcomes", "provider inspect_page", "outcomes"} <= stages
    assert "ResolverMetrics.committed" in stages and "CycleLog.cycle_completed" in stages
