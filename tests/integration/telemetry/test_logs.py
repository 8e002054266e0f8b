"""The `resolver run` process logs one JSON object per line, with ids, findings, outcomes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tests.helpers.cli import RESOLVER
from tests.helpers.database import SQL, World
from tests.helpers.telemetry import crashed_ago

SECRET = "s3cret-pw"  # trust auth ignores it; no log line may carry it


def run_once(database_url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "providers.yaml"
    config.write_text("action_types:\n  shell.exec: {provider: manual_only}\n")
    parts = urlsplit(database_url)
    url = urlunsplit(
        (parts.scheme, f"{parts.username}:{SECRET}@{parts.hostname}:{parts.port}", *parts[2:])
    )
    env = {
        **os.environ,
        "RESOLVER_DATABASE_URL": url,
        "RESOLVER_REPLICA_ID": "replica-logs",
        "RESOLVER_CONFIG": str(config),
    }
    return subprocess.run(
        [*RESOLVER, "run", "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_cycle_logs_json_lines_with_replica_dispatch_finding_and_outcome(
    world: World, sql: SQL, database_url: str, tmp_path: Path
) -> None:
    shell = crashed_ago(world, sql, 60, action_type="shell.exec")
    unmapped = crashed_ago(world, sql, 60, action_type="unmapped.type")
    proc = run_once(database_url, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stderr.splitlines()]  # every line is JSON
    assert lines, "the run logged nothing"
    for line in lines:
        assert line["replica_id"] == "replica-logs", line
        assert {"event", "level", "timestamp"} <= set(line)
    outcomes: dict[str, dict[str, Any]] = {
        line["dispatch_id"]: line for line in lines if line["event"] == "recovery_outcome"
    }
    assert set(outcomes) == {shell[0].dispatch_id, unmapped[0].dispatch_id}
    for line in outcomes.values():
        assert (line["finding"], line["outcome"], line["committed"]) == (
            "unsupported",
            "manual",
            True,
        )
    assert outcomes[shell[0].dispatch_id]["action_type"] == "shell.exec"
    assert SECRET not in proc.stderr + proc.stdout
    assert not any("receipt" in key for line in lines for key in line)
