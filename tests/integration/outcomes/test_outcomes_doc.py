"""The Python example of docs/outcomes.md, run as written against real PostgreSQL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from resolver.core.domain import Completion, Outcome
from resolver.executor.client import ExecutionClient
from tests.helpers.database import new_spec
from tests.helpers.stores import Storage

DOC = Path(__file__).resolve().parents[3] / "docs" / "outcomes.md"


def test_the_python_example_runs_as_written(store: Storage, database_url: str) -> None:
    (example,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    client = ExecutionClient(store, owner="doc")
    spec = client.create_dispatch(new_spec())
    lease = client.start(client.lease(spec.dispatch_id))
    client.complete(lease, Completion(Outcome.SUCCEEDED, "applied", "m-doc"))
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
