"""Following the outcome feed, waiting for one dispatch's outcome, reading its status.

Everything goes through the feed's documented SQL functions (docs/outcomes.md), so another
language does the same with its own driver. Delivery is at least once: `follow` saves a
consumer's cursor after its handler returned for a whole batch, so a crash in between hands
the batch again; de-duplicate by the record's `cursor` (its CloudEvents `id`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from enum import StrEnum
from functools import partial
from types import TracebackType
from typing import Self

from resolver.core.domain import DispatchStatus, HistoryEntry, OutcomeRecord
from resolver.core.errors import NotFound, OutcomeTimeout
from resolver.core.ports import OutcomeReader
from resolver.db.connect import Pooler, Profile, pooler_from_env
from resolver.db.store.handle import PostgresHandle
from resolver.db.store.outcomes import OutcomeListener, PostgresOutcomeReader, cursor_xid


class Wake(StrEnum):
    """How a waiting reader learns that something settled."""

    AUTO = "auto"
    """LISTEN, unless the connection goes through a transaction-pooling PgBouncer."""
    LISTEN = "listen"
    """A session of its own LISTENs; the commit's NOTIFY wakes it at once."""
    POLL = "poll"
    """Read again after a pause that doubles from `poll_min_seconds` to `poll_max_seconds`
    while nothing arrives, and starts short again when something did."""


class Start(StrEnum):
    """Where a consumer with no stored cursor begins."""

    BEGINNING = "beginning"
    """Every record the feed still holds."""
    NOW = "now"
    """Only what settles from now on."""


class _Pacer:
    """One reader's wait between reads: a notification (LISTEN) or a growing pause (POLL).

    A notification names the transaction that committed; its records are readable once the
    horizon has passed that id. A transaction that took its id earlier and still runs holds
    them back after the notification, and nobody notifies when it ends: so a feed reader woken
    too early (`horizon` set) polls with the growing pause, still woken by notifications, until
    a read began with the horizon past every id it was told about.
    """

    def __init__(self, feed: OutcomeFeed, stop: threading.Event, *, horizon: bool) -> None:
        self._feed = feed
        self._stop = stop
        self._listener: OutcomeListener | None = None
        self._pause = feed.poll_min_seconds
        self._horizon = horizon
        self._behind: int | None = None
        """The highest transaction id notified whose records may still be held back."""

    def __enter__(self) -> Self:
        if self._feed.wake is Wake.LISTEN:
            # LISTEN before the first read: a commit between that read and the wait then
            # still wakes it.
            self._listener = self._feed.listener()
            # What committed before the LISTEN sent no notification to this reader, and may
            # still be held back: read until the horizon reaches the id it started at.
            self._note(self._listener.open() - 1)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._listener is not None:
            self._listener.close()

    def read(self, read: Callable[[], list[OutcomeRecord]]) -> list[OutcomeRecord]:
        """One read of the feed, noting whether it covered every notified transaction."""
        horizon = None
        if self._behind is not None:
            # Taken before the read: the read's own horizon is at least this one.
            horizon = cursor_xid(self._feed.cursor_now())
        records = read()
        if records:
            self._pause = self._feed.poll_min_seconds
        if horizon is not None and self._behind is not None and horizon > self._behind:
            self._behind = None
        return records

    def wait(self, at_most_seconds: float) -> None:
        if self._listener is not None and self._behind is None:
            # A notification lost with a connection (a failover) costs at most one fallback
            # period: the reader reads again then anyway.
            self._note(
                self._listener.wait(min(at_most_seconds, self._feed.listen_fallback_seconds))
            )
            return
        pause = min(at_most_seconds, self._pause)
        self._pause = min(self._pause * 2, self._feed.poll_max_seconds)
        if self._listener is not None:
            self._note(self._listener.wait(pause))
        else:
            self._stop.wait(pause)

    def _note(self, notified: int | None) -> None:
        if notified is not None and self._horizon:
            self._behind = notified if self._behind is None else max(self._behind, notified)
            self._pause = self._feed.poll_min_seconds


class OutcomeFeed:
    """The runtime's side of the outcome feed (docs/outcomes.md).

    `OutcomeFeed(database_url)` opens a small pool of its own (a context manager), or
    `OutcomeFeed(database_url, reader=...)` reads through a store you already have. The login
    needs EXECUTE on the feed's functions (the executor role has it).
    """

    def __init__(
        self,
        database_url: str,
        *,
        wake: Wake = Wake.AUTO,
        pooler: Pooler | None = None,
        reader: OutcomeReader | None = None,
        poll_min_seconds: float = 0.05,
        poll_max_seconds: float = 2.0,
        listen_fallback_seconds: float = 10.0,
        application_name: str = "approved-action-outcomes",
    ) -> None:
        if not 0 < poll_min_seconds <= poll_max_seconds:
            raise ValueError("poll_min_seconds must be positive and at most poll_max_seconds")
        if listen_fallback_seconds <= 0:
            raise ValueError("listen_fallback_seconds must be positive")
        self._url = database_url
        self._pooler = pooler_from_env() if pooler is None else pooler
        if wake is Wake.AUTO:
            wake = Wake.POLL if self._pooler is Pooler.TRANSACTION else Wake.LISTEN
        self.wake = wake
        self.poll_min_seconds = poll_min_seconds
        self.poll_max_seconds = poll_max_seconds
        self.listen_fallback_seconds = listen_fallback_seconds
        self._application_name = application_name
        self._handle: PostgresHandle | None = None
        if reader is None:
            self._handle = PostgresHandle(
                database_url,
                min_connections=0,
                max_connections=2,
                application_name=application_name,
                pooler=self._pooler,
            )
            reader = PostgresOutcomeReader(self._handle)
        self._reader = reader

    def open(self) -> None:
        if self._handle is not None:
            self._handle.open()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def listener(self) -> OutcomeListener:
        """A LISTEN session on the feed's channel (not opened)."""
        return OutcomeListener(self._url, Profile(application_name=self._application_name))

    # -- reading -----------------------------------------------------------------------------

    def read(
        self, cursor: str | None = None, *, limit: int = 100, project_id: str | None = None
    ) -> list[OutcomeRecord]:
        """At most `limit` (1-1000) records after `cursor` (None: from the beginning), in feed
        order; never one that could still be followed by a record with a lower cursor."""
        return self._reader.outcomes_after(cursor, limit, project_id)

    def cursor_now(self) -> str:
        """A cursor before everything that settles from now on."""
        return self._reader.outcome_cursor_now()

    def status(self, dispatch_id: str) -> DispatchStatus | None:
        """One dispatch now (None: no such dispatch)."""
        return self._reader.dispatch_status(dispatch_id)

    def history(self, dispatch_id: str) -> list[HistoryEntry]:
        """One dispatch's history, oldest first (empty: no such dispatch)."""
        return self._reader.dispatch_history(dispatch_id)

    # -- consumers ---------------------------------------------------------------------------

    def consumer_cursor(self, consumer: str) -> str | None:
        return self._reader.consumer_cursor(consumer)

    def save_cursor(self, consumer: str, cursor: str) -> str:
        """Store `consumer`'s cursor (registering it); it never moves back. Retention keeps
        every record a registered consumer has not passed."""
        return self._reader.save_consumer_cursor(consumer, cursor)

    def drop_consumer(self, consumer: str) -> bool:
        """Unregister `consumer`: retention stops waiting for it."""
        return self._reader.drop_consumer(consumer)

    def stream(
        self,
        cursor: str | None = None,
        *,
        stop: threading.Event | None = None,
        batch: int = 100,
        project_id: str | None = None,
    ) -> Iterator[OutcomeRecord]:
        """Every record after `cursor`, waiting for new ones, until `stop` is set. You keep
        the cursor (each record's `cursor`) wherever you like, after handling the record."""
        stop = stop or threading.Event()
        with _Pacer(self, stop, horizon=True) as pacer:
            while not stop.is_set():
                records = pacer.read(partial(self.read, cursor, limit=batch, project_id=project_id))
                if records:
                    yield from records
                    cursor = records[-1].cursor
                    continue
                pacer.wait(self.poll_max_seconds if self.wake is Wake.POLL else float("inf"))

    def follow(
        self,
        consumer: str,
        handle: Callable[[OutcomeRecord], None],
        *,
        start: Start = Start.BEGINNING,
        stop: threading.Event | None = None,
        batch: int = 100,
        project_id: str | None = None,
    ) -> None:
        """Hand every record to `handle`, from `consumer`'s stored cursor, until `stop` is set;
        the cursor is saved after each batch was handled (at least once: a crash before the
        save hands the batch again). An exception from `handle` stops following with the
        cursor where the last saved batch ended."""
        stop = stop or threading.Event()
        cursor = self.consumer_cursor(consumer)
        if cursor is None:
            cursor = "" if start is Start.BEGINNING else self.cursor_now()
        with _Pacer(self, stop, horizon=True) as pacer:
            while not stop.is_set():
                records = pacer.read(partial(self.read, cursor, limit=batch, project_id=project_id))
                if not records:
                    pacer.wait(float("inf"))
                    continue
                for record in records:
                    handle(record)
                cursor = self.save_cursor(consumer, records[-1].cursor)

    # -- one dispatch ------------------------------------------------------------------------

    def wait_for_outcome(
        self, dispatch_id: str, timeout: float, *, stop: threading.Event | None = None
    ) -> DispatchStatus:
        """The dispatch's status once it is settled (succeeded, failed or blocked), waiting at
        most `timeout` seconds; `OutcomeTimeout` (with the last status) if it is not by then,
        `NotFound` if there is no such dispatch."""
        deadline = time.monotonic() + timeout
        stop = stop or threading.Event()
        pacing: AbstractContextManager[_Pacer | None] = (
            _Pacer(self, stop, horizon=False) if timeout > 0 else nullcontext()
        )
        with pacing as pacer:
            while True:
                status = self.status(dispatch_id)
                if status is None:
                    raise NotFound(f"no dispatch {dispatch_id!r}")
                if status.settled:
                    return status
                left = deadline - time.monotonic()
                if left <= 0 or pacer is None or stop.is_set():
                    raise OutcomeTimeout(
                        f"dispatch {dispatch_id!r} is {status.state.value} after {timeout:g} s",
                        status,
                    )
                pacer.wait(left)
