"""Test instrumentation: the operation history, crash points and the scripted provider, all
from the test-support distribution, reaching a replica through the cycle-events seam."""

from __future__ import annotations

import json
import random
from pathlib import Path

import psycopg
import pytest

from resolver.app.composition import installed_subscribers
from resolver.app.config import Settings, load_settings
from resolver.core.domain import DispatchIdentity, FindingKind, Outcome
from resolver.core.errors import ConfigError
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver_test_support.crash import CrashInjection, CrashPoint
from resolver_test_support.history import FileHistory, HistoryEvents
from resolver_test_support.scripted import (
    SCRIPT_TABLE_DDL,
    TableScriptedProvider,
    evidence_digest,
)
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.providers import ScriptedProvider, registry, verified
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS


def test_history_records_each_operation_with_its_fence(
    world: World, store: Storage, tmp_path: Path
) -> None:
    leases = world.crashed(2)
    history = FileHistory(tmp_path / "h.jsonl", "replica-a")
    rec = Reconciler(
        store,
        registry("test.action", ScriptedProvider(verified)),
        ReconcilerSettings(owner="replica-a", recovery_lease_ms=30_000),
        Runtime(rng=random.Random(1), subscribers=(HistoryEvents(history),)),
    )
    rec.at(AFTER).run_cycle()
    history.close()
    lines = [json.loads(line) for line in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert [(e["f"], e["type"]) for e in lines] == [
        ("claim", "invoke"),
        ("claim", "ok"),
        ("inspect", "invoke"),
        ("inspect", "invoke"),
        ("inspect", "ok"),
        ("inspect", "ok"),
        ("commit", "invoke"),
        ("commit", "ok"),
    ]
    claimed = lines[1]["items"]
    assert {i["dispatch_id"] for i in claimed} == {x.dispatch_id for x in leases}
    assert all(i["claimed_at_ms"] == AFTER and i["recovery_version"] == 1 for i in claimed)
    assert {e["token"] for e in lines[2:4]} == {i["token"] for i in claimed}
    assert lines[7]["accepted"] == sorted(x.dispatch_id for x in leases)
    assert all(e["process"] == "replica-a" for e in lines)


def test_instrumentation_is_off_by_default_and_validated(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("RESOLVER_TEST_HISTORY_FILE", "RESOLVER_TEST_CRASH_AT"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings(database_url="postgresql://x@y/z", replica_id="r-1")
    # Production settings know nothing of the test hooks, and without their variables the
    # installed factories activate nothing.
    assert not {name for name in Settings.model_fields if "history" in name or "crash" in name}
    assert installed_subscribers(settings) == []
    monkeypatch.setenv("RESOLVER_TEST_CRASH_AT", "somewhere")
    with pytest.raises(ConfigError, match="RESOLVER_TEST_CRASH_AT"):
        installed_subscribers(settings)
    monkeypatch.setenv("RESOLVER_TEST_CRASH_AT", "before_commit")
    monkeypatch.setenv("RESOLVER_TEST_HISTORY_FILE", str(tmp_path / "h.jsonl"))
    active = installed_subscribers(settings)
    assert sorted(type(s).__name__ for s in active) == ["CrashInjection", "HistoryEvents"]
    crash = next(s for s in active if isinstance(s, CrashInjection))
    assert crash.order > 0  # after the history: the boundary is recorded before the kill
    assert CrashPoint("before_commit") is CrashPoint.BEFORE_COMMIT


def identity(dispatch_id: str, digest: str = "a" * 64) -> DispatchIdentity:
    return DispatchIdentity(
        1, dispatch_id, "ar", "p", "pay.charge", digest, 1, T0, f"k-{dispatch_id}"
    )


def test_scripted_provider_answers_by_the_database_clock_and_binds_the_identity(
    sql: SQL, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql.all(SCRIPT_TABLE_DDL)
    now = sql.one("SELECT resolver_now_ms(NULL) AS n")["n"]
    for dispatch_id, until in (("early", now + 3_600_000), ("later", now - 1), ("bound", now - 1)):
        sql.all(
            "INSERT INTO scripted_evidence VALUES (%s, %s, %s, ARRAY['missing', 'verified_succeeded'],"
            " ARRAY[%s]::bigint[], 'ok')",
            dispatch_id,
            "a" * 64,
            f"k-{dispatch_id}",
            until,
        )
    monkeypatch.setenv("SCRIPT_DB", database_url)
    provider = TableScriptedProvider({"database_url_env": "SCRIPT_DB"})
    answers = provider.inspect_page(
        [identity("early"), identity("later"), identity("bound", "b" * 64), identity("none")]
    )
    assert answers["early"].kind is FindingKind.MISSING
    assert answers["later"].kind is FindingKind.VERIFIED_SUCCEEDED
    assert answers["later"].evidence_digest == evidence_digest(
        "later", "a" * 64, "k-later", Outcome.SUCCEEDED, "ok"
    )
    assert answers["bound"].kind is FindingKind.CONFLICT  # evidence about another action
    assert answers["none"].kind is FindingKind.MISSING
    conn = provider._connection()
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), conn.transaction():
        conn.execute("DELETE FROM scripted_evidence")


def test_scripted_provider_rejects_unknown_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOLVER_DATABASE_URL", "postgresql://x@y/z")
    with pytest.raises(ConfigError, match="unknown settings"):
        TableScriptedProvider({"colour": "blue"})
