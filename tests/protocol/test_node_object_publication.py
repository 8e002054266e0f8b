"""The Node.js SDK's receipt publication to object storage (sdk/node/test/object.test.mjs):
against a fresh migrated database, moto's S3 server on loopback (signatures and IAM policies
checked) and a real `resolver run` reading through `object_receipt`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.s3 import BUCKET, running_s3_server


def test_the_node_sdk_publishes_receipts_fenced_by_its_lease(
    node_sdk: Path, database_url: str
) -> None:
    with running_s3_server() as s3:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(Path.home()),
            "DATABASE_URL": database_url,
            "RESOLVER_PYTHON": sys.executable,
            "S3_ENDPOINT": f"http://127.0.0.1:{s3.upstream_port}",
            "S3_BUCKET": BUCKET,
            "S3_WRITER": f"{s3.writer.access_key}:{s3.writer.secret_key}",
            "S3_READER": f"{s3.reader.access_key}:{s3.reader.secret_key}",
        }
        done = subprocess.run(
            ["node", "--test", "test/object.test.mjs"],
            cwd=node_sdk,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    summary = dict(re.findall(r"^# (tests|pass|fail|skipped|cancelled) (\d+)$", done.stdout, re.M))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert (summary["fail"], summary["skipped"], summary["cancelled"]) == ("0", "0", "0"), summary
    assert int(summary["pass"]) == int(summary["tests"]) >= 10, summary
