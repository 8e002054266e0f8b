"""The Node.js executor example (examples/node/executor.mjs, on the SDK in sdk/node) run
against real PostgreSQL.

npm installs the SDK's tarball and `pg` into a cache directory; without node or a reachable
npm registry the test is skipped and says why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.helpers.cache import locked_cache_dir
from tests.helpers.database import SQL
from tests.protocol.conftest import npm_install

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "node"
KID = "node-k1"
SECRET = "3c" * 32


@pytest.fixture(scope="session")
def node_example(sdk_tarball: Path) -> Path:
    """The example beside its node_modules, with the SDK installed from its `npm pack`."""
    with locked_cache_dir("node-example") as workdir:
        package = json.loads((EXAMPLE / "package.json").read_text())
        # The example depends on the SDK by path in the repository; here on its packed tarball.
        package["dependencies"]["approved-action-executor"] = f"file:{sdk_tarball}"
        (workdir / "package.json").write_text(json.dumps(package, indent=2))
        npm_install(workdir)
        shutil.copy(EXAMPLE / "executor.mjs", workdir / "executor.mjs")
    return workdir


def test_node_executor_runs_the_protocol(node_example: Path, database_url: str, sql: SQL) -> None:
    dispatch_id = f"node-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,  # a URL: node-postgres parses URLs, not key=value
        "RECEIPT_KEY": f"{KID}={SECRET}",
    }
    done = subprocess.run(
        ["node", "executor.mjs", dispatch_id],
        cwd=node_example,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    steps = {line["step"]: line for line in map(json.loads, done.stdout.splitlines())}
    assert steps["create"]["created"] is True
    assert steps["start"]["state"] == "executing"
    assert (steps["complete"]["result"], steps["replay"]["result"]) == ("committed", "replayed")
    assert steps["drift"] == {"step": "drift", "refused": "FenceConflict", "sqlstate": "RS001"}
    execution = sql.execution(dispatch_id)
    assert (execution["state"], execution["evidence_digest"]) == (
        "succeeded",
        steps["receipt"]["evidence_digest"],
    )
    assert sql.control(dispatch_id)["closed_by"] == "completion"


def test_node_receipt_verifies_with_the_resolvers_provider(
    node_example: Path, database_url: str, sql: SQL
) -> None:
    """The receipt the Node example signs is accepted by the internal_mutation provider."""
    from providers.internal_mutation import InternalMutationProvider
    from resolver.core.domain import DispatchIdentity, FindingKind
    from resolver.db.evidence import ReadOnlyDatabase
    from resolver.evidence.receipts import KeyRing

    dispatch_id = f"node-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DATABASE_URL": database_url, "RECEIPT_KEY": f"{KID}={SECRET}"}
    subprocess.run(
        ["node", "executor.mjs", dispatch_id],
        cwd=node_example,
        env=env,
        timeout=120,
        check=True,
        capture_output=True,
    )
    row = sql.one(
        "SELECT d.*, e.attempt, e.started_at_ms FROM approved_action_dispatches AS d"
        " JOIN approved_action_executions AS e USING (dispatch_id) WHERE dispatch_id = %s",
        dispatch_id,
    )
    identity = DispatchIdentity(
        schema_version=row["schema_version"],
        dispatch_id=dispatch_id,
        approval_request_id=row["approval_request_id"],
        project_id=row["project_id"],
        action_type=row["action_type"],
        action_digest=row["action_digest"],
        attempt=row["attempt"],
        started_at_ms=row["started_at_ms"],
        idempotency_key=row["idempotency_key"],
    )
    database = ReadOnlyDatabase(database_url, timeout_seconds=5)
    database.open()
    try:
        provider = InternalMutationProvider(
            database, KeyRing({KID: bytes.fromhex(SECRET)}), timeout_seconds=5
        )
        finding = provider.inspect_page([identity])[dispatch_id]
    finally:
        database.close()
    assert finding.kind is FindingKind.VERIFIED_SUCCEEDED
    assert finding.evidence_digest == sql.execution(dispatch_id)["evidence_digest"]
