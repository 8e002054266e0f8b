"""Release 0.2.0's Node.js SDK on this release's schema: its own executor and receipt tests,
as that release shipped them, against a database this release migrated, with this release's
replicas settling their crashes. Executors of the previous release keep running through a
rolling upgrade until they are redeployed, and a `helm rollback` leaves the schema where it is.

Its outcome-feed tests stay out: one of them leaves its follower's fallback read at an hour and
waits for a NOTIFY, which this release sends only while a listener is registered (the
CHANGELOG's Upgrading section: an unregistered LISTEN is woken by its fallback read only).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.releases import RELEASE_0_2_0_COMMIT, release_files

TEST_FILES = ("test/vectors.test.mjs", "test/executor.test.mjs")


def test_the_previous_release_s_executor_suite_passes_on_this_schema(
    node_sdk: Path, database_url: str, tmp_path: Path
) -> None:
    release = release_files(
        RELEASE_0_2_0_COMMIT,
        ["sdk/node", "docs/receipts.md", "docs/receipt-v1-vectors.json"],
        tmp_path,
    )
    sdk = release / "sdk" / "node"
    (sdk / "node_modules").symlink_to(node_sdk / "node_modules", target_is_directory=True)
    assert '"version": "0.2.0"' in (sdk / "package.json").read_text(encoding="utf-8")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(Path.home()),
        "DATABASE_URL": database_url,
        # Its crash tests settle with `resolver run`: this release's replica.
        "RESOLVER_PYTHON": sys.executable,
        "RECEIPT_VECTORS": str(release / "docs" / "receipt-v1-vectors.json"),
        "RECEIPTS_SPEC": str(release / "docs" / "receipts.md"),
    }
    done = subprocess.run(
        ["node", "--test", *TEST_FILES],
        cwd=sdk,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    summary = dict(re.findall(r"^# (tests|pass|fail|skipped|cancelled) (\d+)$", done.stdout, re.M))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert (summary["fail"], summary["skipped"], summary["cancelled"]) == ("0", "0", "0"), summary
    assert int(summary["pass"]) == int(summary["tests"]) >= 40, summary
