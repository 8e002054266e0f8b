"""`resolver status` and `/metrics` read one backlog model: same database, same numbers."""

from __future__ import annotations

import json
import os
import time

import pytest
from prometheus_client import CollectorRegistry

from resolver.core.domain import FindingKind, ItemOutcome
from resolver.db.statements import all_statements, fragment
from resolver.telemetry.metrics import BacklogCollector
from tests.helpers.cli import run
from tests.helpers.database import SQL, World
from tests.helpers.providers import fixed
from tests.helpers.stores import Storage

REC_LEASE_MS = 30_000


@pytest.fixture
def env(database_url: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    return {**clean, "RESOLVER_DATABASE_URL": database_url}


def _db_now(sql: SQL) -> int:
    return int(sql.one("SELECT resolver_now_ms(NULL) AS ms")["ms"])


def _seed_backlog(world: World, store: Storage, sql: SQL) -> None:
    """Every queue, on the real clock (the CLI reads it): due, waiting, manual, drifted."""
    past = _db_now(sql) - 120_000
    for action_type, n in (("pay.charge", 3), ("db.mutation", 2)):
        for _ in range(n):
            world.started(action_type, now_ms=past)
    world.started("pay.charge", now_ms=past + 10_000_000)  # live lease: waiting
    first, held = store.at(past + 60_000).claim_due_page("r", 2, REC_LEASE_MS)
    store.at(past + 60_000).commit_outcomes(
        [ItemOutcome(first, fixed(FindingKind.CONFLICT)(first.identity), 0, "m-1")],
    )
    del held  # its recovery lease ran out long ago: claimable again
    # A control armed for an older execution version than the execution's: no claim may take
    # it, so it is not due (the old status query counted it; the metrics did not). The
    # state-machine triggers refuse to write such a row, so it is planted with them off
    # (session_replication_role, superuser only), as a pre-0004 database could hold it.
    drifted = world.started("db.mutation", now_ms=past)
    sql.all("SET session_replication_role = replica")
    sql.all(
        "UPDATE approved_action_recovery_controls SET execution_version = execution_version - 1"
        " WHERE dispatch_id = %s",
        drifted.dispatch_id,
    )
    sql.all("SET session_replication_role = DEFAULT")


def test_status_and_metrics_report_the_same_backlog(
    world: World, store: Storage, sql: SQL, env: dict[str, str]
) -> None:
    _seed_backlog(world, store, sql)
    registry = CollectorRegistry()
    registry.register(BacklogCollector(store, ttl_seconds=0))

    t0 = time.monotonic()
    status = run(env, "status", "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    scraped = {
        queue: registry.get_sample_value("resolver_backlog_dispatches", {"queue": queue})
        for queue in ("due", "waiting", "manual")
    }
    elapsed = time.monotonic() - t0

    assert doc["queues"] == {"due": 4, "waiting": 2, "manual": 1}
    assert scraped == {q: float(n) for q, n in doc["queues"].items()}
    assert doc["due"] == doc["queues"]["due"]
    for key, count in doc["action_types"].items():
        queue, action_type = key.split("/")
        labels = {"queue": queue, "action_type": action_type}
        assert registry.get_sample_value("resolver_backlog_action_type_dispatches", labels) == count
    # Ages: the same definition read a moment apart, so they differ by at most that moment.
    for name in ("oldest_claimable_age_seconds", "oldest_manual_age_seconds"):
        scraped_age = registry.get_sample_value(f"resolver_{name}")
        assert scraped_age is not None and doc[name] > 50
        assert 0 <= scraped_age - doc[name] <= elapsed + 0.002, (name, scraped_age, doc[name])


def test_claim_status_and_metrics_include_the_one_claimable_definition() -> None:
    """Written once: each reader includes the fragment, none spells the condition itself."""
    condition = fragment("claimable_control")
    assert "e.version = c.execution_version" in condition
    readers = ("recovery_claim_due_page", "backlog_oldest", "backlog_counts")
    statements = all_statements()
    for name in readers:
        assert condition in statements[name], name
    for name, text in statements.items():
        if name not in readers:
            assert "recovery_lease_expires_at_ms <=" not in text, name
