"""A small connection pool whose every transaction is READ ONLY, for SQL evidence providers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, LiteralString

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from resolver.core.errors import SourceMisconfigured, StorageUnavailable
from resolver.db.dsn import libpq_dsn, redact
from resolver.db.pooling import check_if_idle

Row = dict[str, Any]


class ReadOnlyDatabase:
    """Provider reads: a provider holding this cannot write, whatever SQL it sends.

    Two locks against accidental writes: the session default (`default_transaction_read_only`)
    and psycopg's `read_only` (BEGIN READ ONLY). Code that sends `SET TRANSACTION READ WRITE`
    first could lift both, so deployments add the third lock from docs/providers.md: a role
    with SELECT only.
    """

    def __init__(
        self,
        database_url: str,
        *,
        timeout_seconds: float = 5.0,
        max_connections: int = 2,
        application_name: str = "resolver-provider",
    ) -> None:
        self._url = redact(database_url)
        self._timeout_seconds = timeout_seconds
        statement_timeout_ms = max(1, int(timeout_seconds * 1000))
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Row]] = (
            psycopg_pool.ConnectionPool(
                libpq_dsn(database_url),
                connection_class=psycopg.Connection[Row],
                min_size=0,
                max_size=max_connections,
                timeout=timeout_seconds,
                open=False,
                kwargs={
                    "connect_timeout": max(1, int(timeout_seconds)),
                    # A silent network (no RST, no FIN) must not hold a read past the
                    # timeout either: the kernel gives up on unacknowledged data after
                    # tcp_user_timeout, and keepalives notice a peer that went away.
                    "tcp_user_timeout": max(1, int(timeout_seconds * 1000)),
                    "keepalives": 1,
                    "keepalives_idle": max(1, int(timeout_seconds)),
                    "keepalives_interval": 1,
                    "keepalives_count": 3,
                    "application_name": application_name[:63],
                    "options": (
                        "-c default_transaction_read_only=on "
                        f"-c statement_timeout={statement_timeout_ms}"
                    ),
                    "row_factory": dict_row,
                },
                configure=_read_only,
                check=check_if_idle,
            )
        )

    def open(self) -> None:
        # wait=False: a dead evidence source must not block start-up; inspect reports it.
        self._pool.open(wait=False)

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Row]]:
        """One READ ONLY transaction; a driver failure is `StorageUnavailable` (transient) or
        `SourceMisconfigured` (a GRANT, query or schema problem), see `is_transient`."""
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise _classified(self._url, exc) from exc

    def fetch(self, query: LiteralString, params: Mapping[str, Any]) -> list[Row]:
        """One statement, one round trip: on these autocommit connections it is its own
        transaction, and the session's `default_transaction_read_only` makes it READ ONLY."""
        try:
            with self._pool.connection() as conn:
                return conn.execute(query, dict(params)).fetchall()
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise _classified(self._url, exc) from exc


def _read_only(conn: psycopg.Connection[Row]) -> None:
    # Explicit transactions (`transaction()`) begin READ ONLY; a lone statement (`fetch`)
    # runs in autocommit, read-only by the session default.
    conn.read_only = True
    conn.autocommit = True


# SQLSTATE classes of failures that heal by themselves: connection exceptions (08),
# transaction rollbacks such as serialization failures (40), insufficient resources (53),
# lock or object state (55), operator intervention: admin or crash shutdown, cannot connect
# now, statement timeout (57), system errors (58) and internal errors (XX).
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "55", "57", "58", "XX"})


def is_transient(exc: Exception) -> bool:
    """Transient by SQLSTATE class, never by message text.

    An error the server answered with any other class (42 syntax or access rule, such as a
    missing GRANT or an undefined table; 3D/3F missing database or schema; 22 data; 25 a
    write refused in a read-only transaction; ...) fails the same way on every retry: a
    configuration error. Without a SQLSTATE (a refused or reset connection, a pool timeout,
    a failed connection attempt, for which libpq reports no code) the source is unreachable,
    which is an outage.
    """
    sqlstate = getattr(exc, "sqlstate", None)
    return sqlstate is None or sqlstate[:2] in TRANSIENT_SQLSTATE_CLASSES


def _classified(url: str, exc: Exception) -> StorageUnavailable | SourceMisconfigured:
    # Nothing moved either way: providers only read. The message names the class, not the
    # server's text, which may quote the query or a role name.
    if is_transient(exc):
        return StorageUnavailable(f"evidence source {url} failed: {type(exc).__name__}")
    sqlstate = getattr(exc, "sqlstate", None)
    return SourceMisconfigured(
        f"evidence source {url} refused the query: {type(exc).__name__} (SQLSTATE {sqlstate})",
        cause=f"sqlstate_{sqlstate.lower()}" if sqlstate else None,
    )
