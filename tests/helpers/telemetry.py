"""Helpers for the observability tests: real-clock backlogs, free ports, bounded polling."""

from __future__ import annotations

import itertools
import os
import random
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


# Ports for servers that cannot report theirs, below Linux's ephemeral range (32768 and up),
# where the kernel never hands one out to a client connection or a bind to port 0 between our
# asking and the server binding it; each pytest-xdist worker has a slice of its own.
PORTS_FROM, PORTS_PER_WORKER = 20_000, 1_000
_next_port = itertools.count(random.randrange(PORTS_PER_WORKER))


def free_port() -> int:
    """A loopback port free at the time of asking, in this worker's slice; successive calls
    walk the slice, so a port just released by a stopped server is not handed out again."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    base = PORTS_FROM + (int(worker) % 12) * PORTS_PER_WORKER if worker.isdigit() else PORTS_FROM
    for _ in range(PORTS_PER_WORKER):
        port = base + next(_next_port) % PORTS_PER_WORKER
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken (or lingering after a stop): the next one
            return port
    raise AssertionError(f"no free loopback port in {base}..{base + PORTS_PER_WORKER - 1}")


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
