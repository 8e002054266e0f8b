"""The replica loop: cycle, sleep with jitter when the page was partial, stop cleanly."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from resolver.errors import StorageUnavailable
from resolver.reconciler import Reconciler
from resolver.runtime import Runtime


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    cadence_seconds: float = 2.0
    cadence_jitter_ratio: float = 0.2
    storage_retry_base_seconds: float = 0.5
    storage_retry_max_seconds: float = 30.0


class Worker:
    """Runs cycles until told to stop. Holds no per-item timers or threads."""

    def __init__(
        self,
        reconciler: Reconciler,
        settings: WorkerSettings,
        runtime: Runtime | None = None,
    ) -> None:
        runtime = runtime or Runtime()
        self._reconciler = reconciler
        self._settings = settings
        self._rng = runtime.rng
        self._events = runtime.events
        self._stop = threading.Event()
        self.cycles_completed = 0

    def request_stop(self) -> None:
        """Stop claiming; the cycle in flight finishes (or releases its page) and run returns."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self, *, once: bool = False) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                report = self._reconciler.run_cycle(should_stop=self._stop.is_set)
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
            if not report.page_full:
                self._stop.wait(self._cadence())

    def _cadence(self) -> float:
        s = self._settings
        return s.cadence_seconds * (1 + s.cadence_jitter_ratio * (2 * self._rng.random() - 1))

    def _storage_backoff(self, failures: int) -> float:
        s = self._settings
        ceiling = min(
            s.storage_retry_max_seconds,
            s.storage_retry_base_seconds * float(2 ** min(failures, 20)),
        )
        return ceiling / 2 + self._rng.random() * ceiling / 2
