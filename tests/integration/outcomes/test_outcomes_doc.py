"""The Python example of docs/outcomes.md, run as written against real PostgreSQL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg

from resolver.core.domain import Completion, Outcome
from resolver.executor.client import ExecutionClient
from resolver.outcomes import OutcomeFeed
from tests.helpers.database import new_spec
from tests.helpers.stores import Storage
from tests.helpers.telemetry import wait_for

DOC = Path(__file__).resolve().parents[3] / "docs" / "outcomes.md"


def test_the_python_example_runs_as_written(store: Storage, database_url: str) -> None:
    (example,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    client = ExecutionClient(store, owner="doc")
    spec = client.create_dispatch(new_spec())
    lease = client.start(client.lease(spec.dispatch_id))
    client.complete(lease, Completion(Outcome.SUCCEEDED, "applied", "m-doc"))
    # The record past the horizon first (the cluster's: the fixture copies the next test
    # database in the background), so the example's one read finds it.
    with OutcomeFeed(database_url) as feed:
        wait_for("the record readable", lambda: feed.read() or None, timeout_seconds=60)
    env = os.environ | {"DATABASE_URL": database_url, "DISPATCH_ID": spec.dispatch_id}
    done = subprocess.run(
        [sys.executable, "-c", example], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "succeeded executor applied"
    assert lines[1] == f"approved-action-resolver.outcome.settled {spec.dispatch_id}"
    cursor = lines[2].removeprefix("handled ")
    assert lines[3] == f"billing is at {cursor}"


def test_the_sql_examples_run_as_written(database_url: str) -> None:
    blocks = re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 3
    follow, listen, switch = blocks
    with psycopg.connect(database_url, autocommit=True) as conn:
        for statement in filter(None, (s.strip() for s in follow.split(";"))):
            conn.execute(statement)  # type: ignore[call-overload]
        for statement in filter(None, (s.strip() for s in listen.split(";"))):
            conn.execute(statement)  # type: ignore[call-overload]
        assert conn.execute(
            "SELECT pid FROM recovery_outcome_listeners WHERE listening_until_ms > resolver_now_ms(NULL)"
        ).fetchall() == [(conn.info.backend_pid,)]
        assert conn.execute("SELECT resolver_outcome_consumer_cursor('billing')").fetchone() == (
            "912:17",
        )
        # The database the doc names is this one here.
        (name,) = conn.execute("SELECT current_database()").fetchone()  # type: ignore[misc]
        conn.execute(switch.replace("ALTER DATABASE resolver", f'ALTER DATABASE "{name}"'))  # type: ignore[call-overload]
    with psycopg.connect(database_url) as later:
        assert later.execute("SHOW resolver.outcomes_notify").fetchone() == ("off",)
