"""Deterministic crash points: a replica SIGKILLs itself at one cycle boundary.

`RESOLVER_TEST_CRASH_AT` names the boundary (entry point `crash` of the
`resolver.cycle_subscribers` group); the crash matrix of tests/contention sets it. The kill
is a real crash: no finally block runs and no lease is handed back.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import ClassVar

from resolver.app.config import Settings
from resolver.core.domain import ClaimedItem, CommitReport, ItemOutcome
from resolver.core.errors import ConfigError
from resolver.core.events import CycleEvents, InspectedPage
from resolver_test_support.history import HISTORY_FILE_VARIABLE, FileHistory, History

CRASH_AT_VARIABLE = "RESOLVER_TEST_CRASH_AT"


class CrashPoint(StrEnum):
    """Cycle boundaries; each is the end of one event of a cycle that claimed something."""

    CLAIMED = "claimed"  # after `claimed`: the recovery leases are held, nothing inspected
    INSPECTING = "inspecting"  # after `inspecting`: providers about to be asked
    BEFORE_COMMIT = "before_commit"  # after `inspected`: findings known, no commit started
    AFTER_COMMIT = "after_commit"  # after `committed`


class CrashInjection(CycleEvents):
    """Kills the process at its point. Runs after every other subscriber (`order`), so what
    they record of the boundary (the history's `ok claim`, say) is written first."""

    order: ClassVar[int] = 1_000

    def __init__(self, point: CrashPoint, history: History | None = None) -> None:
        self._point = point
        self._history = history

    def claimed(self, items: Sequence[ClaimedItem], seconds: float) -> None:
        if items:
            self._at(CrashPoint.CLAIMED)

    def inspecting(self, items: Sequence[ClaimedItem]) -> None:
        self._at(CrashPoint.INSPECTING)

    def inspected(self, page: InspectedPage) -> None:
        self._at(CrashPoint.BEFORE_COMMIT)

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        self._at(CrashPoint.AFTER_COMMIT)

    def _at(self, point: CrashPoint) -> None:
        if point is self._point:
            if self._history is not None:
                self._history.record("info", "crash", point=point.value)
            os.kill(os.getpid(), signal.SIGKILL)


def from_env(settings: Settings) -> CrashInjection | None:
    """Entry point `crash`: active only when RESOLVER_TEST_CRASH_AT names a crash point."""
    raw = os.environ.get(CRASH_AT_VARIABLE)
    if not raw:
        return None
    try:
        point = CrashPoint(raw)
    except ValueError:
        known = ", ".join(p.value for p in CrashPoint)
        raise ConfigError(f"{CRASH_AT_VARIABLE}={raw!r}: must be one of {known}") from None
    path = os.environ.get(HISTORY_FILE_VARIABLE)
    history = FileHistory(Path(path), settings.replica_id) if path else None
    return CrashInjection(point, history)
