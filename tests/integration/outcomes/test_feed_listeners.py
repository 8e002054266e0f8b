"""The feed's listeners: a settling commit notifies only while a LISTEN session is registered,
so the SDK's listener registers, renews and ends its registration (test_feed_race.py holds
the catch-up on a commit that looked for listeners just before a registration)."""

from __future__ import annotations

import psycopg

from resolver.core.domain import Completion, Outcome
from resolver.db.connect import Profile
from resolver.db.store.outcomes import LISTEN_RENEW_SECONDS, OutcomeListener
from resolver.executor.client import ExecutionClient
from tests.helpers.clocks import FakeClock
from tests.helpers.database import new_spec
from tests.helpers.stores import Storage


def _registered(database_url: str) -> dict[int, int]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute("SELECT pid, listening_until_ms FROM recovery_outcome_listeners")
        return {pid: until for pid, until in rows.fetchall()}


def test_the_listener_registers_renews_when_due_and_ends_its_registration(
    database_url: str,
) -> None:
    clock = FakeClock()
    listener = OutcomeListener(database_url, Profile(application_name="listener"), clock=clock)
    started_at = listener.open()
    (first,) = _registered(database_url).values()
    # Not due: a wait with nothing committed times out with nothing.
    assert listener.wait(0.0) is None
    assert list(_registered(database_url).values()) == [first]
    # Due: the wait renews and answers at once, as a notification of everything before now.
    clock.now += LISTEN_RENEW_SECONDS
    renewed = listener.wait(3600.0)
    assert renewed is not None and renewed >= started_at - 1
    (second,) = _registered(database_url).values()
    assert second >= first
    listener.close()
    assert _registered(database_url) == {}


def test_with_a_registered_listener_an_executor_completion_wakes_it(
    store: Storage, database_url: str
) -> None:
    client = ExecutionClient(store, owner="exec", lease_seconds=60)
    spec = client.create_dispatch(new_spec())
    lease = client.start(client.lease(spec.dispatch_id))
    listener = OutcomeListener(database_url, Profile(application_name="listener"))
    listener.open()
    try:
        client.complete(lease, Completion(Outcome.SUCCEEDED, "ok", "m-1"))
        assert listener.wait(30.0) is not None
    finally:
        listener.close()
