"""The object-storage examples of the docs, as written: the publishing examples of
docs/executor-sdk.md run against real PostgreSQL and moto's S3 server, the policies are the
ones the test server enforces, and the provider's YAML builds a provider."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from providers.object_receipt import ObjectReceiptProvider
from resolver.core.provider import build_registry
from resolver.executor.client import ExecutionClient
from tests.helpers.database import SQL, new_spec
from tests.helpers.s3 import (
    BUCKET,
    PREFIX,
    S3Server,
    reader_policy,
    running_s3_server,
    writer_policy,
)
from tests.helpers.stores import Storage
from tests.protocol.conftest import ROOT

SDK_DOC = ROOT / "docs" / "executor-sdk.md"
PROVIDERS_DOC = ROOT / "docs" / "providers.md"
KEY = ("doc-obj-k1", "e1" * 32)


def blocks(doc: Path, fence: str) -> list[str]:
    return re.findall(rf"```{fence}\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running_s3_server() as server:
        yield server


def dispatch(store: Storage, dispatch_id: str) -> None:
    spec = new_spec("artifact.push", dispatch_id=dispatch_id)
    ExecutionClient(store, owner="platform").create_dispatch(spec)


def run(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RESOLVER_", "AWS_"))}
    done = subprocess.run(
        args, cwd=cwd, env=base | env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def example_env(s3: S3Server, database_url: str, dispatch_id: str) -> dict[str, str]:
    return {
        "DATABASE_URL": database_url,
        "DISPATCH_ID": dispatch_id,
        "S3_ENDPOINT": s3.proxy_url,
        "AWS_REGION": "us-east-1",
        **s3.writer.env(),
    }


def test_the_python_publishing_example_runs(
    s3: S3Server, store: Storage, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    (code,) = blocks(SDK_DOC, "python publish")
    dispatch(store, "doc-obj-py")
    script = tmp_path / "publish.py"
    script.write_text(code)
    env = example_env(s3, database_url, "doc-obj-py")
    env |= {"RESOLVER_RECEIPT_KEYS": f"{KEY[0]}={KEY[1]}", "RESOLVER_RECEIPT_SIGNING_KID": KEY[0]}
    out = run([sys.executable, str(script)], tmp_path, env)
    assert out.startswith(f"{PREFIX}proj-1/doc-obj-py.receipt.json RunResult(")
    assert sql.execution("doc-obj-py")["state"] == "succeeded"


def test_the_node_publishing_example_runs(
    s3: S3Server, node_sdk: Path, store: Storage, database_url: str, sql: SQL
) -> None:
    (code,) = blocks(SDK_DOC, "js publish")
    dispatch(store, "doc-obj-js")
    (node_sdk / "doc-publish.mjs").write_text(code)
    env = example_env(s3, database_url, "doc-obj-js") | {"RECEIPT_KEY": f"{KEY[0]}={KEY[1]}"}
    result = json.loads(run(["node", "doc-publish.mjs"], node_sdk, env))
    assert (result["result"], result["state"]) == ("committed", "succeeded")
    assert sql.execution("doc-obj-js")["evidence_digest"] == result["evidenceDigest"]


def test_the_documented_policies_are_the_ones_the_tests_enforce() -> None:
    (reader,) = blocks(PROVIDERS_DOC, "json")
    (writer,) = blocks(SDK_DOC, "json")
    assert json.loads(reader) == reader_policy(BUCKET, PREFIX)
    assert json.loads(writer) == writer_policy(BUCKET, PREFIX)


def test_the_documented_configuration_builds_the_provider(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESOLVER_RECEIPT_KEYS", f"{KEY[0]}={KEY[1]}")
    # AWS itself is this server (its default endpoint), as the reader; the profiles the
    # per-action-type example names exist, each a role reading its own prefix.
    roles = {
        "artifact-reader": reader_policy(BUCKET, "artifacts/"),
        "report-reader": reader_policy(BUCKET, "reports/"),
    }
    env = s3.reader.env() | s3.role_profiles(tmp_path, roles)
    env["AWS_ENDPOINT_URL_S3"] = s3.proxy_url
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    documents = [yaml.safe_load(b) for b in blocks(PROVIDERS_DOC, "yaml")]
    configured = [
        {t: c for t, c in d["action_types"].items() if c.get("provider") == "object_receipt"}
        for d in documents
        if isinstance(d, dict) and "action_types" in d
    ]
    found = [c for c in configured if c]
    assert len(found) == 3  # the overview, the full example, credentials per action type
    for action_types in found:
        registry = build_registry(action_types)
        try:
            for provider in registry.by_action_type.values():
                assert isinstance(provider, ObjectReceiptProvider)
        finally:
            registry.close()
