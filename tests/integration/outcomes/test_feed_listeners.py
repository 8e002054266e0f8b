"""The feed's listeners: a settling commit notifies only while a LISTEN session is registered,
so the SDK's listener registers, renews and ends its registration, and catches up on what
committed without notifying it: a commit that looked for listeners before the registration
committed."""

from __future__ import annotations

import threading

import psycopg

from resolver.core.domain import Completion, Outcome
from resolver.db.connect import Profile
from resolver.db.store.outcomes import LISTEN_RENEW_SECONDS, OutcomeListener
from resolver.executor.client import ExecutionClient
from resolver.outcomes import OutcomeRecord, Wake
from tests.helpers.database import new_spec
from tests.helpers.stores import Storage
from tests.integration.outcomes.test_feed_race import _Watched, started


def _registered(database_url: str) -> dict[int, int]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute("SELECT pid, listening_until_ms FROM recovery_outcome_listeners")
        return {pid: until for pid, until in rows.fetchall()}


class _Clock:
    """The listener's monotonic clock, moved by the test instead of waited for."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_the_listener_registers_renews_when_due_and_ends_its_registration(
    database_url: str,
) -> None:
    clock = _Clock()
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


def test_a_commit_that_looked_for_listeners_before_the_registration_still_reaches_the_reader(
    store: Storage, database_url: str
) -> None:
    """The slow transaction settles (and looks for listeners: none) before the reader
    registers, and commits after it: it notifies nobody. With a fallback of an hour, the reader
    gets the record only by reading until the horizon passes the id it took after its
    registration."""
    dispatch_id, lease = started(store, 60)
    got: list[OutcomeRecord] = []
    stop = threading.Event()
    with (
        _Watched(database_url, wake=Wake.LISTEN, listen_fallback_seconds=3600) as feed,
        psycopg.connect(database_url) as slow,
        psycopg.connect(database_url, autocommit=True) as witness,
    ):
        # A session that LISTENs without registering: it hears whatever notifies anyway.
        witness.execute("LISTEN resolver_outcomes")
        slow.execute(
            "SELECT * FROM resolver_execution_complete(%s, %s, %s::uuid, %s, 'succeeded',"
            " 'ok', 'm-slow')",
            (dispatch_id, lease.owner, lease.token, lease.version),  # type: ignore[attr-defined]
        )
        start = feed.cursor_now()

        def consume() -> None:
            for record in feed.stream(start, stop=stop):
                got.append(record)
                stop.set()

        reader = threading.Thread(target=consume)
        reader.start()
        try:
            assert feed.reading.wait(30)
            feed.armed.set()
            assert feed.empty.wait(30)
            assert got == []
            slow.commit()
            reader.join(60)
        finally:
            stop.set()
            reader.join(10)
        # The slow commit notified nobody: the witness hears only the end marker.
        witness.execute("NOTIFY resolver_outcomes, 'end'")
        payloads = [n.payload for n in witness.notifies(timeout=30, stop_after=1)]
    assert payloads == ["end"]
    assert not reader.is_alive(), "the reader waited for a notification that never comes"
    assert [r.dispatch_id for r in got] == [dispatch_id]


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
