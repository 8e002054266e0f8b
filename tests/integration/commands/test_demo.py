"""`resolver demo` settles internal receipts automatically and queues the rest for a human."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from resolver.app.composition import demo_replica
from resolver.demo import simple as demo
from tests.helpers.database import SQL


def test_demo_resolves_receipts_and_queues_the_rest(
    database_url: str, sql: SQL, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESOLVER_DATABASE_URL", database_url)
    lines: list[str] = []
    demo.run(count=4, data_dir=tmp_path, echo=lines.append, build_replica=demo_replica)
    text = "\n".join(lines)
    assert "ephemeral HMAC key" in text
    states = {
        (r["action_type"], r["state"], r["status"]): r["n"]
        for r in sql.all(
            "SELECT d.action_type, e.state, c.status, count(*) AS n"
            " FROM approved_action_dispatches d JOIN approved_action_executions e USING (dispatch_id)"
            " JOIN approved_action_recovery_controls c USING (dispatch_id)"
            " GROUP BY 1, 2, 3"
        )
    }
    assert states == {
        ("demo.internal", "succeeded", "resolved"): 2,
        ("demo.internal", "failed", "resolved"): 2,
        ("demo.internal", "executing", "armed"): 1,  # crashed before its mutation: missing
        ("demo.internal", "executing", "manual"): 1,  # forged receipt: conflict
        ("demo.shell", "executing", "manual"): 4,
        ("demo.unmapped", "executing", "manual"): 4,
    }


@pytest.mark.parametrize("verbose", [False, True])
def test_the_demo_prints_its_warnings_and_with_verbose_every_line(
    database_url: str, verbose: bool
) -> None:
    """docs/demo.md: beside its summary the demo prints the resolver's warnings as JSON lines
    (the forged receipt's `receipt_rejected`); `--verbose` prints every line the replica logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    done = subprocess.run(
        [sys.executable, "-m", "resolver", "demo", "--count", "4"]
        + (["--verbose"] if verbose else []),
        env=env | {"RESOLVER_DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    records = [
        json.loads(line)
        for line in (done.stdout + done.stderr).splitlines()
        if line.startswith("{")
    ]
    levels = {record["level"] for record in records}
    assert "receipt_rejected" in {r["event"] for r in records if r["level"] == "warning"}
    assert ("info" in levels) is verbose, sorted(levels)
    assert "open controls by queue" in done.stdout
