"""The outcome-feed benchmark end to end in a tiny configuration: it runs, every variant settles
everything, and both consumers receive every record of both loads.

Never a timing threshold: figures come from `python -m benchmarks.outcomes` (docs/performance.md).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from benchmarks import outcomes

K = 300


def test_the_outcome_benchmark_runs_and_its_figures_add_up(pg_server: str, tmp_path: Path) -> None:
    result = outcomes.run(
        database_url=pg_server,
        count=K,
        replicas=2,
        page_size=64,
        rounds=1,
        executors=2,
        completions=K,
        trickle_rate=50,
        trickle_seconds=2,
        work_dir=tmp_path,
        echo=lambda _line: None,
    )
    assert {d.variant for d in result.drains} == set(outcomes.VARIANTS)
    for drain in result.drains:
        assert drain.resolved == K, drain.variant
        assert drain.per_second > 0 and drain.wal_bytes > 0
    # WAL is the whole cluster's: on a shared server other work writes beside each round, so
    # what the feed adds to it is the benchmark's comparison (a private cluster), not this test's.
    for run in result.completions_runs:
        assert run.completed == K, run.variant
        assert run.per_second > 0 and 0 < run.p50_ms <= run.p99_ms
    # Each consumer received every record of each load (the harness waits for their saved
    # cursors to reach the last one). Their lag needs commit timestamps, which a given server
    # may not keep: its figures are the benchmark's, not this test's.
    assert {(lag.load, lag.wake, lag.records) for lag in result.lags} == {
        ("trickle", "listen", 100),
        ("trickle", "poll", 100),
        ("drain", "listen", K),
        ("drain", "poll", K),
    }
    assert "| no-feed |" in outcomes.markdown(result)
    assert json.loads(json.dumps(asdict(result)))["lags"]
