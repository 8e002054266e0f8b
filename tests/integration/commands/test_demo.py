"""`resolver demo` settles internal receipts automatically and queues the rest for a human."""

from __future__ import annotations

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
