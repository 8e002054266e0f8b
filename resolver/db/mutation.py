"""The executor SDK's mutation transaction: open it, commit it, and judge a lost COMMIT reply.

A COMMIT whose reply never arrives may have committed or not. The receipt is written in the
same transaction as the mutation, so the receipt row answers the question, but only once
the old session can no longer commit: until then a re-read may see "no receipt" just before
the commit lands. So the old backend is terminated (if still there) and waited out first.
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime
from enum import StrEnum
from typing import Any

import psycopg

from resolver.db.connect import Pooler, Profile, pooler_from_env
from resolver.db.connect import connect as _connect
from resolver.db.protocol import protocol_error
from resolver.db.statements import statement

Connection = psycopg.Connection[Any]

_POLL_SECONDS = 0.05


class CommitVerdict(StrEnum):
    COMMITTED = "committed"
    NOT_COMMITTED = "not_committed"
    UNKNOWN = "unknown"


class SessionMark:
    """Which server session a transaction ran in: its pid and start time (a pid is reused)."""

    __slots__ = ("backend_start", "pid")

    def __init__(self, pid: int, backend_start: datetime) -> None:
        self.pid = pid
        self.backend_start = backend_start


def profile(
    connect_timeout_seconds: float, pooler: Pooler | None = None, *, judge: bool = False
) -> Profile:
    """The executor's connections; the pooler defaults to RESOLVER_DATABASE_POOLER."""
    return Profile(
        application_name="approved-action-executor" + (":judge" if judge else ""),
        connect_timeout_seconds=connect_timeout_seconds,
        pooler=pooler_from_env() if pooler is None else pooler,
    )


def connect(
    database_url: str, *, connect_timeout_seconds: float, pooler: Pooler | None = None
) -> Connection:
    """A connection with autocommit off: its first statement opens the mutation's transaction."""
    return _connect(database_url, profile(connect_timeout_seconds, pooler), autocommit=False)


def begin(conn: Connection) -> SessionMark:
    """Open the transaction (if the caller has not) and note the session it runs in."""
    if conn.autocommit:
        raise ValueError(
            "the mutation's connection must have autocommit off: the mutation, the receipt "
            "and the COMMIT must be one transaction"
        )
    row = conn.execute(statement("session_mark")).fetchone()
    assert row is not None  # a session always sees its own activity row
    return SessionMark(row[0], row[1])


def commit(conn: Connection) -> bool:
    """COMMIT. True when the server answered; False when the reply was lost (outcome unknown).

    A refusal the server did answer means the transaction rolled back. A protocol refusal
    (the receipt's lease checked again at COMMIT: `LeaseLost` when it ended after the receipt
    was written) is raised typed, like the same refusal from a protocol function; any other
    (a serialization failure) propagates as the driver's error.
    """
    try:
        conn.commit()
    except (psycopg.OperationalError, psycopg.InterfaceError):
        return False
    except psycopg.Error as exc:
        typed = protocol_error(exc)
        if typed is None:
            raise
        raise typed from exc
    return True


def rollback_quietly(conn: Connection) -> None:
    # The connection may already be gone; a lost rollback still rolls back on the server.
    with contextlib.suppress(psycopg.Error):
        conn.rollback()


def judge_lost_commit(
    database_url: str,
    session: SessionMark,
    dispatch_id: str,
    receipt_sig: str,
    *,
    timeout_seconds: float,
) -> CommitVerdict:
    """Whether the transaction of `session` committed its receipt (and so its mutation)."""
    deadline = time.monotonic() + timeout_seconds
    try:
        with _connect(database_url, profile(timeout_seconds, judge=True), autocommit=True) as conn:
            if not _session_gone(conn, session, deadline):
                return CommitVerdict.UNKNOWN
            row = conn.execute(
                statement("receipt_signature"), {"dispatch_id": dispatch_id}
            ).fetchone()
    except psycopg.Error:
        return CommitVerdict.UNKNOWN
    if row is not None and row[0] == receipt_sig:
        return CommitVerdict.COMMITTED
    return CommitVerdict.NOT_COMMITTED


def _session_gone(conn: Connection, session: SessionMark, deadline: float) -> bool:
    params = {"pid": session.pid, "backend_start": session.backend_start}
    # Another role's session may not be signalled: then wait for it to end on its own.
    with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
        conn.execute(statement("session_terminate"), params)
    while conn.execute(statement("session_alive"), params).fetchone() is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_SECONDS)
    return True
