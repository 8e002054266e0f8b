"""Retention's pure parts: durations, options, the export line and file naming."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resolver.retention import pruning as retention


@pytest.mark.parametrize(
    ("text", "ms"),
    [("30d", 30 * 86_400_000), ("1d12h", 129_600_000), ("2w", 1_209_600_000), ("90m", 5_400_000),
     ("45s", 45_000), (" 12H ", 43_200_000)],
)  # fmt: skip
def test_durations_parse(text: str, ms: int) -> None:
    assert retention.parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "30", "d", "30 days", "1.5d", "-1d", "0d", "0s0m", "1d-2h"])
def test_bad_durations_are_refused_with_a_typed_error(text: str) -> None:
    with pytest.raises(retention.InvalidDuration):
        retention.parse_duration_ms(text)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"include_audit": True}, "needs --export"),
        ({"batch": 0}, "batch"),
        ({"batch": 10_001}, "batch"),
        ({"older_than_ms": 0}, "positive"),
        ({"duty_cycle": 0.0}, "duty cycle"),
        ({"duty_cycle": 1.5}, "duty cycle"),
    ],
)
def test_options_refuse_what_could_lose_audit_facts_or_never_end(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        retention.PruneOptions(**{"older_than_ms": 1, **fields})  # type: ignore[arg-type]


def test_export_line_is_canonical_json_and_one_line() -> None:
    line = retention.export_line({"b": 1, "a": {"z": "é\n", "y": None}})
    assert line == '{"a":{"y":null,"z":"é\\n"},"b":1}\n'.encode()
    assert line.count(b"\n") == 1 and json.loads(line) == {"a": {"y": None, "z": "é\n"}, "b": 1}


def test_an_export_never_overwrites_and_a_directory_gets_a_new_file(tmp_path: Path) -> None:
    named = retention.export_path(str(tmp_path), now=lambda: 1_764_561_600.0)
    assert named == str(tmp_path / "resolver-prune-20251201T040000Z.jsonl")
    with retention.open_export(named) as stream:
        stream.write(b"x\n")
    with pytest.raises(retention.ExportFailed, match="never overwritten"):
        retention.open_export(named)
    assert Path(named).read_bytes() == b"x\n"
    assert (Path(named).stat().st_mode & 0o777) == 0o600
    with pytest.raises(retention.ExportFailed, match="cannot create"):
        retention.open_export(str(tmp_path / "missing" / "x.jsonl"))
