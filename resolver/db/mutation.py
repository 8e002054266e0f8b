"""The executor SDK's mutation transaction: its connections, its COMMIT, and the judgement of
a lost COMMIT reply.

A COMMIT whose reply never arrives may have committed or not. The receipt is written in the
same transaction as the mutation, so the receipt row answers the question, but only once
the old transaction can no longer commit: until then a re-read may see "no receipt" just
before the commit lands. The receipt's own write names its transaction (`pg_current_xact_id`,
a 64-bit id the server never reuses, which also holds behind a transaction pooler): the
backend still running it is terminated (if any) and the transaction waited out first. So a
mutation costs no session lookup of its own, only the answer of a statement it runs anyway.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

import psycopg

from resolver.db.connect import Pooler, Profile, build_pool, pooler_from_env
from resolver.db.connect import connect as _connect
from resolver.db.protocol import protocol_error
from resolver.db.statements import statement

Connection = psycopg.Connection[Any]

_POLL_SECONDS = 0.05
# An executor process runs a few side effects at once; more wait for a free connection
# (no longer than the connect timeout).
POOL_MAX_CONNECTIONS = 8


class CommitVerdict(StrEnum):
    COMMITTED = "committed"
    NOT_COMMITTED = "not_committed"
    UNKNOWN = "unknown"


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


class MutationPool:
    """The connections an executor process runs its mutations on, reused from one side
    effect to the next: autocommit off, psycopg's default rows, no statement settings.

    Opened on the first use (an executor that brings its own connections never opens it);
    a connection whose COMMIT reply was lost is broken, and the pool discards it.
    """

    def __init__(
        self,
        database_url: str,
        *,
        connect_timeout_seconds: float,
        max_connections: int = POOL_MAX_CONNECTIONS,
        pooler: Pooler | None = None,
    ) -> None:
        self._pool = build_pool(
            database_url,
            profile(connect_timeout_seconds, pooler),
            min_size=1,
            max_size=max_connections,
            autocommit=False,
            dict_rows=False,
        )
        self._lock = threading.Lock()
        self._opened = False

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection]:
        with self._lock:
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True
        with self._pool.connection() as conn:
            yield conn

    def close(self) -> None:
        with self._lock:
            if self._opened:
                self._pool.close()
                self._opened = False


def begin(conn: Connection) -> None:
    """Check the connection can hold the mutation's transaction (its first statement opens
    it)."""
    if conn.autocommit:
        raise ValueError(
            "the mutation's connection must have autocommit off: the mutation, the receipt "
            "and the COMMIT must be one transaction"
        )


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
    xact_id: str,
    dispatch_id: str,
    receipt_sig: str,
    *,
    timeout_seconds: float,
) -> CommitVerdict:
    """Whether transaction `xact_id` (the one that wrote the receipt) committed its receipt,
    and so its mutation."""
    deadline = time.monotonic() + timeout_seconds
    try:
        with _connect(database_url, profile(timeout_seconds, judge=True), autocommit=True) as conn:
            if not _transaction_over(conn, xact_id, deadline):
                return CommitVerdict.UNKNOWN
            row = conn.execute(
                statement("receipt_signature"), {"dispatch_id": dispatch_id}
            ).fetchone()
    except psycopg.Error:
        return CommitVerdict.UNKNOWN
    if row is not None and row[0] == receipt_sig:
        return CommitVerdict.COMMITTED
    return CommitVerdict.NOT_COMMITTED


def _transaction_over(conn: Connection, xact_id: str, deadline: float) -> bool:
    params = {"xact_id": xact_id}
    # Another role's session may not be signalled: then wait for it to end on its own.
    with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
        conn.execute(statement("transaction_terminate"), params)
    while True:
        row = conn.execute(statement("transaction_status"), params).fetchone()
        if row is None or row[0] != "in progress":
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_SECONDS)
