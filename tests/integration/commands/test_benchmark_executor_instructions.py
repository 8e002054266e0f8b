"""The instruction-count benchmark end to end in a tiny configuration: a private server under
callgrind, two sessions per case and round, the difference per action.

Never a timing threshold: what is asserted is what the tool claims of its counts (they repeat
from round to round, and tell the protocol's work from the bare statements').
"""

from __future__ import annotations

import shutil

import pytest

from benchmarks.executor_instructions import Options, markdown, run

pytestmark = pytest.mark.skipif(
    shutil.which("valgrind") is None, reason="valgrind is not installed (Debian's `valgrind`)"
)


def test_instruction_counts_repeat_and_tell_the_protocol_from_the_bare_statements() -> None:
    counts = run(Options(actions=12, rounds=2, cases=("sql", "bare"), warmup=12))

    assert set(counts) == {"sql", "bare"}
    for case in counts.values():
        assert len(case.per_action) == 2 and all(v > 0 for v in case.per_action)
        # The same work counted twice: the rounds differ only by the tables' growth.
        low, high = sorted(case.per_action)
        assert high / low < 1.1, case
    # The protocol's functions, checks and triggers run on top of the bare statements' work.
    assert counts["sql"].median > 1.3 * counts["bare"].median
    assert "| sql |" in markdown(counts)
