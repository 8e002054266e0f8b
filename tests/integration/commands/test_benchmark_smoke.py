"""The benchmark harness end to end in a tiny configuration: it runs and its numbers add up.

Never a timing threshold: speed is a ratio measured by `python -m benchmarks.run`.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import peer, pgbench
from benchmarks.run import Options, markdown, run, targets, to_json

K = 300


def test_harness_runs_and_reports_self_consistent_figures(pg_server: str, tmp_path: Path) -> None:
    options = Options(
        database_url=pg_server,
        count=K,
        replicas=2,
        page_sizes=(16,),
        pgbench_seconds=1,
        pgbench_scale=1,
        # From the replica's spawn: on a loaded machine its start-up alone can take seconds,
        # and the window must still hold a cycle.
        idle_seconds=6,
        closed_small=100,
        closed_large=1_000,
        scan_due=50,
        scan_samples=50,
        max_drain_seconds=60,
        http_count=K,
        work_dir=tmp_path,
    )
    report = run(options, echo=lambda *_a, **_k: None)

    kinds = {(d.case.kind, d.case.action_type) for d in report.drains}
    assert ("bare", "bench.instant") in kinds
    resolver_cases = ("bench.receipt", "bench.instant", "bench.delayed", "bench.http")
    assert {("resolver", a) for a in resolver_cases} <= kinds
    for d in report.drains:
        assert not d.timed_out, d.case.name
        assert d.resolved == d.seeded == K, d.case.name
        assert d.seconds > 0 and d.per_second > 0
        assert d.peak_rss_mb > 0 and d.processes == 2
        # The CPU window runs from the first resolution seen to the drained backlog.
        assert 0 <= d.window_resolved < K
        if d.window_resolved:
            # Read from /proc in clock ticks (10 ms): a tiny window may read zero.
            assert d.process_cpu_us is not None and d.process_cpu_us >= 0
        if d.statements_per_resolution is not None:
            # A page costs a constant number of statements: never one or more per item.
            assert 0 < d.statements_per_resolution < 1
            assert d.claim_ms_mean is not None and d.claim_ms_mean > 0
        if d.case.kind == "resolver":
            # Real `resolver run` processes: spawned, then their first claim, from the
            # database's own record of it.
            assert d.startup_ms is not None and d.startup_ms > 0, d.case.name
            # A replica still starting when a tiny backlog is gone never logs its start.
            assert d.slowest_started_ms is None or d.slowest_started_ms > 0
    (http,) = [d for d in report.drains if d.case.action_type == "bench.http"]
    assert http.http is not None
    assert http.http["replicas_seen"] == 2  # each replica's token reached the service
    assert 1 <= http.http["connections_per_replica"] <= http.http["max_in_flight"]
    assert http.http["max_window_over_cap"] > 0
    if pgbench.find_pgbench() is not None:
        assert len(report.pgbench_tps) == 2 and all(t > 0 for t in report.pgbench_tps)
    assert report.scan is not None and report.scan.samples >= 50
    assert 0 < report.scan.small_p50_ms <= report.scan.small_p99_ms
    assert report.idle is not None and report.idle.cycles >= 1
    assert report.idle.tuples_written == 0  # an idle replica writes nothing, on any server

    if peer.unavailable_reason() is None:
        # The graphile-worker peer ran its no-op jobs to the end on the same server.
        (gw,) = report.peer_runs
        assert gw.completed == gw.jobs == K and gw.left == 0
        assert gw.per_second > 0
    else:
        assert not report.peer_runs and any("graphile-worker" in n for n in report.notes)

    assert len(targets(report)) == 18
    assert "receipts-p16" in markdown(report)
    assert json.loads(json.dumps(to_json(report)))["drains"]
