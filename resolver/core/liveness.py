"""Liveness: the loop finished a cycle attempt recently enough.

The replica's own heartbeat, a cycle-events subscriber the runtime always carries, so the
loop can answer `/healthz` without the telemetry that the composition root adds around it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import msgspec

from resolver.core.events import CycleEvents, CycleReport, Stage


class Probe(msgspec.Struct, frozen=True):
    """An answer for an HTTP probe: `ok` picks 200 or 503, `detail` is the JSON body."""

    ok: bool
    detail: dict[str, Any] = msgspec.field(default_factory=dict)


def liveness_bound_seconds(
    *,
    cadence_seconds: float,
    cadence_jitter_ratio: float,
    storage_retry_max_seconds: float,
    recovery_lease_seconds: float,
) -> float:
    """How long a healthy loop can go between two cycle ends.

    The longest sleep (cadence with jitter, or the storage backoff) plus the longest cycle,
    which the recovery lease bounds (a cycle outliving its lease has lost its fences
    anyway), doubled so one slow cycle is not a restart.
    """
    longest_sleep = max(cadence_seconds * (1 + cadence_jitter_ratio), storage_retry_max_seconds)
    return 2 * (longest_sleep + recovery_lease_seconds)


class Heartbeat(CycleEvents):
    """A cycle-events subscriber: remembers when the loop last finished a cycle attempt.

    A cycle that failed (storage unavailable) counts: the loop is alive and retrying, and
    restarting the process would not bring the database back (readiness reports the
    database). Read from the probe's thread, hence the lock.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last = clock()
        self._cycles = 0

    def cycle_completed(self, report: CycleReport, seconds: float) -> None:
        self.beat()

    def cycle_failed(self, stage: Stage, error: BaseException, seconds: float) -> None:
        self.beat()

    def beat(self) -> None:
        with self._lock:
            self._last = self._clock()
            self._cycles += 1

    def age_seconds(self) -> float:
        with self._lock:
            return self._clock() - self._last

    @property
    def cycles(self) -> int:
        with self._lock:
            return self._cycles


class LivenessCheck(msgspec.Struct, frozen=True):
    heartbeat: Heartbeat
    bound_seconds: float

    def __call__(self) -> Probe:
        age = self.heartbeat.age_seconds()
        detail = {
            "last_cycle_age_seconds": round(age, 3),
            "bound_seconds": self.bound_seconds,
            "cycles": self.heartbeat.cycles,
        }
        if age > self.bound_seconds:
            return Probe(False, {"status": "stalled", **detail})
        return Probe(True, {"status": "ok", **detail})
