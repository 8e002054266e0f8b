"""The benchmark's py-spy summary: each frame's share of the samples it appears in."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.profile import summarise


def test_summary_counts_each_frame_once_per_sample_by_function(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text(
        "\n".join(
            [
                # A recursive frame counts once per stack, and line numbers fold into the function.
                "loop (resolver/replica.py:10);cycle (resolver/reconciler.py:20);"
                "cycle (resolver/reconciler.py:25);commit (resolver/db/repository.py:30) 6",
                "loop (resolver/replica.py:10);cycle (resolver/reconciler.py:20);"
                "verify (resolver/receipts.py:40) 3",
                "loop (resolver/replica.py:11) 1",
                "",
                "not a stack line",
            ]
        ),
        encoding="utf-8",
    )
    shares = dict((frame, share) for share, frame in summarise(raw, top=10))
    assert shares["loop (replica.py)"] == pytest.approx(1.0)
    assert shares["cycle (reconciler.py)"] == pytest.approx(0.9)
    assert shares["commit (repository.py)"] == pytest.approx(0.6)
    assert shares["verify (receipts.py)"] == pytest.approx(0.3)
    assert [frame for _, frame in summarise(raw, top=2)] == [
        "loop (replica.py)",
        "cycle (reconciler.py)",
    ]


def test_an_empty_recording_summarises_to_nothing(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text("", encoding="utf-8")
    assert summarise(raw, top=5) == []
