"""Start-up: wait for the database with capped exponential backoff instead of exiting.

A pod that starts during a database outage would otherwise crash-loop while the replicas
already running ride the same outage out.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from resolver.core.errors import SchemaNotReady, StorageUnavailable

BASE_DELAY_SECONDS = 0.5


def wait_until_ready(
    check: Callable[[], None],
    *,
    limit_seconds: float,
    max_delay_seconds: float,
    sleep: Callable[[float], bool],
    on_retry: Callable[[BaseException, float], None] = lambda _exc, _delay: None,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Call `check` until it passes (True) or `sleep` reports a stop request (False).

    A database that is unreachable or not yet migrated (a migration job may be running) is
    retried; past `limit_seconds` the last error is raised. `sleep(seconds)` returns True
    when it was interrupted by a stop request.
    """
    deadline = clock() + limit_seconds
    delay = BASE_DELAY_SECONDS
    while True:
        try:
            check()
        except (StorageUnavailable, SchemaNotReady) as exc:
            remaining = deadline - clock()
            if remaining <= 0:
                raise
            wait = min(delay, remaining, max_delay_seconds)
            on_retry(exc, wait)
            if sleep(wait):
                return False
            delay = min(delay * 2, max_delay_seconds)
        else:
            return True
