"""The replica loop: cycle, sleep with jitter when the page was partial, stop cleanly."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from resolver.errors import StorageUnavailable
from resolver.reconciler import CycleReport, Reconciler

log = structlog.get_logger("resolver.worker")


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    cadence_seconds: float = 2.0
    cadence_jitter_ratio: float = 0.2
    storage_retry_base_seconds: float = 0.5
    storage_retry_max_seconds: float = 30.0


CycleListener = Callable[[CycleReport | None, BaseException | None], None]


class Worker:
    """Runs cycles until told to stop. Holds no per-item timers or threads."""

    def __init__(
        self,
        reconciler: Reconciler,
        settings: WorkerSettings,
        *,
        rng: random.Random | None = None,
        listeners: tuple[CycleListener, ...] = (),
    ) -> None:
        self._reconciler = reconciler
        self._settings = settings
        self._rng = rng or random.Random()
        self._stop = threading.Event()
        self._listeners = listeners
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
                self._notify(None, exc)
                delay = self._storage_backoff(failures)
                log.warning("storage_unavailable", error=str(exc), retry_in_seconds=round(delay, 2))
                if once:
                    raise
                self._stop.wait(delay)
                continue
            failures = 0
            self.cycles_completed += 1
            self._notify(report, None)
            if once:
                return
            if not report.page_full:
                self._stop.wait(self._cadence())

    def _notify(self, report: CycleReport | None, error: BaseException | None) -> None:
        for listener in self._listeners:
            listener(report, error)

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
