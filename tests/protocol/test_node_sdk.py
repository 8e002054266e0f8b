"""The Node.js executor SDK (sdk/node): its own `node --test` suite, run against a fresh
migrated database and a real `resolver run`, and `npm pack` producing an installable package.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from tests.helpers.cache import locked_cache_dir
from tests.protocol.conftest import ROOT, SDK, npm_install, passes_node_suite

VECTORS = ROOT / "docs" / "receipt-v1-vectors.json"
TEST_FILES = ("test/vectors.test.mjs", "test/executor.test.mjs", "test/outcomes.test.mjs")


def test_the_node_sdk_suite_passes_against_postgresql(node_sdk: Path, database_url: str) -> None:
    env = {"RECEIPT_VECTORS": str(VECTORS), "RECEIPTS_SPEC": str(ROOT / "docs" / "receipts.md")}
    passes_node_suite(node_sdk, TEST_FILES, database_url, env, at_least=20)


def test_npm_pack_makes_an_installable_package(sdk_tarball: Path, tmp_path: Path) -> None:
    with tarfile.open(sdk_tarball) as tar:
        names = set(tar.getnames())
    assert names == {
        "package/package.json",
        "package/index.js",
        "package/index.d.ts",
        "package/README.md",
    }
    consumer = tmp_path / "consumer"
    consumer.mkdir()
    (consumer / "package.json").write_text(json.dumps({"name": "consumer", "type": "module"}))
    npm_install(consumer, str(sdk_tarball))
    script = (
        "import * as sdk from 'approved-action-executor';"
        "console.log(JSON.stringify(Object.keys(sdk).sort()));"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        cwd=consumer,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    exported = set(json.loads(done.stdout))
    assert {"Executor", "signReceipt", "canonicalJson", "FenceConflict", "LeaseLost"} <= exported
    declared = (consumer / "node_modules" / "approved-action-executor" / "index.d.ts").read_text()
    missing = [
        name for name in exported if not re.search(rf"\b(class|function|const) {name}\b", declared)
    ]
    assert missing == [], "exported without a type declaration"


def test_the_packed_types_describe_a_usable_api(sdk_tarball: Path) -> None:
    """`tsc --strict` type-checks test/usage.ts against the tarball's index.d.ts."""
    with locked_cache_dir("node-sdk-types") as workdir:
        package = {
            "name": "types-check",
            "private": True,
            "type": "module",
            "dependencies": {
                "approved-action-executor": f"file:{sdk_tarball}",
                "pg": "^8.11.0",
                "@types/pg": "^8.11.0",
                "typescript": "^5.4.0",
            },
        }
        (workdir / "package.json").write_text(json.dumps(package, indent=2))
        npm_install(workdir)
        shutil.copy(SDK / "test" / "usage.ts", workdir / "usage.ts")
        done = subprocess.run(
            [
                "node",
                "node_modules/typescript/bin/tsc",
                "--noEmit",
                "--strict",
                "--module",
                "nodenext",
                "--moduleResolution",
                "nodenext",
                "--target",
                "es2022",
                "usage.ts",
            ],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
