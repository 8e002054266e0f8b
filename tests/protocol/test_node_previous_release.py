"""Release 0.3.0's Node.js SDK on this release's schema: its own executor, receipt and
outcome-feed tests, as that release shipped them, against a database this release migrated,
with this release's replicas settling their crashes. Executors and outcome followers of the
previous release keep running through a rolling upgrade until they are redeployed, and a
`helm rollback` leaves the schema where it is.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.releases import RELEASE_0_3_0_COMMIT, release_files
from tests.protocol.conftest import passes_node_suite

TEST_FILES = ("test/vectors.test.mjs", "test/executor.test.mjs", "test/outcomes.test.mjs")


def test_the_previous_release_s_executor_suite_passes_on_this_schema(
    node_sdk: Path, database_url: str, tmp_path: Path
) -> None:
    release = release_files(
        RELEASE_0_3_0_COMMIT,
        ["sdk/node", "docs/receipts.md", "docs/receipt-v1-vectors.json"],
        tmp_path,
    )
    sdk = release / "sdk" / "node"
    (sdk / "node_modules").symlink_to(node_sdk / "node_modules", target_is_directory=True)
    assert '"version": "0.3.0"' in (sdk / "package.json").read_text(encoding="utf-8")
    env = {
        "RECEIPT_VECTORS": str(release / "docs" / "receipt-v1-vectors.json"),
        "RECEIPTS_SPEC": str(release / "docs" / "receipts.md"),
    }
    # Its crash tests settle with `resolver run`: this release's replica.
    passes_node_suite(sdk, TEST_FILES, database_url, env, at_least=60)
