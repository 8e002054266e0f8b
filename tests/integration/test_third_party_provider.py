"""A provider written outside the product behaves exactly like a built-in.

`ledger` lives in the test-support distribution (tests/support/resolver_test_support/ledger/:
its own folder, one entry point), with its own table, migration, trigger, grants, reason codes
and escalation windows. `resolver migrate` creates its table, escalation uses its windows, the
API serves its sentences and tampering flags, the prune removes its rows with their dispatch,
and `resolver migrate --grants` gives the roles what it says (tests/deploy/test_database_roles.py
checks the grants, tests/integration/api/test_console_informed.py the console).
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from resolver.core.declarations import DeclaredFactory
from resolver.core.domain import ESCALATION_REASON, FindingKind
from resolver.core.provider import build_registry, installed_entry_points, installed_reasons
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.db import migrate
from resolver.db.retention import PostgresRetention
from resolver.retention import pruning as retention
from resolver_test_support.ledger import create, entry_digest
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.postgres import DatabaseFactory
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS
DAY_MS = 86_400_000
ACTION = "refunds.book"


def book(
    sql: SQL,
    world: World,
    dispatch_id: str,
    *,
    booked_for: dict[str, Any] | None = None,
    altered: dict[str, Any] | None = None,
) -> None:
    """What the ledger service writes when it books a refund (as its own writer): for this
    dispatch, or genuinely `booked_for` other values; `altered` after its digest was taken."""
    spec = world.specs[dispatch_id]
    row = {
        "dispatch_id": dispatch_id,
        "idempotency_key": spec.idempotency_key,
        "action_digest": spec.action_digest,
        "attempt": 1,
        "amount_cents": 2490,
        "state": "booked",
    } | (booked_for or {})
    digest = entry_digest(row)
    row |= altered or {}  # a change after the digest was taken: what tampering looks like
    sql.all(
        "INSERT INTO ledger_entries (dispatch_id, idempotency_key, action_digest, attempt,"
        " amount_cents, state, entry_digest) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        *row.values(),
        digest,
    )


@pytest.fixture
def reconciler(store: Storage, database_url: str) -> Iterator[Reconciler]:
    # Through the entry point, exactly as `resolver run` finds a provider.
    registry = build_registry({ACTION: {"provider": "ledger", "database_url": database_url}})
    settings = ReconcilerSettings(
        owner="r", recovery_lease_ms=30_000, backoff_base_ms=1_000, backoff_max_ms=8_000
    )
    yield Reconciler(store, registry, settings, Runtime(rng=random.Random(5)))
    registry.close()


def test_it_is_found_by_its_entry_point_and_declares_itself() -> None:
    (entry,) = [ep for ep in installed_entry_points("resolver.providers") if ep.name == "ledger"]
    assert entry.dist is not None and entry.dist.name == "approved-action-resolver-test-support"
    factory = entry.load()
    assert factory is create and isinstance(factory, DeclaredFactory)
    reasons = installed_reasons().public_document()
    assert reasons["ledger_entry_altered"] == {
        "sentence": "the ledger entry no longer matches its digest: it was changed after booking",
        "suggests_tampering": True,
    }
    assert reasons["no_ledger_entry"]["suggests_tampering"] is False


def test_migrate_creates_its_table_once_and_registers_it_for_the_prune(
    databases: DatabaseFactory,
) -> None:
    url = databases.create_empty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "resolver", "migrate"],
            env={"RESOLVER_DATABASE_URL": url, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass('ledger_entries') IS NOT NULL").fetchone() == (
                True,
            )
            recorded = conn.execute(
                "SELECT name FROM resolver_provider_migrations WHERE provider = 'ledger'"
                " ORDER BY name"
            ).fetchall()
            assert recorded == [("0001_ledger_entries",), ("definitions",)]
            assert conn.execute(
                "SELECT table_name, dispatch_column, provider FROM resolver_evidence_tables"
                " ORDER BY table_name"
            ).fetchall() == [
                # The built-ins' own tables, registered through the same declaration.
                ("ledger_entries", "dispatch_id", "ledger"),
                ("package_commit_markers", "dispatch_id", "package_install"),
                ("package_install_records", "dispatch_id", "package_install"),
                ("package_install_targets", "dispatch_id", "package_install"),
                ("run_origin_facts", "dispatch_id", "run_create"),
            ]
            applied = conn.execute(
                "SELECT applied_at_ms FROM resolver_provider_migrations ORDER BY name"
            ).fetchall()
        migrate.upgrade(url)  # again: nothing of the provider's is applied twice
        with psycopg.connect(url) as conn:
            assert (
                conn.execute(
                    "SELECT applied_at_ms FROM resolver_provider_migrations ORDER BY name"
                ).fetchall()
                == applied
            )
        # The printed script holds the provider's migration too, guarded by the bookkeeping.
        assert "CREATE TABLE ledger_entries" in migrate.upgrade_sql()
    finally:
        databases.drop(url)


def test_escalation_uses_its_own_windows(world: World, sql: SQL, reconciler: Reconciler) -> None:
    escalation = reconciler._registry.escalation_for(ACTION)
    assert escalation.after_ms(FindingKind.MISSING) == 600_000
    assert escalation.after_ms(FindingKind.STILL_RUNNING) == 1_800_000
    (lease,) = world.crashed(1, action_type=ACTION)
    reconciler.at(AFTER).run_cycle()
    control = sql.control(lease.dispatch_id)
    assert (control["status"], control["last_finding"], control["last_reason"]) == (
        "armed",
        "missing",
        "no_ledger_entry",
    )
    assert control["escalates_at_ms"] == AFTER + 600_000
    reconciler.at(AFTER + 600_000 + 8_000).run_cycle()
    control = sql.control(lease.dispatch_id)
    assert (control["status"], control["manual_reason"]) == ("manual", ESCALATION_REASON)


def test_its_evidence_settles_and_a_tampered_entry_is_a_conflict_with_its_reason(
    world: World, sql: SQL, reconciler: Reconciler
) -> None:
    booked, altered, foreign = (lease.dispatch_id for lease in world.crashed(3, action_type=ACTION))
    book(sql, world, booked)
    book(sql, world, altered, altered={"amount_cents": 249_000})
    book(sql, world, foreign, booked_for={"idempotency_key": "idem-someone-else"})
    report = reconciler.at(AFTER).run_cycle()
    assert report.accepted == {booked, altered, foreign}
    assert sql.execution(booked)["state"] == "succeeded"
    assert sql.execution(booked)["result_code"] == "ledger_booked"
    for dispatch_id, reason in (
        (altered, "ledger_entry_altered"),
        (foreign, "ledger_entry_foreign"),
    ):
        control = sql.control(dispatch_id)
        assert (control["status"], control["last_reason"]) == ("manual", reason)


def test_the_prune_removes_its_rows_with_their_dispatch_and_its_trigger_guards_them(
    world: World, sql: SQL, store: Storage, database_url: str, reconciler: Reconciler
) -> None:
    # Settled forty days ago on the database clock: past a thirty-day retention.
    started_ms = int(sql.one("SELECT resolver_now_ms(NULL) AS ms")["ms"]) - 40 * DAY_MS
    lease = world.started(ACTION, now_ms=started_ms)
    book(sql, world, lease.dispatch_id)
    reconciler.at(started_ms + EXEC_LEASE_MS).run_cycle()
    assert sql.execution(lease.dispatch_id)["state"] == "succeeded"
    # Insert-only outside the prune, like every built-in fact table.
    with pytest.raises(psycopg.errors.RestrictViolation):
        sql.all("DELETE FROM ledger_entries WHERE dispatch_id = %s", lease.dispatch_id)
    with PostgresRetention(database_url) as retention_store:
        pruned = retention.prune(retention_store, retention.PruneOptions(older_than_ms=1))
    assert (pruned.dispatches, pruned.evidence) == (1, 1)
    assert sql.all("SELECT * FROM ledger_entries WHERE dispatch_id = %s", lease.dispatch_id) == []
