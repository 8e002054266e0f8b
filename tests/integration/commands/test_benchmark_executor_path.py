"""The executor-path benchmark end to end in a tiny configuration: every case runs every
action through its whole path, and its numbers add up.

Never a timing threshold: speed is a ratio measured by `python -m benchmarks.executor_path`.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import peer
from benchmarks.executor_loop import CALLS, CALLS_SDK, CALLS_TWO
from benchmarks.executor_path import (
    CASES,
    Options,
    each_round,
    markdown,
    run,
    targets,
    to_json,
    verdicts,
)

ACTIONS = 12
CONNECTIONS = 2


def test_executor_path_benchmark_runs_every_case_on_both_tables(
    pg_server: str, tmp_path: Path
) -> None:
    options = Options(
        database_url=pg_server,
        actions=ACTIONS,
        connections=(CONNECTIONS,),
        history=50,
        rounds=2,
        work_dir=tmp_path,
    )
    report = run(options, echo=lambda *_a, **_k: None)

    node = peer.unavailable_reason() is None
    expected = {
        (c, t)
        for c in CASES
        for t in ("empty", "history")
        if node or c in {"sql", "sql2", "python", "bare", "bare2"}
    }
    # graphile-worker keeps no history (it deletes finished jobs): measured once.
    expected -= {("graphile", "empty")}
    assert {(r.case, r.tables) for r in report.results} == expected
    for r in report.results:
        assert r.actions == ACTIONS and r.connections == CONNECTIONS, r.case
        assert r.seconds > 0 and r.per_second > 0
        assert r.wal_bytes is not None and r.wal_bytes > 0, r.case  # every path writes durably
        if r.case == "graphile":
            assert set(r.latency_ms) == {"add_job"}
        elif r.case in ("sql", "bare"):
            assert set(r.latency_ms) == set(CALLS)
        elif r.case in ("sql2", "bare2"):
            assert set(r.latency_ms) == set(CALLS_TWO)
        else:  # an SDK: lease and start happen inside its run, the completion in the body's
            assert set(r.latency_ms) == set(CALLS_SDK)
        for p50, p99 in r.latency_ms.values():
            assert 0 < p50 <= p99
        if r.statements is not None:
            # Nine round trips at least: five calls, and BEGIN, the mutation, the receipt
            # and COMMIT (in two transactions, two BEGINs and two COMMITs around the same
            # calls); graphile-worker: the add, the fetch and the completion.
            assert r.statements >= (3 if r.case == "graphile" else 9), r.case
    if not node:
        assert any("Node SDK" in n for n in report.notes)
    # Two rounds of each case at each table kind; each reported figure is their median.
    assert [len(measured) for measured in report.rounds] == [
        2 * len([k for k in expected if k[1] == t]) for t in ("empty", "history")
    ]
    rounds = each_round(report)
    assert len(rounds) == 2
    for r in report.results:
        mine = [m for ms in report.rounds for m in ms if (m.case, m.tables) == (r.case, r.tables)]
        assert len(mine) == 2
        assert r.seconds == (mine[0].seconds + mine[1].seconds) / 2
        # Round k of the report is each case's k-th run, as it ran.
        assert [k.get(r.case, r.tables, r.connections) for k in rounds] == mine

    # Per connection count: four for each SQL path, one for each SDK; and each path's barrier.
    assert len(targets(report)) == (2 * 4 + 2) * 1 + 2
    # Each target is read again within each round: the same bound, that round's figure.
    read = verdicts(report)
    assert [v.target for v in read] == targets(report)
    for i, v in enumerate(read):
        assert v.rounds == tuple(targets(k)[i] for k in rounds)
        assert v.met_in_rounds == sum(1 for t in v.rounds if t.met)
    text = markdown(report)
    assert "**history tables, 2 connections**" in text and "| bare |" in text
    rows = text.splitlines()
    for v in read:
        met = "not measured |" if v.target.met is None else f"({v.met_in_rounds} of 2) |"
        assert any(r.startswith(f"| {v.target.name} |") and r.endswith(met) for r in rows), v
    doc = json.loads(json.dumps(to_json(report)))
    assert doc["results"]
    assert [t["rounds"] for t in doc["targets"]] == [[r.value for r in v.rounds] for v in read]
