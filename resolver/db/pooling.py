"""A pool `check` that costs a round trip only when a connection may have gone stale."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import psycopg_pool

# A connection handed out moments ago answered a statement moments ago: checking it again
# would add a round trip to every transaction. One idle for longer (where a restart, failover
# or idle timeout may have closed it) is checked before reuse. A connection that breaks in
# use is discarded by the pool and the call fails as StorageUnavailable either way.
CHECK_AFTER_IDLE_SECONDS = 1.0

_HANDED_OUT_AT = "_resolver_handed_out_at"


def check_if_idle(conn: psycopg.Connection[Any]) -> None:
    """The pool's `check` callback, run on every getconn.

    The time since the previous hand-out bounds the idle time from above (use takes
    milliseconds), so this errs towards checking.
    """
    now = time.monotonic()
    previous: float | None = getattr(conn, _HANDED_OUT_AT, None)
    setattr(conn, _HANDED_OUT_AT, now)
    if previous is None or now - previous > CHECK_AFTER_IDLE_SECONDS:
        psycopg_pool.ConnectionPool.check_connection(conn)
