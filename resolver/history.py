"""Test instrumentation, off by default: an operation history and deterministic crash points.

With `RESOLVER_HISTORY_FILE` set, each operation of a cycle is appended as one JSON line,
Jepsen style: `invoke` before a call, then `ok`, `fail` (definitely had no effect) or `info`
(outcome unknown, e.g. the connection died in COMMIT). Lines hold ids, tokens, versions and
finding codes only, never evidence or secrets. `RESOLVER_TEST_CRASH_AT` makes a replica
SIGKILL itself at one cycle boundary; both exist for tests/contention and nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from resolver.domain import ClaimedItem


class History(Protocol):
    def record(self, kind: str, f: str, **value: Any) -> None: ...


class _NullHistory:
    def record(self, kind: str, f: str, **value: Any) -> None:
        """Records nothing: the default in production."""


NULL_HISTORY: History = _NullHistory()


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


class CrashPoint(StrEnum):
    """Cycle boundaries where `RESOLVER_TEST_CRASH_AT` kills the replica (test-only)."""

    CLAIMED = "claimed"
    INSPECTING = "inspecting"
    BEFORE_COMMIT = "before_commit"
    AFTER_COMMIT = "after_commit"


def crash_now(history: History, point: CrashPoint) -> None:
    """SIGKILL this process: no finally block, no lease hand-back, like a real crash."""
    history.record("info", "crash", point=point.value)
    os.kill(os.getpid(), signal.SIGKILL)
