"""The one connection builder: every connection the resolver opens (replicas, API, migrate,
prune, status, readiness, the executor SDK, the demo, SQL evidence providers) is made here,
with the same timeouts, keepalives and pooler rules.

Behind a transaction-pooling PgBouncer two things a plain server keeps break: a statement
psycopg prepared on one server connection is missing (or already there) on the next, and
startup `options` (`-c statement_timeout=...`) are refused or silently dropped. So with a
declared pooler nothing is prepared server-side, and the server settings are applied where the
pooler keeps them: per transaction with `SET LOCAL` (transaction pooling) or per client
session with `SET` (session pooling). Without a pooler they travel as startup `options`, which
costs no round trip.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, Self

import msgspec
import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row, tuple_row
from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from resolver.core.errors import ConfigError, settings_error
from resolver.db.dsn import libpq_dsn

Row = dict[str, Any]
Connection = psycopg.Connection[Any]

POOLER_ENV = "RESOLVER_DATABASE_POOLER"


class Pooler(StrEnum):
    """What sits between the resolver and PostgreSQL (`RESOLVER_DATABASE_POOLER`)."""

    NONE = "none"
    SESSION = "session"
    """A pooler that gives each client one server connection for its whole session."""
    TRANSACTION = "transaction"
    """A pooler that may hand every transaction to another server connection."""


def parse_pooler(value: str | None, *, name: str = POOLER_ENV) -> Pooler:
    """`none` when unset; anything but the three modes is a ConfigError naming them."""
    text = (value or "none").strip().lower()
    try:
        return Pooler(text)
    except ValueError:
        raise ConfigError(
            f"{name}={value!r} is not a pooler mode; use transaction (PgBouncer "
            "pool_mode=transaction), session, or none (a direct connection)"
        ) from None


def pooler_from_env(environ: Mapping[str, str] | None = None) -> Pooler:
    """The declared pooler, for callers handed a URL only (the executor SDK, providers)."""
    env = os.environ if environ is None else environ
    return parse_pooler(env.get(POOLER_ENV))


class ConnectionSettings(BaseSettings):
    """How every connection is made, from the same `RESOLVER_*` variables wherever it is made:
    the replicas' `Settings` hold these fields, and the executor SDK's `PostgresHandle` reads
    them alone, so an executor behind the replicas' pooler runs with their pooler mode and
    timeouts without being told twice."""

    model_config = SettingsConfigDict(env_prefix="RESOLVER_", extra="ignore", frozen=True)

    database_pooler: Pooler = Field(
        default=Pooler.NONE,
        description="transaction, session or none: what sits between the resolver and PostgreSQL",
    )
    connect_timeout_seconds: float = Field(default=5.0, gt=0)
    statement_timeout_ms: int = Field(default=10_000, ge=100)
    lock_timeout_ms: int = Field(
        default=2_000, ge=1, description="a row lock held elsewhere fails a call after this long"
    )

    @model_validator(mode="after")
    def _lock_before_statement(self) -> Self:
        if self.lock_timeout_ms >= self.statement_timeout_ms:
            raise ValueError(
                "RESOLVER_LOCK_TIMEOUT_MS must be below RESOLVER_STATEMENT_TIMEOUT_MS (a lock "
                "wait must fail as itself, typed, before the statement timeout cancels it)"
            )
        return self

    @classmethod
    def from_environment(cls) -> ConnectionSettings:
        """The settings from the environment; a bad value is one `ConfigError` naming it."""
        try:
            return cls()
        except ValidationError as exc:
            raise settings_error(exc.errors()) from None


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    """How one kind of connection is made: who it says it is, how long it waits, what the
    server applies to its statements, and what sits in between."""

    application_name: str
    connect_timeout_seconds: float = 5.0
    settings: dict[str, str | int] = msgspec.field(default_factory=dict)
    pooler: Pooler = Pooler.NONE
    read_only: bool = False
    # A peer that silently vanishes (a cut network, not a refused connection) must fail the
    # call within seconds, not after the kernel's minutes-long TCP timeouts.
    keepalives_idle_seconds: int = 10
    keepalives_interval_seconds: int = 5
    tcp_user_timeout_ms: int = 30_000

    @property
    def per_transaction(self) -> bool:
        """Settings must be repeated in every transaction (the server connection changes)."""
        return self.pooler is Pooler.TRANSACTION

    def connect_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            # libpq takes whole seconds, and 0 would mean "wait forever".
            "connect_timeout": max(1, round(self.connect_timeout_seconds)),
            # PostgreSQL keeps 63 bytes of it; cut here so the server logs no notice.
            "application_name": self.application_name[:63],
            "keepalives": 1,
            "keepalives_idle": self.keepalives_idle_seconds,
            "keepalives_interval": self.keepalives_interval_seconds,
            "keepalives_count": 3,
            "tcp_user_timeout": self.tcp_user_timeout_ms,
        }
        if self.pooler is Pooler.NONE:
            kwargs["options"] = " ".join(
                f"-c {name}={value}" for name, value in self._session_settings().items()
            )
        else:
            # psycopg prepares a statement after five executions; a pooler may run the next
            # transaction on a server connection that lacks it (or already has the name).
            kwargs["prepare_threshold"] = None
        return kwargs

    def _session_settings(self) -> dict[str, str | int]:
        extra = {"default_transaction_read_only": "on"} if self.read_only else {}
        return {**self.settings, **extra}

    def session_sql(self) -> sql.Composed | None:
        """Run once per connection, behind a session pooler (startup options are dropped)."""
        if self.pooler is not Pooler.SESSION:
            return None
        return _set_all(self._session_settings(), local=False)

    def local_sql(self) -> sql.Composed | None:
        """The settings as `SET LOCAL`s, behind a transaction pooler only (elsewhere the
        session already has them)."""
        if not self.per_transaction:
            return None
        parts: list[sql.Composable] = [
            _set_all({**self.settings, "application_name": self.application_name[:63]})
        ]
        if self.read_only:
            parts.append(sql.SQL("SET TRANSACTION READ ONLY"))
        return sql.SQL("; ").join(parts)

    def begin_sql(self) -> sql.Composed:
        """BEGIN and the `SET LOCAL`s as one simple query: the one round trip BEGIN alone
        takes."""
        local = self.local_sql()
        begin = sql.Composed([sql.SQL("BEGIN READ ONLY" if self.read_only else "BEGIN")])
        return begin if local is None else sql.SQL("; ").join([begin, local])


def _set_all(settings: Mapping[str, str | int], *, local: bool = True) -> sql.Composed:
    verb = sql.SQL("SET LOCAL" if local else "SET")
    return sql.SQL("; ").join(
        sql.SQL("{} {} = {}").format(verb, sql.Identifier(name), sql.Literal(str(value)))
        for name, value in settings.items()
    )


def connect(
    url: str, profile: Profile, *, autocommit: bool = False, dict_rows: bool = False
) -> Connection:
    """One connection, set up as `profile` says (its caller closes it)."""
    kwargs = profile.connect_kwargs()
    if dict_rows:
        kwargs["row_factory"] = dict_row
    conn: Connection = psycopg.connect(libpq_dsn(url), autocommit=autocommit, **kwargs)
    try:
        _apply_session(conn, profile)
        verify_options(conn, profile)
    except BaseException:
        conn.close()
        raise
    return conn


def verify_options(conn: Connection, profile: Profile) -> None:
    """Refuse a connection whose startup options were dropped on the way.

    A pooler told to ignore `options` (CloudNativePG's default) passes the connection
    through without them: every timeout would be silently off. Each command's first
    connection (the schema check, prune's session) asks the server what it applied.
    """
    if profile.pooler is not Pooler.NONE or not profile.settings:
        return
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(
            "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", [list(profile.settings)]
        )
        applied: dict[str, str] = dict(cur.fetchall())
    if not conn.autocommit:
        conn.rollback()
    dropped = sorted(k for k, v in profile.settings.items() if applied.get(k) != str(v))
    if dropped:
        raise ConfigError(
            f"the server did not apply {', '.join(dropped)} sent as a startup option: a "
            f"connection pooler dropped it; set {POOLER_ENV}=transaction (or session) to "
            "match its pool_mode"
        )


def _apply_session(conn: Connection, profile: Profile) -> None:
    statement = profile.session_sql()
    if statement is None:
        return
    conn.execute(statement)
    if not conn.autocommit:
        conn.commit()


@contextmanager
def transaction(conn: Connection, profile: Profile) -> Iterator[Connection]:
    """One transaction on `conn`, with the profile's settings in force whatever the pooler.

    On an autocommit connection at rest, BEGIN and the `SET LOCAL`s go as one simple query;
    otherwise psycopg's own transaction block is used (a savepoint when one is open).
    """
    if not conn.autocommit or conn.info.transaction_status is not TransactionStatus.IDLE:
        with conn.transaction():
            local = profile.local_sql()
            if local is not None:
                conn.execute(local)
            yield conn
        return
    conn.execute(profile.begin_sql(), prepare=False)
    try:
        yield conn
    except BaseException:
        # A broken connection rolls back on the server by itself; the first error says why.
        with contextlib.suppress(psycopg.Error):
            conn.rollback()
        raise
    conn.commit()


# A connection handed out moments ago answered a statement moments ago: checking it again
# would add a round trip to every transaction. One idle for longer (where a restart, failover
# or idle timeout may have closed it) is checked before reuse. A connection that breaks in
# use is discarded by the pool and the call fails as StorageUnavailable either way.
CHECK_AFTER_IDLE_SECONDS = 1.0

_HANDED_OUT_AT = "_resolver_handed_out_at"


def check_if_idle(conn: psycopg.Connection[Any]) -> None:
    """The pool's `check` callback, run on every getconn.

    The time since the previous hand-out, or since the connection was made when it was never
    handed out, bounds the idle time from above (use takes milliseconds), so this errs
    towards checking. A connection the pool made moments ago is not checked again: the
    first claim after start-up goes out without a round trip of its own before it.
    """
    now = time.monotonic()
    previous: float | None = getattr(conn, _HANDED_OUT_AT, None)
    setattr(conn, _HANDED_OUT_AT, now)
    if previous is None or now - previous > CHECK_AFTER_IDLE_SECONDS:
        psycopg_pool.ConnectionPool.check_connection(conn)


def build_pool(
    url: str,
    profile: Profile,
    *,
    min_size: int,
    max_size: int,
    autocommit: bool = False,
    configure: Callable[[psycopg.Connection[Row]], None] | None = None,
    dict_rows: bool = True,
) -> psycopg_pool.ConnectionPool[psycopg.Connection[Row]]:
    """The one place a psycopg pool is set up; the caller opens it.

    Every pool checks idle connections before reuse (`check_if_idle`) and waits for a free
    connection no longer than the connect timeout. Its connections return dict rows, unless
    they are handed to code that expects psycopg's default tuples (`dict_rows=False`: an
    executor's own mutation).
    """
    rows = {"row_factory": dict_row} if dict_rows else {}
    return psycopg_pool.ConnectionPool(
        libpq_dsn(url),
        connection_class=psycopg.Connection[Row],
        min_size=min_size,
        max_size=max_size,
        timeout=profile.connect_timeout_seconds,
        open=False,
        kwargs={**profile.connect_kwargs(), **rows, "autocommit": autocommit},
        configure=_configured(profile, configure),
        check=check_if_idle,
    )


def _configured(
    profile: Profile, configure: Callable[[psycopg.Connection[Row]], None] | None
) -> Callable[[psycopg.Connection[Row]], None]:
    """The pool's `configure` callback: the session settings a session pooler needs, the
    caller's own, then the time the connection was made (it answered the server's handshake
    then), from which `check_if_idle` counts."""

    def setup(conn: psycopg.Connection[Row]) -> None:
        _apply_session(conn, profile)
        if configure is not None:
            configure(conn)
        setattr(conn, _HANDED_OUT_AT, time.monotonic())

    return setup
