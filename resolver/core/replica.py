"""A resolver replica as one service: start the loop, stop it within a grace period, health.

The loop is: claim, inspect, commit (one `Reconciler` cycle); go again at once after a full
page, else sleep until the next armed control falls due (the claim reads when, on the
database clock; never less than `cadence_min_seconds`, never more than the cadence, with
jitter), or the cadence after a claim that found nothing; after a storage failure, back off
(capped, with jitter) and retry. It holds no per-item timer or thread. `stop` stops
claiming: a page claimed after the request is handed back at once, a page being inspected
is committed (its providers are bounded by their timeouts), and whatever outlives the grace
period lapses by its recovery lease alone. The process's signals are the CLI's business
(`resolver.app.cli`).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Generic, TypeVar

import msgspec

from resolver.core.errors import StorageUnavailable
from resolver.core.events import CycleReport
from resolver.core.late_evidence import LateEvidenceWatcher
from resolver.core.liveness import LivenessCheck, Probe
from resolver.core.reconciler import Reconciler
from resolver.core.runtime import Runtime

StoreT = TypeVar("StoreT")


class LoopSettings(msgspec.Struct, frozen=True):
    cadence_seconds: float = 2.0
    cadence_jitter_ratio: float = 0.2
    # A crash past the barrier waits for the next cycle of some replica: a fixed cadence made
    # that wait the whole cadence in the worst case. The soonest wake-up keeps a replica from
    # spinning on a trickle of controls falling due one after another (pages fill meanwhile).
    cadence_min_seconds: float = 0.25
    storage_retry_base_seconds: float = 0.5
    storage_retry_max_seconds: float = 30.0


class State(StrEnum):
    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Replica(Generic[StoreT]):
    """One replica's lifecycle: `start`, `stop`, `health`, then `close` what it holds.

    `store` is the storage its reconciler runs on; `resources` are closed in order by
    `close` (provider pools, the tracer's exporter, the store), after the reconciler's
    inspect pool. The heartbeat of `runtime` (a cycle-events subscriber) feeds `health`.
    """

    def __init__(
        self,
        reconciler: Reconciler,
        settings: LoopSettings,
        runtime: Runtime,
        store: StoreT,
        *,
        liveness_bound_seconds: float = float("inf"),
        resources: Sequence[Callable[[], None]] = (),
        late_evidence: LateEvidenceWatcher | None = None,
    ) -> None:
        self.reconciler = reconciler
        # Looks again after manual decisions between cycles, at its own low cadence.
        self.late_evidence = late_evidence
        self.runtime = runtime
        self.store = store
        self._settings = settings
        self._rng = runtime.rng
        self._events = runtime.events
        self._log = runtime.logger
        self._liveness = LivenessCheck(runtime.heartbeat, liveness_bound_seconds)
        self._resources = list(resources)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self.state = State.NEW
        self.cycles_completed = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, *, once: bool = False, on_exit: Callable[[], None] = lambda: None) -> None:
        """Run the loop on its own thread; `on_exit` is called on that thread when it ends
        (by itself: `once`, or a failure; or after `stop`)."""
        if self._thread is not None:
            raise RuntimeError("a replica starts once")

        def loop() -> None:
            try:
                self.run(once=once)
            except BaseException as exc:
                self._failure = exc
            finally:
                on_exit()

        # A new thread starts with an empty context: copy it so the loop's log lines keep
        # what the caller bound (the replica id).
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(loop,), name="resolver-loop", daemon=True
        )
        self._thread.start()

    def request_stop(self) -> None:
        """Stop claiming; the cycle in flight finishes (or hands its page back)."""
        if self.state is not State.STOPPED:
            self.state = State.STOPPING
        self._stop.set()

    def stop(self, grace_seconds: float) -> bool:
        """Request the stop and wait at most `grace_seconds` for the loop to end.

        Returns False when the cycle in flight outlived the grace period: its recovery leases
        then lapse by time alone and another replica takes the items over. A failure of the
        loop is raised here.
        """
        self.request_stop()
        clean = self.wait(grace_seconds)
        if not clean:
            self._log.error("shutdown_grace_exceeded", grace_seconds=grace_seconds)
        if self._failure is not None:
            raise self._failure
        return clean

    def wait(self, timeout_seconds: float | None = None) -> bool:
        """True once the loop has ended (or was never started)."""
        if self._thread is not None:
            self._thread.join(timeout_seconds)
            return not self._thread.is_alive()
        return True

    def close(self) -> None:
        self.reconciler.close()
        if self.late_evidence is not None:
            self.late_evidence.close()
        for close in self._resources:
            close()

    def add_resource(self, close: Callable[[], None]) -> None:
        """Something to close with the replica, started after it was built (the endpoints)."""
        self._resources.insert(0, close)

    # -- health ---------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def health(self) -> Probe:
        """Liveness: the loop finished a cycle attempt recently enough (see the bound)."""
        probe = self._liveness()
        return Probe(probe.ok, {**probe.detail, "state": self.state.value})

    # -- the loop -------------------------------------------------------------------------

    def run(self, *, once: bool = False) -> None:
        """The loop in the calling thread, until `request_stop` (or one cycle with `once`)."""
        self.state = State.RUNNING if not self._stop.is_set() else self.state
        try:
            self._loop(once)
        finally:
            self.state = State.STOPPED

    def _loop(self, once: bool) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                report = self.reconciler.run_cycle(should_stop=self._stop.is_set)
                if self.late_evidence is not None:
                    self.late_evidence.run_if_due()
                pause = None if once or report.page_full else self._pause(report)
            except StorageUnavailable as exc:
                failures += 1
                delay = self._storage_backoff(failures)
                self._events.storage_retry(exc, failures, delay)
                if once:
                    raise
                self._stop.wait(delay)
                continue
            failures = 0
            self.cycles_completed += 1
            if once:
                return
            if pause is not None:
                self._stop.wait(pause)

    def _cadence(self) -> float:
        s = self._settings
        return s.cadence_seconds * (1 + s.cadence_jitter_ratio * (2 * self._rng.random() - 1))

    def _pause(self, report: CycleReport) -> float:
        """After a partial page: until the next armed control falls due, within the bounds;
        the cadence after a claim that found nothing (an idle replica asks nothing more)."""
        cadence = self._cadence()
        due_in_ms = report.next_due_in_ms
        if due_in_ms is None:
            return cadence
        s = self._settings
        soonest = max(s.cadence_min_seconds, due_in_ms / 1000)
        # Jitter only later, never before the control is due: replicas that woke together
        # for the same control spread out.
        return min(cadence, soonest * (1 + s.cadence_jitter_ratio * self._rng.random()))

    def _storage_backoff(self, failures: int) -> float:
        s = self._settings
        ceiling = min(
            s.storage_retry_max_seconds,
            s.storage_retry_base_seconds * float(2 ** min(failures, 20)),
        )
        return ceiling / 2 + self._rng.random() * ceiling / 2
