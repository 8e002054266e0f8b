"""The outcome feed's port: records after a cursor, consumers' cursors, one dispatch's status
and history, each one call of the feed's SQL functions; and the LISTEN connection that wakes a
waiting reader when a settling transaction commits."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import psycopg

from resolver.core.domain import (
    ControlStatus,
    DispatchState,
    DispatchStatus,
    HistoryEntry,
    OutcomeKind,
    OutcomeRecord,
    SettledBy,
)
from resolver.db.connect import Profile, connect
from resolver.db.dsn import redact
from resolver.db.errors import storage_error
from resolver.db.statements import statement
from resolver.db.store.handle import PortStore, Row
from resolver.db.store.rows import enums

# The channel a settling commit notifies (resolver_outcomes_notify() in the schema).
OUTCOME_CHANNEL = "resolver_outcomes"


def _tuple(row: Row, column: str) -> None:
    if row[column] is not None:
        row[column] = tuple(row[column])


def record_of(row: Row) -> OutcomeRecord:
    enums(row, kind=OutcomeKind, state=DispatchState, settled_by=SettledBy)
    _tuple(row, "actors")
    return OutcomeRecord(**row)


class PostgresOutcomeReader(PortStore):
    """What a runtime reads after the resolver: the feed and one dispatch's state."""

    def outcomes_after(
        self, cursor: str | None, limit: int, project_id: str | None = None
    ) -> list[OutcomeRecord]:
        params = {"cursor": cursor, "limit": limit, "project_id": project_id}
        return [record_of(row) for row in self._db.all("outcomes_after", params)]

    def outcome_cursor_now(self) -> str:
        row = self._db.one("outcome_cursor_now", {})
        assert row is not None
        return str(row["cursor"])

    def consumer_cursor(self, consumer: str) -> str | None:
        row = self._db.one("outcome_consumer_cursor", {"consumer": consumer})
        return None if row is None or row["cursor"] is None else str(row["cursor"])

    def save_consumer_cursor(self, consumer: str, cursor: str) -> str:
        row = self._db.one("outcome_consumer_save", {"consumer": consumer, "cursor": cursor})
        assert row is not None
        return str(row["cursor"])

    def drop_consumer(self, consumer: str) -> bool:
        row = self._db.one("outcome_consumer_drop", {"consumer": consumer})
        return bool(row and row["dropped"])

    def dispatch_status(self, dispatch_id: str) -> DispatchStatus | None:
        row = self._db.one("dispatch_status", {"dispatch_id": dispatch_id})
        if row is None:
            return None
        enums(row, state=DispatchState, settled_by=SettledBy, control_status=ControlStatus)
        _tuple(row, "actors")
        return DispatchStatus(**row)

    def dispatch_history(self, dispatch_id: str) -> list[HistoryEntry]:
        entries = []
        for row in self._db.all("dispatch_history", {"dispatch_id": dispatch_id}):
            enums(row, state=DispatchState, settled_by=SettledBy)
            _tuple(row, "actors")
            entries.append(HistoryEntry(**row))
        return entries


def _xid(payload: str) -> int:
    return int(payload) if payload.isdigit() else 0


def cursor_xid(cursor: str) -> int:
    """The transaction id part of a cursor (`xid:seq`), as the feed hands it out."""
    return int(cursor.partition(":")[0] or 0)


LISTEN_RENEW_SECONDS = 20.0
"""How often a listener renews its registration, which lasts a minute (resolver_outcome_listen):
settling commits notify only while one is registered."""


class OutcomeListener:
    """One session that LISTENs on the feed's channel: `wait` returns when a settling
    transaction committed since the last wait (or at the timeout), with its id.

    The session registers as a listener (settling commits notify only while one is), and
    renews that every `LISTEN_RENEW_SECONDS` from `wait`; each registration answers like a
    notification of everything before it, since a commit that looked for listeners before the
    registration committed notified nobody. LISTEN needs a session of its own: behind a
    transaction-pooling PgBouncer the next transaction may run on another server connection,
    and notifications would go to whichever client holds the one that listened. There the
    feed polls instead (docs/outcomes.md).
    """

    def __init__(
        self,
        database_url: str,
        profile: Profile,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = database_url
        self._profile = profile
        self._clock = clock
        self._conn: psycopg.Connection[Any] | None = None
        self._registered_at = 0.0

    def open(self) -> int:
        """Connect, LISTEN and register. A notification sent from here on is kept until
        `wait`. Answers the next transaction id at that moment: a commit below it may have gone
        unnotified."""
        try:
            conn = self._conn = connect(self._url, self._profile, autocommit=True)
            conn.execute(f"LISTEN {OUTCOME_CHANNEL}")
            return self._register(conn)
        except psycopg.Error as exc:
            self.close()
            raise self._typed(exc) from exc

    def _register(self, conn: psycopg.Connection[Any]) -> int:
        """Registers (or renews) this session, then, in a statement of its own after that
        commit, reads the next transaction id."""
        conn.execute(statement("outcome_listen"))
        self._registered_at = self._clock()
        row = conn.execute(statement("outcome_listen_started")).fetchone()
        assert row is not None
        return int(row[0])

    def wait(self, timeout_seconds: float) -> int | None:
        """The highest transaction id notified within the timeout (None: nothing arrived);
        drains every notification already there. A payload that is not an id counts as 0.
        When the registration is due for renewal, renews it and answers at once with the id
        below the next one (as if every commit before it had notified)."""
        conn = self._conn
        if conn is None:
            raise RuntimeError("OutcomeListener.wait before open")
        try:
            if self._clock() - self._registered_at >= LISTEN_RENEW_SECONDS:
                return self._register(conn) - 1
            notified: int | None = None
            for note in conn.notifies(timeout=max(timeout_seconds, 0.0), stop_after=1):
                notified = _xid(note.payload)
            if notified is not None:
                # Several commits may have notified meanwhile: one read covers them all.
                for note in conn.notifies(timeout=0.0):
                    notified = max(notified, _xid(note.payload))
            return notified
        except psycopg.Error as exc:
            self.close()
            raise self._typed(exc) from exc

    def close(self) -> None:
        """Ends the registration (a connection that is already lost leaves it to lapse) and
        the session."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if not conn.closed:
                conn.execute(statement("outcome_unlisten"))
        except psycopg.Error:
            pass  # the registration lapses within a minute by itself
        finally:
            conn.close()

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _typed(self, exc: psycopg.Error) -> Exception:
        typed = storage_error(exc, redact(self._url))
        return typed if typed is not None else exc
