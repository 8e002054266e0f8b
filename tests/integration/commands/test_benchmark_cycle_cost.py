"""The loop-cost benchmark in a tiny configuration: both loops drain the backlog, and the
replica's stages are the real composition's. Never a timing threshold: the costs are
compared by `python -m benchmarks.cycle_cost` itself."""

from __future__ import annotations

import re

import pytest

from benchmarks import cycle_cost


def test_both_loops_resolve_the_same_backlog_and_the_stages_are_named(
    pg_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cycle_cost.main(["--database-url", pg_server, "-K", "200", "--page-size", "16"])

    out = capsys.readouterr().out
    loops = dict(re.findall(r"^(replica|bare): (\d+) resolutions, CPU [\d.]+ ", out, re.M))
    # The first page of each loop prepares its statements outside the measured loop.
    assert loops == {"replica": "184", "bare": "184"}
    stages = set(re.findall(r"^ +[\d.]+ µs  (.+)$", out, re.M))
    assert {"claim_due_page", "commit_outcomes", "provider inspect_page", "outcomes"} <= stages
    assert "ResolverMetrics.committed" in stages and "CycleLog.cycle_completed" in stages
