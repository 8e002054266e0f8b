"""The hooks `resolver api` reports through; the cycle's are in `resolver.core.events`."""

from __future__ import annotations

from typing import Protocol

from resolver.core.domain import ExecutionState, ManualResult


class ApiObserver(Protocol):
    """What `resolver api` reports; called on request threads, so cheap and never raising.

    Every label is a bounded code: a route template, a status class, a reason class. Never a
    token, a user id or a dispatch id.
    """

    def request(self, route: str, status: int, seconds: float) -> None: ...

    def token_rejected(self, reason: str) -> None: ...

    def step_up_required(self) -> None: ...

    def decided(self, outcome: ExecutionState, result: ManualResult) -> None:
        """A decision answered 200 or 202: the terminal state, committed now, replayed or
        proposed (a two-person case waiting for its second person)."""


class NullApiObserver:
    """Observes nothing: the API needs no telemetry to run (tests, embedding)."""

    def request(self, route: str, status: int, seconds: float) -> None:
        pass

    def token_rejected(self, reason: str) -> None:
        pass

    def step_up_required(self) -> None:
        pass

    def decided(self, outcome: ExecutionState, result: ManualResult) -> None:
        pass
