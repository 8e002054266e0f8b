"""The examples of docs/executor-sdk.md, run as written against real PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.database import SQL
from tests.protocol.conftest import ROOT

DOC = ROOT / "docs" / "executor-sdk.md"
KEY = ("doc-k1", "d0" * 32)


def block(language: str) -> str:
    (code,) = re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return code


@pytest.fixture
def accounts(sql: SQL) -> None:
    sql.all("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)")
    sql.all("INSERT INTO accounts VALUES (42, 100)")


def run_example(args: list[str], cwd: Path, database_url: str, **extra: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    env |= {"DATABASE_URL": database_url, "DISPATCH_ID": "doc-d-42", **extra}
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.usefixtures("accounts")
def test_the_python_example_runs(database_url: str, sql: SQL, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block("python"))
    out = run_example(
        [sys.executable, str(script)],
        tmp_path,
        database_url,
        RESOLVER_RECEIPT_KEYS=f"{KEY[0]}={KEY[1]}",
        RESOLVER_RECEIPT_SIGNING_KID=KEY[0],
    )
    assert "RunResult(dispatch_id='doc-d-42', completion=<CompletionResult.COMMITTED" in out
    assert sql.execution("doc-d-42")["state"] == "succeeded"
    assert sql.one("SELECT balance FROM accounts WHERE id = 42")["balance"] == 90


@pytest.mark.usefixtures("accounts")
def test_the_node_example_runs(node_sdk: Path, database_url: str, sql: SQL) -> None:
    # Beside the SDK's own package.json, `approved-action-executor` resolves to the SDK itself.
    (node_sdk / "doc-example.mjs").write_text(block("js"))
    out = run_example(
        ["node", "doc-example.mjs"], node_sdk, database_url, RECEIPT_KEY=f"{KEY[0]}={KEY[1]}"
    )
    result = json.loads(out)
    assert (result["dispatchId"], result["result"], result["state"]) == (
        "doc-d-42",
        "committed",
        "succeeded",
    )
    assert sql.execution("doc-d-42")["evidence_digest"] == result["evidenceDigest"]
    assert sql.one("SELECT balance FROM accounts WHERE id = 42")["balance"] == 90


def test_what_the_page_says_of_a_crashed_uncommitted_mutation_holds() -> None:
    # "never reaches the manual queue by itself": internal_mutation has no default window,
    # and the page's way to be alerted (a window, then ResolverEscalations) exists as named.
    import yaml

    from providers.internal_mutation import create
    from resolver.core.declarations import declaration_of
    from resolver.core.domain import FindingKind
    from resolver.core.escalation import CONFIG_KEY, escalation_policy

    text = DOC.read_text(encoding="utf-8")
    assert "never reaches the manual queue by itself" in text
    defaults = declaration_of(create).escalate_after_seconds
    assert defaults == {}
    assert escalation_policy(defaults, None).after_ms(FindingKind.MISSING) is None
    assert f"`{CONFIG_KEY}: {{missing: 3600}}`" in text
    assert escalation_policy(defaults, {"missing": 3600}).after_ms(FindingKind.MISSING) == 3_600_000
    alerts = yaml.safe_load((ROOT / "deploy" / "prometheus" / "resolver-alerts.yml").read_text())
    names = {rule.get("alert") for group in alerts["groups"] for rule in group["rules"]}
    for alert in ("ResolverEscalations", "ResolverManualQueueAgeing"):
        assert f"`{alert}`" in text and alert in names
