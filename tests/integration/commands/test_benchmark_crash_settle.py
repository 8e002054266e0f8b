"""The crash-to-settled benchmark end to end in a tiny configuration: every crash is settled
by real replicas, and idle replicas write nothing.

Never a timing threshold: speed is a figure measured by `python -m benchmarks.crash_settle`.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.crash_settle import Options, markdown, run


def test_crash_settle_benchmark_settles_every_crash_and_idles_without_writing(
    pg_server: str, tmp_path: Path
) -> None:
    options = Options(
        database_url=pg_server,
        rate=50,
        seconds=1,
        replicas=2,
        idle_replicas=2,
        idle_seconds=2,
        idle_warmup_seconds=3,
        work_dir=tmp_path,
    )
    report = run(options)

    assert report.crash is not None
    crash = report.crash
    assert crash.settled == crash.crashes == 50
    # Never settled before its lease ran out (the claim's fence), whatever the machine.
    assert 0 <= crash.p50_ms <= crash.p95_ms <= crash.p99_ms <= crash.max_ms
    assert report.idle is not None
    assert report.idle.rows_written == 0
    # Read from the scheduler's own count: the replicas ran their cycles in both windows.
    assert report.idle.started.replicas > 0 and report.idle.steady.replicas > 0
    assert report.idle.started.server is None  # a server the benchmark does not own
    assert "crash to settled at 50/s" in markdown(report)
