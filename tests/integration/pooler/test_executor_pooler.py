"""The Python executor SDK behind a real PgBouncer in transaction mode, built as the docs build
it (`PostgresExecutionStore(PostgresHandle(url))`): it reads the pooler and the timeouts from
the same `RESOLVER_*` settings as the replicas, so nothing is prepared server-side and every
transaction runs with the statement and lock timeouts; an undeclared pooler that drops them is
refused, never silently run without them."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from resolver.core.errors import ConfigError
from resolver.executor import (
    ExecutionClient,
    ExecutionLease,
    PostgresExecutionStore,
    PostgresHandle,
)
from tests.helpers.database import new_spec
from tests.helpers.pgbouncer import Bouncer, pgbouncer

RENEWALS = 40


@pytest.fixture(scope="module")
def bouncer(pg_server: str) -> Iterator[Bouncer]:
    with pgbouncer(pg_server, "transaction", users=["postgres"]) as running:
        yield running


@pytest.fixture
def replica_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a deployment behind the pooler sets for its replicas, and so for its executors."""
    for name, value in {
        "RESOLVER_DATABASE_POOLER": "transaction",
        "RESOLVER_STATEMENT_TIMEOUT_MS": "7000",
        "RESOLVER_LOCK_TIMEOUT_MS": "1500",
    }.items():
        monkeypatch.setenv(name, value)


def in_force(handle: PostgresHandle) -> tuple[str, str]:
    with handle.transaction() as conn:
        statement = conn.execute("SHOW statement_timeout").fetchone()
        lock = conn.execute("SHOW lock_timeout").fetchone()
    assert statement is not None and lock is not None
    return next(iter(statement.values())), next(iter(lock.values()))


@pytest.mark.usefixtures("replica_settings")
def test_the_documented_store_reads_the_replicas_settings_behind_the_pooler(
    bouncer: Bouncer, database_url: str
) -> None:
    with PostgresExecutionStore(PostgresHandle(bouncer.url(database_url))) as store:
        assert in_force(store.handle) == ("7s", "1500ms")
        clients = [ExecutionClient(store, owner=f"worker-{n}") for n in range(4)]
        leases: list[ExecutionLease] = []
        for client in clients:
            spec = client.create_dispatch(new_spec())
            leases.append(client.start(client.lease(spec.dispatch_id)))

        def renew_many(n: int) -> ExecutionLease:
            lease = leases[n]
            for _ in range(RENEWALS):
                lease = clients[n].renew(lease)
            return lease

        # Four executors renewing at once over the pool's connections, whose transactions
        # the pooler hands to whichever server connection is free: a statement prepared on
        # one would be missing (or already there) on the next.
        with ThreadPoolExecutor(4) as pool:
            renewed = list(pool.map(renew_many, range(4)))
        assert [lease.version for lease in renewed] == [2 + RENEWALS] * 4
        assert in_force(store.handle) == ("7s", "1500ms")


def test_an_undeclared_pooler_is_refused_by_the_executor_sdk(
    bouncer: Bouncer, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RESOLVER_DATABASE_POOLER", raising=False)
    with (
        PostgresExecutionStore(PostgresHandle(bouncer.url(database_url))) as store,
        pytest.raises(ConfigError, match="RESOLVER_DATABASE_POOLER=transaction"),
    ):
        ExecutionClient(store, owner="platform").create_dispatch(new_spec())


def test_a_bad_setting_is_one_configuration_error_naming_it(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESOLVER_LOCK_TIMEOUT_MS", "20000")
    with pytest.raises(ConfigError, match="RESOLVER_LOCK_TIMEOUT_MS must be below"):
        PostgresHandle(database_url)
