"""The hooks the reconciler reports through; implementations count, time and trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from opentelemetry.trace import NoOpTracer, Tracer

from resolver.domain import (
    CommitReport,
    ExecutionState,
    Finding,
    ItemOutcome,
    ManualResult,
    ProviderFailure,
)


class RecoveryObserver(Protocol):
    """Called on the reconciler's thread; every method must be cheap and must not raise."""

    def claimed(self, items: int, seconds: float) -> None: ...

    def inspected(self, provider: str, seconds: float, failure: ProviderFailure | None) -> None:
        """One provider call (an item, or a page for a page provider); `failure` says why it
        could not answer (a timeout, a raise, or the class the provider reported)."""

    def found(self, action_type: str, provider: str, finding: Finding) -> None:
        """One item's finding; an `unavailable` one may carry its `failure`."""

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None: ...

    def released(self, held: int, released: int) -> None: ...

    def cycle_completed(self, seconds: float) -> None: ...

    def cycle_failed(self, reason: str, seconds: float) -> None: ...


class NullObserver:
    """Observes nothing: the default, so a reconciler needs no telemetry to run."""

    def claimed(self, items: int, seconds: float) -> None:
        pass

    def inspected(self, provider: str, seconds: float, failure: ProviderFailure | None) -> None:
        pass

    def found(self, action_type: str, provider: str, finding: Finding) -> None:
        pass

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        pass

    def released(self, held: int, released: int) -> None:
        pass

    def cycle_completed(self, seconds: float) -> None:
        pass

    def cycle_failed(self, reason: str, seconds: float) -> None:
        pass


class Observers:
    """Several observers as one: every event goes to each, in the order given."""

    def __init__(self, *observers: RecoveryObserver) -> None:
        self._observers = observers

    def claimed(self, items: int, seconds: float) -> None:
        for o in self._observers:
            o.claimed(items, seconds)

    def inspected(self, provider: str, seconds: float, failure: ProviderFailure | None) -> None:
        for o in self._observers:
            o.inspected(provider, seconds, failure)

    def found(self, action_type: str, provider: str, finding: Finding) -> None:
        for o in self._observers:
            o.found(action_type, provider, finding)

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        for o in self._observers:
            o.committed(outcomes, report, seconds)

    def released(self, held: int, released: int) -> None:
        for o in self._observers:
            o.released(held, released)

    def cycle_completed(self, seconds: float) -> None:
        for o in self._observers:
            o.cycle_completed(seconds)

    def cycle_failed(self, reason: str, seconds: float) -> None:
        for o in self._observers:
            o.cycle_failed(reason, seconds)


@dataclass(frozen=True, slots=True)
class Telemetry:
    """What a long-running component gets from the composition root instead of globals.

    The defaults cost nothing: a null observer and OpenTelemetry's no-op tracer.
    """

    observer: RecoveryObserver = field(default_factory=NullObserver)
    tracer: Tracer = field(default_factory=NoOpTracer)


class ApiObserver(Protocol):
    """What `resolver api` reports; called on request threads, so cheap and never raising.

    Every label is a bounded code: a route template, a status class, a reason class. Never a
    token, a user id or a dispatch id.
    """

    def request(self, route: str, status: int, seconds: float) -> None: ...

    def token_rejected(self, reason: str) -> None: ...

    def step_up_required(self) -> None: ...

    def decided(self, outcome: ExecutionState, result: ManualResult) -> None:
        """A decision answered 200: the terminal state, committed now or replayed."""


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
