"""Connection pools: the one builder, and a `check` that costs a round trip only when a
connection may have gone stale."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from resolver.db.dsn import libpq_dsn

Row = dict[str, Any]

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
    database_url: str,
    *,
    min_size: int,
    max_size: int,
    timeout_seconds: float,
    application_name: str,
    settings: Mapping[str, str | int],
    keepalives_idle_seconds: int,
    keepalives_interval_seconds: int,
    tcp_user_timeout_ms: int,
    autocommit: bool = False,
    configure: Callable[[psycopg.Connection[Row]], None] | None = None,
) -> psycopg_pool.ConnectionPool[psycopg.Connection[Row]]:
    """The one place a psycopg pool is set up; the caller opens it.

    Every pool checks idle connections before reuse (`check_if_idle`), returns dict rows,
    sends its server `settings` as `-c` options at connect time (so no SET round trip per
    checkout), and bounds a silent peer (no RST, no FIN) by keepalives and tcp_user_timeout
    rather than the kernel's minutes-long defaults.
    """
    options = " ".join(f"-c {name}={value}" for name, value in settings.items())
    return psycopg_pool.ConnectionPool(
        libpq_dsn(database_url),
        connection_class=psycopg.Connection[Row],
        min_size=min_size,
        max_size=max_size,
        timeout=timeout_seconds,
        open=False,
        kwargs={
            "connect_timeout": max(1, int(timeout_seconds)),
            # PostgreSQL keeps 63 bytes of it; cut here so the server logs no notice.
            "application_name": application_name[:63],
            "options": options,
            "row_factory": dict_row,
            "autocommit": autocommit,
            "keepalives": 1,
            "keepalives_idle": keepalives_idle_seconds,
            "keepalives_interval": keepalives_interval_seconds,
            "keepalives_count": 3,
            "tcp_user_timeout": tcp_user_timeout_ms,
        },
        configure=_stamped(configure),
        check=check_if_idle,
    )


def _stamped(
    configure: Callable[[psycopg.Connection[Row]], None] | None,
) -> Callable[[psycopg.Connection[Row]], None]:
    """The pool's `configure` callback: the caller's, then the time the connection was made
    (it answered the server's handshake then), from which `check_if_idle` counts."""

    def setup(conn: psycopg.Connection[Row]) -> None:
        if configure is not None:
            configure(conn)
        setattr(conn, _HANDED_OUT_AT, time.monotonic())

    return setup
