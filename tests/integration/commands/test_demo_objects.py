"""`resolver demo --object-store URL` settles one action type from receipt objects in a real
S3-compatible server (moto's, on loopback, signatures checked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.database import SQL
from tests.helpers.s3 import BUCKET, running_s3_server


def test_demo_settles_an_action_type_from_object_storage(
    database_url: str, sql: SQL, tmp_path: Path
) -> None:
    with running_s3_server() as s3:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RESOLVER_", "AWS_"))}
        # The demo publishes (as the executor) and reads (as the resolver) with one identity.
        env |= s3.admin.env() | {"RESOLVER_DATABASE_URL": database_url}
        done = subprocess.run(
            [
                *(sys.executable, "-m", "resolver", "demo", "--count", "2"),
                *("--object-store", s3.proxy_url, "--object-bucket", BUCKET),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert s3.recorder.count("PUT") == 2  # one conditional PUT per receipt, nothing else
    assert f"receipt objects go to {s3.proxy_url}, bucket {BUCKET}" in done.stdout
    states = {
        (r["state"], r["status"]): r["n"]
        for r in sql.all(
            "SELECT e.state, c.status, count(*) AS n"
            " FROM approved_action_dispatches d JOIN approved_action_executions e USING (dispatch_id)"
            " JOIN approved_action_recovery_controls c USING (dispatch_id)"
            " WHERE d.action_type = 'demo.object' GROUP BY 1, 2"
        )
    }
    assert states == {("succeeded", "resolved"): 1, ("failed", "resolved"): 1}
    assert done.stdout.count("demo.object (receipt object") == 2
    assert "-> succeeded (automatic resolution)" in done.stdout
