"""The contention suite's operation history, and the subscriber that records a replica's.

Each operation is appended as one JSON line, Jepsen style: `invoke` before a call, then `ok`,
`fail` (definitely had no effect) or `info` (outcome unknown, e.g. the connection died in
COMMIT). Lines hold ids, tokens, versions and finding codes only, never evidence or secrets.
A `resolver run` process records its cycles when `RESOLVER_TEST_HISTORY_FILE` names a file
(entry point `history` of the `resolver.cycle_subscribers` group).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from resolver.app.config import Settings
from resolver.core.domain import ClaimedItem, CommitReport, ItemOutcome
from resolver.core.errors import StorageUnavailable
from resolver.core.events import CycleEvents, InspectedPage, Stage

HISTORY_FILE_VARIABLE = "RESOLVER_TEST_HISTORY_FILE"


class History(Protocol):
    def record(self, kind: str, f: str, **value: Any) -> None: ...


class FileHistory:
    """Appends one line per operation with a single write, so a kill -9 loses no whole line
    that was recorded and leaves at most a torn last line (the checker skips it)."""

    def __init__(self, path: Path, process: str) -> None:
        self._process = process
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def record(self, kind: str, f: str, **value: Any) -> None:
        line = {"t": time.time_ns(), "process": self._process, "type": kind, "f": f, **value}
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            os.write(self._fd, data)

    def close(self) -> None:
        os.close(self._fd)


def claimed_fields(item: ClaimedItem) -> dict[str, Any]:
    """What the checker needs to know about one claim: the fence it was given."""
    return {
        "dispatch_id": item.identity.dispatch_id,
        "token": item.recovery_token,
        "recovery_version": item.recovery_version,
        "execution_version": item.execution_version,
        "claimed_at_ms": item.claimed_at_ms,
    }


def _lease_fields(item: ClaimedItem) -> dict[str, Any]:
    return {"dispatch_id": item.identity.dispatch_id, "token": item.recovery_token}


def _outcome_fields(outcome: ItemOutcome) -> dict[str, Any]:
    return {
        **_lease_fields(outcome.item),
        "recovery_version": outcome.item.recovery_version,
        "execution_version": outcome.item.execution_version,
        "finding": outcome.finding.kind.value,
        "evidence_digest": outcome.finding.evidence_digest,
        # Which of two equal resolutions survived a failover: the stored one's mutation id.
        "mutation_id": outcome.mutation_id,
    }


class HistoryEvents(CycleEvents):
    """Records a replica's claims, inspections and commits as invoke/ok/info operations."""

    def __init__(self, history: History) -> None:
        self._history = history
        self._inspecting: Sequence[ClaimedItem] = ()

    def cycle_started(self, owner: str) -> None:
        self._history.record("invoke", "claim")

    def claimed(self, items: Sequence[ClaimedItem], seconds: float) -> None:
        self._history.record("ok", "claim", items=[claimed_fields(i) for i in items])

    def inspecting(self, items: Sequence[ClaimedItem]) -> None:
        self._inspecting = items
        for item in items:
            self._history.record("invoke", "inspect", **_lease_fields(item))

    def inspected(self, page: InspectedPage) -> None:
        for item in self._inspecting:
            finding = page.findings[item.identity.dispatch_id].kind.value
            self._history.record("ok", "inspect", **_lease_fields(item), finding=finding)
        self._inspecting = ()

    def before_commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        self._history.record("invoke", "commit", items=[_outcome_fields(o) for o in outcomes])

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        self._history.record(
            "ok", "commit", accepted=sorted(report.accepted), rejected=sorted(report.rejected)
        )

    def cycle_failed(self, stage: Stage, error: BaseException, seconds: float) -> None:
        # The claim or commit may have committed before the connection died: outcome unknown.
        if isinstance(error, StorageUnavailable) and stage in (Stage.CLAIM, Stage.COMMIT):
            self._history.record("info", stage.value, error=type(error).__name__)


def from_env(settings: Settings) -> HistoryEvents | None:
    """Entry point `history`: active only when RESOLVER_TEST_HISTORY_FILE is set."""
    path = os.environ.get(HISTORY_FILE_VARIABLE)
    if not path:
        return None
    return HistoryEvents(FileHistory(Path(path), settings.replica_id))
