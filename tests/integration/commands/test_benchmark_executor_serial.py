"""The serial executor benchmark end to end in a tiny configuration: one session per case, the
backend's CPU read for every round, and each function's and trigger's own time.

Never a timing threshold: speed is a figure measured by `python -m benchmarks.executor_serial`.
"""

from __future__ import annotations

from benchmarks.executor_serial import Options, markdown, run


def test_serial_benchmark_reads_each_case_and_the_protocol_functions(pg_server: str) -> None:
    options = Options(database_url=pg_server, actions=20, rounds=2, cases=("sql", "bare"))
    figures = run(options)

    assert set(figures) == {"sql", "bare"}
    for case in figures.values():
        assert len(case.backend_us) == 2 and all(v > 0 for v in case.backend_us)
    # Every action of the last round called each protocol function once (the warm-up's calls
    # are not counted); the bare baseline calls none of them.
    calls = {name: n for name, n, _own, _total in figures["sql"].functions}
    assert calls["resolver_execution_start"] == 1.0
    assert calls["resolver_execution_complete"] == 1.0
    assert not any(name.startswith("resolver_execution") for name, *_ in figures["bare"].functions)
    assert "| sql |" in markdown(figures)
