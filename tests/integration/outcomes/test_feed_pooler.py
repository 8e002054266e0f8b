"""The outcome feed through a real PgBouncer in transaction mode: the feed polls (LISTEN
cannot work there), a waiting reader learns a completion made through the same pooler, and a
consumer follows from its stored cursor, every statement going through the pooler."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from resolver.core.domain import Completion, Outcome
from resolver.db.connect import Pooler
from resolver.executor import ExecutionClient, PostgresExecutionStore, PostgresHandle
from resolver.outcomes import OutcomeFeed, OutcomeRecord, Wake
from tests.helpers.database import new_spec
from tests.helpers.pgbouncer import Bouncer, pgbouncer


@pytest.fixture(scope="module")
def bouncer(pg_server: str) -> Iterator[Bouncer]:
    with pgbouncer(pg_server, "transaction", users=["postgres"]) as running:
        yield running


def test_the_feed_polls_and_misses_nothing_through_a_transaction_pooler(
    bouncer: Bouncer, database_url: str
) -> None:
    pooled = bouncer.url(database_url)
    handle = PostgresHandle(pooled, pooler=Pooler.TRANSACTION, max_connections=2)
    with (
        PostgresExecutionStore(handle) as store,
        OutcomeFeed(pooled, pooler=Pooler.TRANSACTION, poll_max_seconds=0.2) as feed,
    ):
        assert feed.wake is Wake.POLL
        client = ExecutionClient(store, owner="pooled")
        leases = []
        for _ in range(6):
            spec = client.create_dispatch(new_spec())
            leases.append(client.start(client.lease(spec.dispatch_id)))
        first = leases[0]
        waiter = threading.Thread(
            target=lambda: client.complete(
                first, Completion(Outcome.SUCCEEDED, "ok", f"m-{first.dispatch_id}")
            )
        )
        waiter.start()
        status = feed.wait_for_outcome(first.dispatch_id, timeout=30)
        waiter.join()
        assert (status.state.value, status.settled_by and status.settled_by.value) == (
            "succeeded",
            "executor",
        )
        for lease in leases[1:]:
            client.complete(lease, Completion(Outcome.FAILED, "no", f"m-{lease.dispatch_id}"))
        seen: list[OutcomeRecord] = []
        stop = threading.Event()

        def handle_one(record: OutcomeRecord) -> None:
            seen.append(record)
            if len(seen) == len(leases):
                stop.set()

        feed.follow("pooled-consumer", handle_one, stop=stop, batch=2)
        assert [r.dispatch_id for r in seen] == [lease.dispatch_id for lease in leases]
        assert feed.consumer_cursor("pooled-consumer") == seen[-1].cursor
