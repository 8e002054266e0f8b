"""A small connection pool whose every transaction is READ ONLY, for SQL evidence providers
(`resolver.evidence` exports it)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, LiteralString

import psycopg
import psycopg_pool

from resolver.core.declarations import Reason
from resolver.core.errors import SourceMisconfigured
from resolver.db.connect import Pooler, Profile, build_pool, transaction
from resolver.db.dsn import parse, redact
from resolver.db.errors import is_transient, source_error

Row = dict[str, Any]

__all__ = ["SQL_SOURCE_REASONS", "ReadOnlyDatabase", "Row", "is_transient"]


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
        pooler: Pooler = Pooler.NONE,
    ) -> None:
        self._url = redact(database_url)
        self._refusal = _refusal(database_url)
        self._timeout_seconds = timeout_seconds
        self._profile = Profile(
            application_name=application_name,
            connect_timeout_seconds=timeout_seconds,
            settings={"statement_timeout": max(1, int(timeout_seconds * 1000))},
            pooler=pooler,
            read_only=True,
            # A silent network (no RST, no FIN) must not hold a read past the timeout
            # either: the kernel gives up on unacknowledged data after tcp_user_timeout,
            # and keepalives notice a peer that went away.
            keepalives_idle_seconds=max(1, int(timeout_seconds)),
            keepalives_interval_seconds=1,
            tcp_user_timeout_ms=max(1, int(timeout_seconds * 1000)),
        )
        self._pool = build_pool(
            database_url,
            self._profile,
            min_size=0,
            max_size=max_connections,
            autocommit=True,
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
        self._check_usable()
        try:
            with self._pool.connection() as conn, transaction(conn, self._profile):
                yield conn
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise source_error(self._url, exc) from exc

    def fetch(self, query: LiteralString, params: Mapping[str, Any]) -> list[Row]:
        """One statement, one round trip: on these autocommit connections it is its own
        transaction, and the session's `default_transaction_read_only` makes it READ ONLY.
        Behind a transaction pooler it gets a READ ONLY transaction with its `SET LOCAL`s."""
        self._check_usable()
        if self._profile.per_transaction:
            with self.transaction() as conn:
                return conn.execute(query, dict(params)).fetchall()
        try:
            with self._pool.connection() as conn:
                return conn.execute(query, dict(params)).fetchall()
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise source_error(self._url, exc) from exc

    def fetch_configured(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        """`fetch` for a query an operator configured (a provider's settings), not one the
        provider's code spells: trusted text, still bound to parameters, still READ ONLY."""
        return self.fetch(query, params)

    def _check_usable(self) -> None:
        if self._refusal is not None:
            raise SourceMisconfigured(
                f"evidence source {self._url}: {self._refusal}", cause=_READ_WRITE_CAUSE
            )


_READ_WRITE_CAUSE = "target_session_attrs_read_write"
# What a SQL provider's source refusals mean to a person, for its declaration. Other SQLSTATEs
# pass through as `sqlstate_<code>` (their shape is bounded) and show as the code.
SQL_SOURCE_REASONS = (
    Reason("sqlstate_42501", "the evidence source refused access (permission denied)"),
    Reason("sqlstate_42p01", "the evidence table does not exist: is the database migrated"),
    Reason("sqlstate_28p01", "the evidence source refused the login (wrong password)"),
    Reason("sqlstate_3d000", "the evidence database does not exist"),
    Reason(
        _READ_WRITE_CAUSE,
        "the evidence URL asks for a read-write session, which a reader never needs",
    ),
)


def _refusal(database_url: str) -> str | None:
    """Why no connection to `database_url` can ever serve a read-only pool, or None.

    libpq's `target_session_attrs=read-write` refuses a session whose default is read only,
    and every session of this pool is (its own setting, and the evidence reader role's): the
    pool would wait out every call as an outage that no failover ends. Told from the URL, not
    from libpq's refusal, which carries no SQLSTATE.
    """
    if parse(database_url).get("target_session_attrs") != "read-write":
        return None
    return (
        "target_session_attrs=read-write refuses every read-only session, and this pool's "
        "sessions are read only; use target_session_attrs=primary to follow the primary "
        "through a failover (or prefer-standby / any to read from a standby)"
    )
