"""Find after retention, over real HTTP and real PostgreSQL: a dispatch `resolver prune` took
is still found by its dispatch id, idempotency key and approval id, and says when, by which
run and under which export digest it was pruned."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.app.cli import main
from resolver.core.domain import Completion, FindingKind, Outcome
from resolver.executor import ExecutionClient
from tests.helpers.api import auth
from tests.helpers.database import EXEC_LEASE_MS, SQL, new_spec
from tests.helpers.oidc import token
from tests.helpers.providers import ScriptedProvider, fixed, reconciler
from tests.helpers.stores import Storage

DAY_MS = 86_400_000


def find(api: httpx.Client, key: rsa.RSAPrivateKey, q: str, user: str = "alice") -> list[dict]:
    answer = api.get("/v1/find", params={"q": q}, headers=auth(token(key, sub=user)))
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


@pytest.fixture
def old_settled(store: Storage, sql: SQL) -> dict[str, str]:
    """Two dispatches settled 40 days ago: one by its executor, one automatically."""
    now = int(sql.one("SELECT resolver_now_ms(NULL) AS ms")["ms"])
    old = now - 40 * DAY_MS
    executor = ExecutionClient(store, owner="exec", lease_seconds=EXEC_LEASE_MS / 1000)
    completed = executor.create_dispatch(new_spec())
    lease = executor.at(old).start(executor.at(old).lease(completed.dispatch_id))
    executor.at(old + 100).complete(lease, Completion(Outcome.SUCCEEDED, "done", "m-done"))
    crashed = executor.create_dispatch(new_spec())
    executor.at(old).start(executor.at(old).lease(crashed.dispatch_id))
    reconciler(store, ScriptedProvider(fixed(FindingKind.VERIFIED_SUCCEEDED))).at(
        old + EXEC_LEASE_MS
    ).run_cycle()
    return {"completion": completed.dispatch_id, "automatic": crashed.dispatch_id}


def prune_cli(database_url: str, monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    monkeypatch.setenv("RESOLVER_DATABASE_URL", database_url)
    result = CliRunner().invoke(main, ["prune", "--older-than", "30d", "--duty-cycle", "1", *args])
    assert result.exit_code == 0, result.output


def test_a_pruned_dispatch_is_found_by_each_key_with_its_run_and_export(
    api: httpx.Client,
    signing_key: rsa.RSAPrivateKey,
    old_settled: dict[str, str],
    sql: SQL,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    before = {
        name: sql.one("SELECT * FROM approved_action_dispatches WHERE dispatch_id = %s", i)
        for name, i in old_settled.items()
    }
    # A plain prune: the executor-settled dispatch goes whole, the automatic one keeps its
    # identity and resolution (audit facts) and loses its execution.
    prune_cli(database_url, monkeypatch)
    first_run = sql.one("SELECT run_id, export_digest FROM recovery_prune_runs ORDER BY run_id")
    assert first_run["export_digest"] is None
    gone = before["completion"]
    assert not sql.all(
        "SELECT 1 FROM approved_action_dispatches WHERE dispatch_id = %s", gone["dispatch_id"]
    )
    keys = {
        "dispatch_id": gone["dispatch_id"],
        "idempotency_key": gone["idempotency_key"],
        "approval_request_id": gone["approval_request_id"],
    }
    for matched_by, q in keys.items():
        (item,) = find(api, signing_key, q)
        assert item["dispatch_id"] == gone["dispatch_id"], q
        assert item["matched_by"] == matched_by
        assert (item["project_id"], item["action_type"]) == ("proj-1", gone["action_type"])
        assert (item["state"], item["closed_by"], item["control_status"]) == (
            "succeeded",
            "completion",
            None,
        )
        assert item["pruned"]["run_id"] == first_run["run_id"]
        assert item["pruned"]["export_digest"] is None
    # The record keeps the idempotency key's sha256, not the key.
    stored = sql.one(
        "SELECT * FROM recovery_pruned_dispatches WHERE dispatch_id = %s", gone["dispatch_id"]
    )
    assert (
        stored["idempotency_key_sha256"]
        == hashlib.sha256(gone["idempotency_key"].encode()).hexdigest()
    )
    assert gone["idempotency_key"] not in str(stored)
    # Its identity kept: found as itself, its execution pruned by the same run.
    (kept,) = find(api, signing_key, before["automatic"]["idempotency_key"])
    assert (kept["state"], kept["closed_by"], kept["pruned"]["run_id"]) == (
        "succeeded",
        "automatic",
        first_run["run_id"],
    )

    # With the audit facts, under an export: the automatic one goes whole, and says where.
    export = tmp_path / "audit.jsonl"
    prune_cli(database_url, monkeypatch, "--include-audit", "--export", str(export))
    second_run = sql.one(
        "SELECT run_id, export_digest FROM recovery_prune_runs ORDER BY run_id DESC LIMIT 1"
    )
    assert second_run["export_digest"] == hashlib.sha256(export.read_bytes()).hexdigest()
    auto = before["automatic"]
    for q in (auto["dispatch_id"], auto["idempotency_key"], auto["approval_request_id"]):
        (item,) = find(api, signing_key, q)
        assert item["dispatch_id"] == auto["dispatch_id"]
        assert (item["state"], item["closed_by"]) == ("succeeded", "automatic")
        assert item["pruned"]["run_id"] == second_run["run_id"]
        assert item["pruned"]["export_digest"] == second_run["export_digest"]

    # Project scope holds for the records too: bob reads no project.
    assert find(api, signing_key, gone["dispatch_id"], user="bob") == []


def test_a_pruned_record_goes_one_retention_period_after_its_prune(
    api: httpx.Client,
    signing_key: rsa.RSAPrivateKey,
    old_settled: dict[str, str],
    sql: SQL,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prune_cli(database_url, monkeypatch)
    gone = old_settled["completion"]
    assert [i["dispatch_id"] for i in find(api, signing_key, gone)] == [gone]
    # A run whose cut-off is still before the record's prune keeps it; once the record is as
    # old as the cut-off (here: the record's clock moved back 31 days), the next run drops it.
    prune_cli(database_url, monkeypatch)
    assert [i["dispatch_id"] for i in find(api, signing_key, gone)] == [gone]
    sql.all(
        "UPDATE recovery_pruned_dispatches SET pruned_at_ms = pruned_at_ms - 31 * %s::bigint",
        DAY_MS,
    )
    prune_cli(database_url, monkeypatch)
    assert find(api, signing_key, gone) == []
