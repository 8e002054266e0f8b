"""The outcome feed under concurrency: no consumer ever misses a record that commits after it
read past a lower position, and every consumer sees every outcome exactly once (after
de-duplication by cursor), in feed order.

The race records a history (each consumer's records in the order it got them, and what each
settling transaction did) and checks the invariants over it afterwards.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

from resolver.core.domain import (
    Completion,
    Decision,
    FindingKind,
    ManualDecision,
    Outcome,
    Principal,
)
from resolver.executor.client import ExecutionClient
from resolver.human.manual import ManualResolutionService
from resolver.outcomes import OutcomeFeed, OutcomeRecord, Wake
from tests.helpers.database import SQL, new_spec
from tests.helpers.providers import ScriptedProvider, fixed, reconciler, verified
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage
from tests.helpers.telemetry import wait_for

SEED = random.randrange(1 << 30)


def _key(cursor: str) -> tuple[int, int]:
    xid, seq = cursor.split(":")
    return int(xid), int(seq)


def started(store: Storage, lease_seconds: float) -> tuple[str, object]:
    """A dispatch past the barrier whose lease (from the barrier on) lasts `lease_seconds`."""
    leasing = ExecutionClient(store, owner="exec", lease_seconds=60)
    spec = leasing.create_dispatch(new_spec())
    starting = ExecutionClient(store, owner="exec", lease_seconds=lease_seconds)
    return spec.dispatch_id, starting.start(leasing.lease(spec.dispatch_id))


def test_a_reader_never_passes_a_transaction_that_is_still_running(
    store: Storage, database_url: str
) -> None:
    early_id, early = started(store, 60)
    late_id, late = started(store, 60)
    with OutcomeFeed(database_url) as feed, psycopg.connect(database_url) as slow:
        # The slow transaction takes its id first and settles, but has not committed yet.
        slow.execute("SELECT pg_current_xact_id()")
        slow.execute(
            "SELECT * FROM resolver_execution_complete(%s, %s, %s::uuid, %s, 'succeeded',"
            " 'ok', 'm-early')",
            (early_id, early.owner, early.token, early.version),  # type: ignore[attr-defined]
        )
        # A later transaction settles and commits: its record has the higher position.
        ExecutionClient(store, owner="exec").complete(
            late,
            Completion(Outcome.SUCCEEDED, "ok", "m-late"),  # type: ignore[arg-type]
        )
        assert feed.read() == [], "a record past a running transaction was handed out"
        slow.commit()
        # The horizon is the cluster's: a write transaction in another database (the fixture
        # copies the next test database in the background) holds it back a moment longer.
        got = wait_for(
            "both records below the horizon",
            lambda: records if len(records := feed.read()) >= 2 else None,
            timeout_seconds=60,
        )
    assert [r.dispatch_id for r in got] == [early_id, late_id]
    assert _key(got[0].cursor) < _key(got[1].cursor)


class _Watched(OutcomeFeed):
    """A feed whose reads a test can watch: `empty` is set by a read that came back empty
    once `armed` was set."""

    def __init__(self, database_url: str, **options: object) -> None:
        super().__init__(database_url, **options)  # type: ignore[arg-type]
        self.armed = threading.Event()
        self.reading = threading.Event()
        self.empty = threading.Event()

    def read(
        self, cursor: str | None = None, *, limit: int = 100, project_id: str | None = None
    ) -> list[OutcomeRecord]:
        armed = self.armed.is_set()
        records = super().read(cursor, limit=limit, project_id=project_id)
        self.reading.set()
        if armed and not records:
            self.empty.set()
        return records


@contextlib.contextmanager
def _first_record(
    feed: OutcomeFeed, start: str
) -> Iterator[tuple[threading.Thread, list[OutcomeRecord]]]:
    """A reader (not started yet) that streams the feed from `start` and stops at its first
    record, with what it got; stopped and joined on the way out, whatever happened."""
    got: list[OutcomeRecord] = []
    stop = threading.Event()

    def consume() -> None:
        for record in feed.stream(start, stop=stop):
            got.append(record)
            stop.set()

    reader = threading.Thread(target=consume)
    try:
        yield reader, got
    finally:
        stop.set()
        if reader.ident is not None:
            reader.join(10)


@pytest.mark.parametrize("older_begins", ["before the reader starts", "after it started"])
def test_a_listener_woken_while_an_older_transaction_holds_the_record_back_still_gets_it(
    store: Storage, database_url: str, older_begins: str
) -> None:
    """The notification comes at the settling commit; an older transaction that writes no
    outcome and never notifies holds the record back past it. With a fallback of an hour, the
    reader gets the record only if it keeps reading until the horizon passes what it was told
    about (or, before its LISTEN, what may have committed unnoticed)."""
    dispatch_id, lease = started(store, 60)

    def settle() -> None:
        ExecutionClient(store, owner="exec").complete(
            lease,  # type: ignore[arg-type]
            Completion(Outcome.SUCCEEDED, "ok", f"m-{dispatch_id}"),
        )

    with (
        _Watched(database_url, wake=Wake.LISTEN, listen_fallback_seconds=3600) as feed,
        psycopg.connect(database_url) as older,
        _first_record(feed, feed.cursor_now()) as (reader, got),
    ):
        if older_begins == "before the reader starts":
            older.execute("SELECT pg_current_xact_id()")
            settle()
            feed.armed.set()
            reader.start()
        else:
            reader.start()
            assert feed.reading.wait(30)
            older.execute("SELECT pg_current_xact_id()")
            settle()
            feed.armed.set()
        # The reader has read past the settling commit and found nothing: held back.
        assert feed.empty.wait(30)
        assert got == []
        older.commit()
        reader.join(60)
    assert not reader.is_alive(), "the reader waited for a notification that never comes"
    assert [r.dispatch_id for r in got] == [dispatch_id]


def test_a_commit_that_looked_for_listeners_before_the_registration_still_reaches_the_reader(
    store: Storage, database_url: str
) -> None:
    """The slow transaction settles (and looks for listeners: none) before the reader
    registers, and commits after it: it notifies nobody. With a fallback of an hour, the reader
    gets the record only by reading until the horizon passes the id it took after its
    registration."""
    dispatch_id, lease = started(store, 60)
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
        with _first_record(feed, feed.cursor_now()) as (reader, got):
            reader.start()
            assert feed.reading.wait(30)
            feed.armed.set()
            assert feed.empty.wait(30)
            assert got == []
            slow.commit()
            reader.join(60)
        # The slow commit notified nobody: the witness hears only the end marker.
        witness.execute("NOTIFY resolver_outcomes, 'end'")
        payloads = [n.payload for n in witness.notifies(timeout=30, stop_after=1)]
    assert payloads == ["end"]
    assert not reader.is_alive(), "the reader waited for a notification that never comes"
    assert [r.dispatch_id for r in got] == [dispatch_id]


@pytest.mark.parametrize("wake", [Wake.LISTEN, Wake.POLL])
def test_concurrent_settling_transactions_reach_every_consumer_once_in_order(
    store: Storage, database_url: str, sql: SQL, wake: Wake
) -> None:
    rng = random.Random(SEED)
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    manual = [started(store, 0.001)[0] for _ in range(12)]
    automatic: set[str] = set()

    def finding(identity: object) -> object:
        if identity.dispatch_id in automatic:  # type: ignore[attr-defined]
            return verified(identity)  # type: ignore[arg-type]
        return fixed(FindingKind.CONFLICT)(identity)  # type: ignore[arg-type]

    # The manual ones reach the queue first (conflict), before anything races.
    replica = reconciler(store, ScriptedProvider(finding), page_size=8)
    while replica.run_cycle().claimed:
        pass
    assert {
        r["status"] for r in sql.all("SELECT status FROM approved_action_recovery_controls")
    } == {"manual"}
    completing = [started(store, 60) for _ in range(40)]
    automatic |= {started(store, 0.001)[0] for _ in range(40)}
    expected = {d for d, _ in completing} | automatic | set(manual)

    stop = threading.Event()
    histories: list[list[OutcomeRecord]] = [[] for _ in range(4)]

    def consume(history: list[OutcomeRecord], batch: int) -> None:
        with OutcomeFeed(database_url, wake=wake, poll_max_seconds=0.05) as feed:
            for record in feed.stream(stop=stop, batch=batch):
                history.append(record)

    def complete_slowly(dispatch_id: str, lease: object) -> None:
        # The transaction takes its id early and commits late: a plain sequence reader
        # would pass its position before it is visible.
        with psycopg.connect(database_url) as conn:
            conn.execute("SELECT pg_current_xact_id()")
            time.sleep(rng.random() * 0.05)
            conn.execute(
                "SELECT * FROM resolver_execution_complete(%s, %s, %s::uuid, %s, 'succeeded',"
                " 'ok', %s)",
                (dispatch_id, lease.owner, lease.token, lease.version, f"m-{dispatch_id}"),  # type: ignore[attr-defined]
            )
            time.sleep(rng.random() * 0.05)

    def decide_all() -> None:
        now = int(sql.one("SELECT resolver_now_ms(NULL) AS ms")["ms"])
        alice = Principal(
            "alice", auth_time_ms=now, amr=("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
        )
        service = ManualResolutionService(store, signer=TEST_SIGNER)
        for dispatch_id in manual:
            version = int(sql.execution(dispatch_id)["version"])
            decision = rng.choice(list(Decision))
            service.decide(
                alice, ManualDecision(dispatch_id, decision, f"op-{dispatch_id}", version, "race")
            )

    def resolve_all() -> None:
        while replica.run_cycle().claimed:
            pass

    consumers = [
        threading.Thread(target=consume, args=(h, b))
        for h, b in zip(histories, (1, 3, 16, 100), strict=True)
    ]
    for t in consumers:
        t.start()
    writers: list[Callable[[], None]] = [decide_all, resolve_all]
    writers += [lambda d=d, lease=lease: complete_slowly(d, lease) for d, lease in completing]
    rng.shuffle(writers)
    threads = [threading.Thread(target=w) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    def caught_up() -> bool:
        return all({r.dispatch_id for r in h} >= expected for h in histories)

    deadline = time.monotonic() + 60
    while not caught_up() and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for t in consumers:
        t.join()
    for history in histories:
        keys = [_key(r.cursor) for r in history]
        assert keys == sorted(keys), f"out of order (seed {SEED})"
        unique = {r.cursor: r for r in history}
        assert len(unique) == len(history) == len(expected), f"seed {SEED}"
        assert {r.dispatch_id for r in unique.values()} == expected, f"missed one (seed {SEED})"
    settled = {
        r["dispatch_id"]: r["state"]
        for r in sql.all("SELECT dispatch_id, state FROM approved_action_executions")
    }
    assert {r.dispatch_id: r.state.value for r in histories[0]} == settled
