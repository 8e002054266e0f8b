"""The previous release's `PostgresStore`, kept until 0.3.0 over the port stores
(resolver/_compat): it warns when built, naming what replaces it and the release that removes
it, and its old calls (`now_ms=` included) still do what they did."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from resolver.core.domain import ExecutionState
from resolver.executor import (
    ExecutionClient,
    PostgresExecutionStore,
    PostgresHandle,
    PostgresStore,
)
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, new_spec
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS


@pytest.fixture
def old(database_url: str) -> Iterator[PostgresStore]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        store = PostgresStore(database_url, max_connections=2)
    with store:
        yield store


def test_building_it_warns_naming_the_execution_port_store(database_url: str) -> None:
    with pytest.warns(
        DeprecationWarning, match=r"removed in 0\.3\.0: .*PostgresHandle.*PostgresExecutionStore"
    ) as caught:
        PostgresStore(database_url).close()
    assert caught[0].filename == __file__  # the warning points at the adopter's line


def test_its_old_calls_still_take_the_clock_per_call(old: PostgresStore, sql: SQL) -> None:
    spec = new_spec()
    assert old.create_dispatch(spec)
    lease = old.lease_execution(spec.dispatch_id, "exec-1", EXEC_LEASE_MS, now_ms=T0)
    lease = old.start_execution(lease, EXEC_LEASE_MS, now_ms=T0)
    assert lease.lease_expires_at_ms == T0 + EXEC_LEASE_MS
    assert old.claim_due_page("r", 16, 30_000, now_ms=AFTER - 1) == []
    (item,) = old.claim_due_page("r", 16, 30_000, now_ms=AFTER)
    assert item.identity.dispatch_id == spec.dispatch_id
    assert old.release_recovery_leases([item], now_ms=AFTER) == 1
    view = old.get_execution(spec.dispatch_id, now_ms=AFTER)
    assert view is not None and view.state is ExecutionState.EXECUTING
    assert sql.execution(spec.dispatch_id)["lease_expires_at_ms"] == T0 + EXEC_LEASE_MS


def test_the_client_runs_on_it_as_on_the_execution_port_store(
    old: PostgresStore, database_url: str
) -> None:
    spec = ExecutionClient(old, owner="exec-1").create_dispatch(new_spec())
    lease = ExecutionClient(old, owner="exec-1").at(T0).lease(spec.dispatch_id)
    with PostgresExecutionStore(PostgresHandle(database_url)) as new:
        assert new.at(T0).get_execution(spec.dispatch_id) == old.get_execution(
            spec.dispatch_id, now_ms=T0
        )
        assert new.get_execution(lease.dispatch_id) is not None


def test_the_clients_clock_per_call_still_works_and_warns(store: Storage) -> None:
    client = ExecutionClient(store, owner="exec-1", lease_seconds=30)
    spec = client.create_dispatch(new_spec())
    with pytest.warns(DeprecationWarning, match=r"removed in 0\.3\.0: .*client\.at\(now_ms\)") as w:
        lease = client.lease(spec.dispatch_id, now_ms=T0)
    assert w[0].filename == __file__
    assert lease.lease_expires_at_ms == T0 + 30_000
