"""The cycle-events seam: what a cycle tells its subscribers, one call per page and phase.

The reconciler holds the algorithm and reports each phase here; metrics, traces, logs, the
heartbeat and (in tests) the operation history and crash injection are subscribers. Events
carry whole pages, so what a subscriber does per item is its own choice. Every handler runs
on the cycle's thread, must be cheap and must not raise.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import ClassVar

import msgspec

from resolver.core.domain import (
    ClaimedItem,
    CommitReport,
    ControlStatus,
    DispatchIdentity,
    Finding,
    FindingKind,
    ItemOutcome,
    LateRecord,
    Outcome,
    ProviderFailure,
)
from resolver.core.errors import StorageUnavailable


class Stage(StrEnum):
    """The phase a cycle was in, e.g. when it failed."""

    CLAIM = "claim"
    RELEASE = "release"
    INSPECT = "inspect"
    COMMIT = "commit"


class CycleReport(msgspec.Struct):
    page_size: int
    claimed: int = 0
    findings: Counter[FindingKind] = msgspec.field(default_factory=Counter)
    accepted: frozenset[str] = frozenset()
    rejected: frozenset[str] = frozenset()
    released: int = 0
    next_due_in_ms: int | None = None
    """When the next armed control falls due after the claim (None: nothing was claimed, or
    none is armed past it), on the database clock."""

    @property
    def page_full(self) -> bool:
        """A full page means more may be due: the loop goes again without sleeping."""
        return self.released == 0 and self.claimed >= self.page_size


class ProviderCall(msgspec.Struct, frozen=True):
    """One provider call of a page: a whole page for a page provider, else one item.

    `started_ns` is wall-clock (for spans), `seconds` the call's duration; `failure` says why
    the call could not answer: `timeout` or `error` (then `error` is the exception the
    provider raised) when it gave no answer at all, else the class (`outage`,
    `configuration`) the provider put on its `unavailable` findings. Its items are then
    `unavailable`.
    """

    label: str
    identities: Sequence[DispatchIdentity]
    findings: Mapping[str, Finding]
    started_ns: int
    seconds: float
    failure: ProviderFailure | None
    error: BaseException | None = None
    cause: str | None = None
    """The short refusal code (`sqlstate_42501`, `http_403`) the provider put on its
    `unavailable` findings, if any."""


class InspectedPage(msgspec.Struct, frozen=True):
    """Every finding of a page, the provider calls that produced them, and the items no
    provider is configured for (answered `unsupported` without a call)."""

    findings: Mapping[str, Finding]
    calls: Sequence[ProviderCall]
    unsupported: Sequence[ClaimedItem]
    seconds: float


class CycleEvents:
    """No-op handlers; a subscriber overrides the ones it needs.

    `order` places a subscriber among the others (lower first); crash injection runs last so
    that what the others record of a boundary is written before the process dies.
    """

    order: ClassVar[int] = 0

    def cycle_started(self, owner: str) -> None:
        """A cycle begins; its claim comes next."""

    def claimed(self, items: Sequence[ClaimedItem], seconds: float) -> None:
        """The claim committed: these items are ours under a fresh recovery lease."""

    def released(self, items: Sequence[ClaimedItem], released: int, seconds: float) -> None:
        """Stopping: the claimed page was handed back; `released` leases were still ours."""

    def inspecting(self, items: Sequence[ClaimedItem]) -> None:
        """The providers are about to be asked about these items."""

    def inspected(self, page: InspectedPage) -> None:
        """Every item has a finding; nothing has been committed."""

    def before_commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        """The fenced commit of these outcomes starts."""

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        """The commit ended: `report` says which dispatches passed their fences."""

    def cycle_completed(self, report: CycleReport, seconds: float) -> None:
        """The cycle ended normally (also when it claimed nothing)."""

    def cycle_failed(self, stage: Stage, error: BaseException, seconds: float) -> None:
        """The cycle raised in `stage`; the loop decides whether to retry."""

    def storage_retry(self, error: StorageUnavailable, failures: int, delay_seconds: float) -> None:
        """The loop waits `delay_seconds` before its next cycle: storage is unavailable."""

    def late_evidence(self, records: Sequence[LateRecord]) -> None:
        """The late-evidence watcher recorded these looks after manual decisions (those whose
        fence held): `recorded` ones are late-evidence facts, agreeing or contradicting."""


NULL_EVENTS = CycleEvents()

_HANDLERS = tuple(
    name for name, value in vars(CycleEvents).items() if callable(value) and name[0] != "_"
)


def _overrides(subscriber: CycleEvents, name: str) -> bool:
    return getattr(type(subscriber), name) is not getattr(CycleEvents, name)


class Fanout(CycleEvents):
    """Delivers each event to every subscriber that handles it, in `order`.

    Built once per replica: each event is a loop over the bound handlers that exist, so an
    event nobody handles costs one empty loop.
    """

    def __init__(self, subscribers: Sequence[CycleEvents]) -> None:
        self.subscribers = tuple(sorted(subscribers, key=lambda s: s.order))
        handlers: dict[str, tuple[Callable[..., None], ...]] = {
            name: tuple(getattr(s, name) for s in self.subscribers if _overrides(s, name))
            for name in _HANDLERS
        }
        self._started = handlers["cycle_started"]
        self._claimed = handlers["claimed"]
        self._released = handlers["released"]
        self._inspecting = handlers["inspecting"]
        self._inspected = handlers["inspected"]
        self._before_commit = handlers["before_commit"]
        self._committed = handlers["committed"]
        self._completed = handlers["cycle_completed"]
        self._failed = handlers["cycle_failed"]
        self._storage_retry = handlers["storage_retry"]
        self._late_evidence = handlers["late_evidence"]

    def cycle_started(self, owner: str) -> None:
        for handle in self._started:
            handle(owner)

    def claimed(self, items: Sequence[ClaimedItem], seconds: float) -> None:
        for handle in self._claimed:
            handle(items, seconds)

    def released(self, items: Sequence[ClaimedItem], released: int, seconds: float) -> None:
        for handle in self._released:
            handle(items, released, seconds)

    def inspecting(self, items: Sequence[ClaimedItem]) -> None:
        for handle in self._inspecting:
            handle(items)

    def inspected(self, page: InspectedPage) -> None:
        for handle in self._inspected:
            handle(page)

    def before_commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        for handle in self._before_commit:
            handle(outcomes)

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        for handle in self._committed:
            handle(outcomes, report, seconds)

    def cycle_completed(self, report: CycleReport, seconds: float) -> None:
        for handle in self._completed:
            handle(report, seconds)

    def cycle_failed(self, stage: Stage, error: BaseException, seconds: float) -> None:
        for handle in self._failed:
            handle(stage, error, seconds)

    def storage_retry(self, error: StorageUnavailable, failures: int, delay_seconds: float) -> None:
        for handle in self._storage_retry:
            handle(error, failures, delay_seconds)

    def late_evidence(self, records: Sequence[LateRecord]) -> None:
        for handle in self._late_evidence:
            handle(records)


# Looked up, not formatted: the label is asked for every item of every page.
_RESOLVED_LABELS: dict[Outcome | None, str] = {o: f"resolved_{o}" for o in Outcome}


def outcome_label(outcome: ItemOutcome, committed: CommitReport) -> str:
    """What committing this finding did: resolved_*, manual, escalated, retry, or
    fence_rejected."""
    status = committed.routed.get(outcome.item.identity.dispatch_id)
    if status is None:
        return "fence_rejected"
    if status is ControlStatus.RESOLVED:
        result = outcome.finding.outcome
        return _RESOLVED_LABELS.get(result) or f"resolved_{result}"
    if outcome.item.identity.dispatch_id in committed.escalated:
        return "escalated"
    return "manual" if status is ControlStatus.MANUAL else "retry"
