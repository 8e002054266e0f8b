"""The history benchmark in a tiny configuration: it runs, and its drains count the backlog only.

Never a timing threshold: whether history moves the claim or the drain is a ratio measured by
`python -m benchmarks.history`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks import history

K = 200


def test_history_case_drains_the_backlog_beside_a_seeded_history(
    pg_server: str, tmp_path: Path
) -> None:
    args = argparse.Namespace(
        database_url=pg_server,
        count=K,
        replicas=2,
        page_size=16,
        rounds=1,
        samples=25,
        max_drain_seconds=60.0,
        work_dir=str(tmp_path),
        json=None,
        settled=1_000,
        manual=100,
    )
    report = history.run(args)

    assert report["history"] == {"settled dispatches": 1_000, "manual queue": 100}
    for side in ("empty", "full"):
        (drain,) = report["drains"][side]
        # Only the backlog's resolutions count, not the half of the settled history that has
        # resolutions of its own; the manual queue is never claimed.
        assert not drain["timed_out"], side
        assert drain["resolved"] == drain["seeded"] == K, side
        assert report[side]["claim_samples"] == 25
        assert 0 < report[side]["claim_p50_ms"] <= report[side]["claim_p99_ms"]
    assert report["claim_p50_ratio"] > 0 and len(report["drain_ratio_per_round"]) == 1
