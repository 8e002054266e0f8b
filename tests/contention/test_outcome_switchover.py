"""The outcome feed across a Patroni switchover: a consumer's stored cursor survives, and no
outcome acknowledged before, during or after the switchover is missed.

Three Patroni members on etcd, reached with a multi-host URL (`target_session_attrs=read-write`)
and synchronous_mode on. An executor settles dispatches one after another while two named
consumers follow the feed (one woken by LISTEN, one polling), each restarting from its stored
cursor whenever its connection breaks, as a consumer process would. Patroni hands the leader
over mid-run. Sized for two cores: one executor thread, two consumers, one switchover.

The history (every record each consumer received, in order, every completion the executor saw
acknowledged, the cursors stored before the switchover) is checked afterwards: every
acknowledged completion was received by both consumers, in feed order, each once after
de-duplication by cursor; the cursor stored before the switchover reads on on the new leader.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from resolver.core.domain import Completion, Outcome, OutcomeKind, OutcomeRecord
from resolver.core.errors import ResolverError
from resolver.db import migrate
from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.outcomes import OutcomeFeed, Start, Wake
from tests.helpers.database import new_spec
from tests.helpers.stores import Storage

from . import patroni

pytestmark = pytest.mark.contention

SETTLED_BEFORE = 25
SETTLED_AFTER = 25


def _key(cursor: str) -> tuple[int, int]:
    xid, seq = cursor.split(":")
    return int(xid), int(seq)


@pytest.fixture(scope="module")
def cluster() -> Iterator[patroni.PatroniCluster]:
    missing = patroni.available()
    if missing:
        pytest.skip(missing)
    workdir = Path(tempfile.mkdtemp(prefix="outcome-switchover-"))
    workdir.chmod(0o755)  # Patroni runs as the postgres account under it
    pg = patroni.PatroniCluster(workdir / "pg", synchronous=True)
    try:
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _url(pg: patroni.PatroniCluster) -> str:
    hosts = ",".join(f"127.0.0.1:{port}" for port in pg.ports)
    return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"


@dataclass
class Consumer:
    """A named consumer that follows the feed, restarting from its stored cursor after any
    storage failure; `received` is every record handed to it, in order."""

    name: str
    url: str
    wake: Wake
    stop: threading.Event
    received: list[OutcomeRecord] = field(default_factory=list)
    restarts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with OutcomeFeed(
                    self.url, wake=self.wake, poll_max_seconds=0.2, listen_fallback_seconds=2
                ) as feed:
                    feed.follow(self.name, self._handle, start=Start.NOW, stop=self.stop)
            except ResolverError:
                # The connection broke (the leader went away): a new process would start
                # from the stored cursor, and so does this one.
                self.restarts += 1
                self.stop.wait(0.2)

    def _handle(self, record: OutcomeRecord) -> None:
        with self.lock:
            self.received.append(record)

    def settled_ids(self) -> set[str]:
        with self.lock:
            return {r.dispatch_id for r in self.received if r.kind is OutcomeKind.SETTLED}


def _settle(client: ExecutionClient) -> tuple[str, bool]:
    """One dispatch created, started and completed; whether its completion was acknowledged."""
    spec = client.create_dispatch(new_spec())
    lease = client.start(client.lease(spec.dispatch_id))
    done = Completion(Outcome.SUCCEEDED, "ok", f"m-{spec.dispatch_id}")
    return spec.dispatch_id, client.complete(lease, done) is CompletionResult.COMMITTED


def test_a_consumer_follows_the_feed_across_a_patroni_switchover(
    cluster: patroni.PatroniCluster,
) -> None:
    url = _url(cluster)
    migrate.upgrade(url)
    stop = threading.Event()
    consumers = [
        Consumer("listening", url, Wake.LISTEN, stop),
        Consumer("polling", url, Wake.POLL, stop),
    ]
    threads = [threading.Thread(target=c.run, name=c.name) for c in consumers]
    acknowledged: list[str] = []
    unknown = 0
    store = Storage(url, max_connections=2)
    store.open()
    try:
        # Both consumers registered (a first save) before anything settles.
        with OutcomeFeed(url, wake=Wake.POLL) as feed:
            for consumer in consumers:
                feed.save_cursor(consumer.name, feed.cursor_now())
        for thread in threads:
            thread.start()
        client = ExecutionClient(store, owner="switchover-executor", lease_seconds=60)

        def settle_some(count: int) -> None:
            nonlocal unknown
            settled = 0
            while settled < count:
                try:
                    dispatch_id, committed = _settle(client)
                except ResolverError:
                    unknown += 1  # the leader went away mid-call: its outcome is not known
                    time.sleep(0.1)  # the pause before a retry; the next call decides
                    continue
                assert committed
                acknowledged.append(dispatch_id)
                settled += 1

        settle_some(SETTLED_BEFORE)
        with OutcomeFeed(url, wake=Wake.POLL) as feed:
            stored_before = {c.name: feed.consumer_cursor(c.name) for c in consumers}
        # The switchover, while the executor keeps settling and the consumers keep reading.
        during = threading.Thread(target=settle_some, args=(SETTLED_AFTER,))
        during.start()
        record = cluster.failover()
        during.join(180)
        assert not during.is_alive()
        assert record.kind == "switchover" and record.new_leader != record.old_leader

        # Every acknowledged completion reaches both consumers.
        deadline = time.monotonic() + 120
        while not all(set(acknowledged) <= c.settled_ids() for c in consumers):
            assert time.monotonic() < deadline, "an acknowledged outcome never arrived"
            time.sleep(0.2)  # the poll interval of this check; the consumers decide
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        store.close()

    print(
        f"\nswitchover {record.old_leader} -> {record.new_leader} in "
        f"{record.seconds_to_promote:.1f}s; {len(acknowledged)} acknowledged, {unknown} calls "
        f"cut off; restarts: {', '.join(f'{c.name} {c.restarts}' for c in consumers)}"
    )
    with OutcomeFeed(url, wake=Wake.POLL) as feed:
        for consumer in consumers:
            # In feed order, each record once after de-duplication by cursor.
            first_seen: dict[str, OutcomeRecord] = {}
            for r in consumer.received:
                first_seen.setdefault(r.cursor, r)
            ordered = list(first_seen.values())
            keys = [_key(r.cursor) for r in ordered]
            assert keys == sorted(keys), f"{consumer.name}: out of feed order"
            settled = [r.dispatch_id for r in ordered if r.kind is OutcomeKind.SETTLED]
            assert len(settled) == len(set(settled)), f"{consumer.name}: a dispatch twice"
            assert set(acknowledged) <= set(settled), consumer.name
            # The cursor stored before the switchover reads on on the new leader: every
            # acknowledged completion after it is there, in order.
            before = stored_before[consumer.name]
            assert before is not None
            after = feed.read(before, limit=1000)
            assert [_key(r.cursor) for r in after] == sorted(_key(r.cursor) for r in after)
            assert set(acknowledged[SETTLED_BEFORE:]) <= {r.dispatch_id for r in after}
            stored = feed.consumer_cursor(consumer.name)
            assert stored is not None and _key(stored) >= _key(before)
        # Transaction ids went on across the switchover: the new leader's records sort after.
        records = feed.read(limit=1000)
    by_id = {r.dispatch_id: _key(r.cursor) for r in records}
    assert max(by_id[d] for d in acknowledged[:SETTLED_BEFORE]) < min(
        by_id[d] for d in acknowledged[-5:]
    )
