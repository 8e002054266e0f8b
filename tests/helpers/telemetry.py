"""Helpers for the observability tests: real-clock backlogs, free ports, bounded polling."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

from resolver.core.domain import ExecutionLease
from tests.helpers.database import EXEC_LEASE_MS, SQL, World

T = TypeVar("T")


def db_now_ms(sql: SQL) -> int:
    return int(sql.one("SELECT resolver_now_ms(NULL) AS ms")["ms"])


def crashed_ago(
    world: World, sql: SQL, seconds: float, count: int = 1, action_type: str = "test.action"
) -> list[ExecutionLease]:
    """Executions whose lease expired `seconds` ago on the database clock: due since then.

    A subprocess or a scrape uses the real database clock, so the backlog must be aged on
    it rather than at the fixed test instant T0.
    """
    started_at = db_now_ms(sql) - int(seconds * 1000) - EXEC_LEASE_MS
    return [world.started(action_type, now_ms=started_at) for _ in range(count)]


def free_port() -> int:
    """A loopback port free at the time of asking (for servers that cannot report theirs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(
    what: str, probe: Callable[[], T | None], *, timeout_seconds: float, every: float = 0.1
) -> T:
    """Poll `probe` until it returns a value (not None), with a hard deadline."""
    deadline = time.monotonic() + timeout_seconds
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = probe()
        except (OSError, ValueError, KeyError) as exc:  # server not up yet, partial answer
            last_error = exc
            value = None
        if value is not None:
            return value
        time.sleep(every)  # the poll interval, not a stand-in for a signal: probe decides
    raise AssertionError(f"timed out after {timeout_seconds}s waiting for {what}: {last_error!r}")
