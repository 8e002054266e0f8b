"""The commands' lifecycle: waiting for the database at start-up, and the stop signals.

Start-up waits for a reachable, migrated database with capped exponential backoff instead of
exiting: a pod that starts during a database outage would otherwise crash-loop while the
replicas already running ride the same outage out.

Stop signals are blocked in every thread and taken synchronously by `sigwait` in the main
thread (`resolver run`); the live demo, whose replicas are processes of their own, turns
them into an event instead.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from resolver.app.config import Settings
from resolver.core.errors import ResolverError, SchemaNotReady, StorageUnavailable
from resolver.core.liveness import Heartbeat
from resolver.core.replica import Replica
from resolver.db import migrate as migrations
from resolver.db.connect import Pooler

log = structlog.get_logger("resolver.cli")

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


def ensure_schema(url: str, connect_timeout_seconds: float, pooler: Pooler = Pooler.NONE) -> None:
    status, current = migrations.schema_status(url, connect_timeout_seconds, pooler)
    if status in (migrations.SchemaStatus.MISSING, migrations.SchemaStatus.BEHIND):
        raise SchemaNotReady(
            f"schema is at revision {current or 'none'}, this resolver needs "
            f"{migrations.head_revision()}; run `resolver migrate` first"
        )
    if status is migrations.SchemaStatus.AHEAD:
        log.warning("schema_ahead", revision=current, expected=migrations.head_revision())


STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
_WAKE = signal.SIGUSR1


def wait_for_database(settings: Settings, heartbeat: Heartbeat) -> bool:
    """Wait for a reachable, migrated database up to RESOLVER_STARTUP_TIMEOUT_SECONDS, as
    running replicas ride out an outage; False when a stop signal came meanwhile."""

    def sleep(seconds: float) -> bool:
        # Stop signals are blocked in this thread: wait for one, or for the delay to pass.
        return signal.sigtimedwait(STOP_SIGNALS, seconds) is not None

    return _await_database(settings, sleep, heartbeat.beat)


def _await_database(
    settings: Settings, sleep: Callable[[float], bool], beat: Callable[[], None]
) -> bool:
    """Retry the schema check with backoff up to the start-up limit (then raise its error);
    `sleep` returns True when a stop request ended the wait (then False)."""
    url = settings.require_database_url()

    def retrying(exc: BaseException, delay: float) -> None:
        beat()  # waiting is the process alive and retrying: liveness holds
        log.warning(
            "database_not_ready", error=type(exc).__name__, retry_in_seconds=round(delay, 3)
        )

    return wait_until_ready(
        lambda: ensure_schema(url, settings.connect_timeout_seconds, settings.database_pooler),
        limit_seconds=settings.startup_timeout_seconds,
        max_delay_seconds=settings.storage_retry_max_seconds,
        sleep=sleep,
        on_retry=retrying,
    )


class DatabaseWatch:
    """`resolver api`'s start-up wait, beside the server instead of before it.

    The API serves at once, as `resolver run` serves its endpoints before it waits: while
    the database is away or not yet migrated, /healthz answers (a liveness probe must not
    restart a pod for its database) and /readyz says no. The same limit as `resolver run`
    applies: past RESOLVER_STARTUP_TIMEOUT_SECONDS `give_up` stops the server and `failure`
    holds the error, which the command then raises (exit 3).
    """

    def __init__(self, settings: Settings, give_up: Callable[[], None]) -> None:
        self.failure: ResolverError | None = None
        self._settings = settings
        self._give_up = give_up
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="database-wait", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5)

    def _watch(self) -> None:
        try:
            _await_database(self._settings, self._stopped.wait, lambda: None)
        except ResolverError as exc:
            self.failure = exc
            self._give_up()


@contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """Block stop signals in this thread and every thread it starts, for the block's length.

    They are then taken synchronously by `sigwait` in the main thread: no asynchronous
    handler can interrupt a lock holder (a log write, an Event) and deadlock the process.
    On exit the previous mask comes back (an in-process caller, such as a test runner, must
    not keep it, nor pass it on to the processes it starts); a stop signal still pending
    then is consumed first, its stop having already happened.
    """
    watched = {*STOP_SIGNALS, _WAKE}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        yield
    finally:
        while signal.sigpending() & watched - previous:
            signal.sigtimedwait(watched - previous, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def run_until_signalled(replica: Replica[Any], *, once: bool, grace_seconds: float) -> bool:
    """Wire the stop signals to the replica: start it, wait for SIGTERM/SIGINT (or for the
    loop to end by itself), then stop it within the grace period.

    Returns False when the cycle in flight outlived the grace period (see `Replica.stop`).
    """
    with stop_signals_blocked():
        main_thread = threading.get_ident()
        # A loop that outlives the grace period must not wake a caller that stopped waiting
        # (its mask restored, SIGUSR1 would end the process): the waker checks under a lock.
        guard = threading.Lock()
        armed = [True]

        def wake() -> None:
            with guard:
                if armed[0]:
                    signal.pthread_kill(main_thread, _WAKE)

        replica.start(once=once, on_exit=wake)
        received = signal.sigwait({*STOP_SIGNALS, _WAKE})
        if received != _WAKE:
            log.info("shutdown_requested", signal=signal.Signals(received).name)
        try:
            return replica.stop(grace_seconds)
        finally:
            with guard:
                armed[0] = False


def stop_on_signals(stop: threading.Event) -> None:
    """Set `stop` on SIGINT, SIGTERM or SIGHUP (the live demo's way to end).

    The demo's replicas run in sessions of their own; closing the terminal (SIGHUP) must
    still stop them in order rather than leave them running.
    """
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
