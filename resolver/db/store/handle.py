"""The one database handle every port store runs on: the pool, its transactions, and the
clock override; driver errors stop at this boundary."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self, TypeVar

import psycopg
import psycopg_pool

from resolver.db.connect import (
    ConnectionSettings,
    Pooler,
    Profile,
    build_pool,
    transaction,
    verify_options,
)
from resolver.db.dsn import redact
from resolver.db.errors import storage_error
from resolver.db.statements import statement

Row = dict[str, Any]
T = TypeVar("T")


class PostgresHandle:
    """One connection pool; every port store's call is one short transaction on it.

    `at(now_ms)` is a view of the same pool whose calls pass `now_ms` to the protocol
    functions in place of the database clock. Only the table owner may (tests, tools): a pod
    role's override is refused with RS005, and production never sets one.
    """

    def __init__(
        self,
        database_url: str,
        *,
        min_connections: int = 1,
        max_connections: int = 4,
        connect_timeout_seconds: float | None = None,
        statement_timeout_ms: int | None = None,
        lock_timeout_ms: int | None = None,
        application_name: str = "approved-action-resolver",
        pooler: Pooler | None = None,
    ) -> None:
        """What is not given comes from the replicas' own settings (`ConnectionSettings`:
        RESOLVER_DATABASE_POOLER, RESOLVER_CONNECT_TIMEOUT_SECONDS,
        RESOLVER_STATEMENT_TIMEOUT_MS, RESOLVER_LOCK_TIMEOUT_MS, and their defaults)."""
        env = ConnectionSettings.from_environment()
        connect_timeout_seconds = _given(connect_timeout_seconds, env.connect_timeout_seconds)
        statement_timeout_ms = _given(statement_timeout_ms, env.statement_timeout_ms)
        lock_timeout_ms = _given(lock_timeout_ms, env.lock_timeout_ms)
        pooler = _given(pooler, env.database_pooler)
        self._url = redact(database_url)
        self._profile = Profile(
            application_name=application_name,
            connect_timeout_seconds=connect_timeout_seconds,
            # A row lock held elsewhere (an operator's open transaction) fails the call fast
            # and typed (LockTimeout) instead of holding a pool connection until the
            # statement timeout.
            # No parallel workers: every statement here is an index walk bounded by a page or
            # a cap (the console's counts stop at theirs), and a worker's start costs more
            # than the walk; the planner still picks one for a count at the cap.
            settings={
                "statement_timeout": statement_timeout_ms,
                "lock_timeout": lock_timeout_ms,
                "max_parallel_workers_per_gather": 0,
            },
            pooler=pooler,
        )
        # Behind a transaction pooler a lone statement still needs its transaction: the
        # settings are `SET LOCAL` in it.
        self._single_statements = not self._profile.per_transaction
        self._pool = build_pool(
            database_url,
            self._profile,
            min_size=min_connections,
            max_size=max_connections,
            # Transactions are explicit (`transaction`); a lone statement is its own.
            autocommit=True,
        )
        self._now_ms: int | None = None
        # Whether a connection of this pool showed the server applied the settings sent as
        # startup options (a pooler nobody declared drops them): asked once, by the first call.
        self._options_verified = self._profile.pooler is not Pooler.NONE

    @property
    def now_ms(self) -> int | None:
        """The clock override the calls pass (`p_now_ms`); None: the database clock."""
        return self._now_ms

    def at(self, now_ms: int) -> PostgresHandle:
        """A view of this handle (the same pool) whose calls run at `now_ms`."""
        view = copy.copy(self)
        view._now_ms = now_ms
        return view

    def open(self) -> None:
        # wait=False: a dead database must not block start-up; the first call reports it.
        self._pool.open(wait=False)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Self:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, *, single_statement: bool = False) -> Iterator[psycopg.Connection[Row]]:
        """One transaction. A single statement needs no BEGIN/COMMIT round trips: on these
        autocommit connections it is a transaction of its own."""
        try:
            with self._pool.connection() as conn:
                if not self._options_verified:
                    verify_options(conn, self._profile)
                    self._options_verified = True
                if single_statement and self._single_statements:
                    yield conn
                else:
                    with transaction(conn, self._profile):
                        yield conn
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            typed = storage_error(exc, self._url)
            if typed is None:
                raise
            raise typed from exc

    def all(self, name: str, params: dict[str, Any]) -> list[Row]:
        with self.transaction() as conn:
            return conn.execute(statement(name), params).fetchall()

    def one(self, name: str, params: dict[str, Any]) -> Row | None:
        rows = self.all(name, params)
        return rows[0] if rows else None

    def call(self, name: str, params: dict[str, Any]) -> Row | None:
        """One statement that is a whole transaction by itself (a protocol function: its
        fences and writes are atomic in the call): one round trip, no BEGIN or COMMIT of its
        own where no pooler needs them."""
        with self.transaction(single_statement=True) as conn:
            return conn.execute(statement(name), params).fetchone()

    def filtered(self, name: str, params: dict[str, Any]) -> list[Row]:
        """A statement with optional filters (`%(x)s IS NULL OR ...`) and a constant sort,
        never prepared: its plan is made for these values, where the folded conditions leave
        the list's own index walk. A prepared statement's generic plan keeps every branch."""
        with self.transaction() as conn:
            return conn.execute(statement(name), params, prepare=False).fetchall()

    def ping(self) -> None:
        self.all("ping", {})


def _given(value: T | None, default: T) -> T:
    return default if value is None else value


class PortStore:
    """What every port's store shares: the handle it runs on, and `at` for a view of the
    store on the same handle at an overridden clock (the table owner only)."""

    def __init__(self, handle: PostgresHandle) -> None:
        self._db = handle

    @property
    def handle(self) -> PostgresHandle:
        return self._db

    def at(self, now_ms: int) -> Self:
        """This store over `handle.at(now_ms)`: `store.at(t).claim_due_page(...)`."""
        return type(self)(self._db.at(now_ms))

    def __enter__(self) -> Self:
        self._db.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()
