"""One resolver cycle: claim a page, inspect outside any transaction, commit fenced.

The algorithm only: each phase is reported once per page through the cycle events of the
runtime bundle (`resolver.core.events`), whose subscribers count, trace, log and record.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ALL_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from enum import Enum
from typing import cast

import msgspec

from resolver.core.domain import (
    ClaimedItem,
    DispatchIdentity,
    Finding,
    FindingKind,
    ItemOutcome,
    ProviderFailure,
)
from resolver.core.events import CycleReport, InspectedPage, ProviderCall, Stage
from resolver.core.ports import RecoveryStore
from resolver.core.provider import (
    Capability,
    EvidenceProvider,
    PageEvidenceProvider,
    ProviderRegistry,
)
from resolver.core.runtime import Runtime

_UNAVAILABLE = Finding(FindingKind.UNAVAILABLE)
_UNSUPPORTED = Finding(FindingKind.UNSUPPORTED)


class ReconcilerSettings(msgspec.Struct, frozen=True):
    owner: str
    page_size: int = 16
    recovery_lease_ms: int = 60_000
    backoff_base_ms: int = 5_000
    backoff_max_ms: int = 600_000
    default_timeout_seconds: float = 10.0
    inspect_concurrency: int = 16


class Reconciler:
    """Stateless between cycles: everything it knows about a dispatch came from its claim."""

    def __init__(
        self,
        store: RecoveryStore,
        registry: ProviderRegistry,
        settings: ReconcilerSettings,
        runtime: Runtime | None = None,
    ) -> None:
        runtime = runtime or Runtime()
        self._store = store
        self._registry = registry
        self._settings = settings
        self._clock = runtime.clock
        self._rng = runtime.rng
        self._events = runtime.events
        self._stage = Stage.CLAIM
        # How each provider is asked, decided once: an isinstance check against a runtime
        # Protocol walks its members every time. The registry keeps every provider alive,
        # so no id is reused while this reconciler lives.
        self._shapes = {id(p): _shape_of(p) for p in registry.by_action_type.values()}
        self._pool = ThreadPoolExecutor(
            max_workers=settings.inspect_concurrency, thread_name_prefix="inspect"
        )

    def close(self) -> None:
        # Threads stuck in a provider past its timeout are abandoned, never awaited.
        self._pool.shutdown(wait=False, cancel_futures=True)

    def at(self, now_ms: int) -> Reconciler:
        """This reconciler with its store at `now_ms` (tests drive the database clock): the
        same providers, threads and events; it keeps nothing between cycles to share."""
        view = copy.copy(self)
        view._store = self._store.at(now_ms)
        return view

    def run_cycle(self, *, should_stop: Callable[[], bool] = lambda: False) -> CycleReport:
        started = self._clock()
        self._events.cycle_started(self._settings.owner)
        try:
            report = self._cycle(should_stop)
        except Exception as exc:
            self._events.cycle_failed(self._stage, exc, self._clock() - started)
            raise
        self._events.cycle_completed(report, self._clock() - started)
        return report

    def _cycle(self, should_stop: Callable[[], bool]) -> CycleReport:
        s, events, clock, store = self._settings, self._events, self._clock, self._store
        report = CycleReport(page_size=s.page_size)
        self._stage = Stage.CLAIM
        t0 = clock()
        items = store.claim_due_page(s.owner, s.page_size, s.recovery_lease_ms)
        events.claimed(items, clock() - t0)
        report.claimed = len(items)
        if not items:
            return report
        report.next_due_in_ms = _next_due_in_ms(items[0])
        if should_stop():
            self._stage = Stage.RELEASE
            t0 = clock()
            report.released = store.release_recovery_leases(items)
            events.released(items, report.released, clock() - t0)
            return report
        self._stage = Stage.INSPECT
        findings = self._inspect(items)
        report.findings.update(f.kind for f in findings.values())
        outcomes = self._outcomes(items, findings)
        self._stage = Stage.COMMIT
        events.before_commit(outcomes)
        t0 = clock()
        committed = store.commit_outcomes(outcomes)
        events.committed(outcomes, committed, clock() - t0)
        report.accepted, report.rejected = committed.accepted, committed.rejected
        return report

    def _inspect(self, items: Sequence[ClaimedItem]) -> dict[str, Finding]:
        """Findings for every item; nothing here holds a row lock or a transaction.

        A page provider gets one call for its items; any other provider one call per item,
        all concurrent. Each call waits at most the provider's timeout from the same start.
        A page provider that bounds its own time (`bounds_own_time`) runs on this thread,
        with no hand-off to the pool and back, while the pooled calls run.
        """
        t0 = self._clock()
        findings: dict[str, Finding] = {}
        unsupported: list[ClaimedItem] = []
        batches: dict[int, tuple[EvidenceProvider, list[DispatchIdentity]]] = {}
        for_action = self._registry.for_action
        for item in items:
            provider = for_action(item.identity.action_type)
            if provider is None:
                findings[item.identity.dispatch_id] = _UNSUPPORTED
                unsupported.append(item)
                continue
            batch = batches.get(id(provider))
            if batch is None:
                batch = batches[id(provider)] = (provider, [])
            batch[1].append(item.identity)
        self._events.inspecting(items)
        pending: list[_Pending] = []
        here: list[_Pending] = []
        for provider, identities in batches.values():
            label = self._provider_label(identities[0].action_type)
            shape = self._shapes[id(provider)]
            if shape is _Shape.PAGE_HERE:
                here.append(_Pending(provider, label, identities, Future()))
            elif shape is _Shape.PAGE:
                future = self._pool.submit(
                    _ask_page, cast(PageEvidenceProvider, provider), identities
                )
                pending.append(_Pending(provider, label, identities, future))
            else:
                pending.extend(
                    _Pending(provider, label, [i], self._pool.submit(_ask_one, provider, i))
                    for i in identities
                )
        started = self._clock()
        for call in here:  # while the pooled calls run
            _run_here(call.future, call.provider, call.identities)
        self._await_all(pending, started)
        calls: list[ProviderCall] = []
        for call in [*here, *pending]:
            timeout = call.provider.timeout_seconds or self._settings.default_timeout_seconds
            remaining = max(0.0, started + timeout - self._clock())
            done = call.collect(remaining, started, self._clock)
            calls.append(done)
            findings.update(done.findings)
        self._events.inspected(InspectedPage(findings, calls, unsupported, self._clock() - t0))
        return findings

    def _await_all(self, pending: Sequence[_Pending], started: float) -> None:
        """Wait for the pooled calls with one wake-up when all have answered (not one per
        call), none past its own provider's timeout from the common start."""
        default = self._settings.default_timeout_seconds
        deadline = {id(c): started + (c.provider.timeout_seconds or default) for c in pending}
        waiting = [c for c in pending if not c.future.done()]
        while waiting:
            soonest = min(deadline[id(c)] for c in waiting)
            wait(
                [c.future for c in waiting],
                timeout=max(0.0, soonest - self._clock()),
                return_when=ALL_COMPLETED,
            )
            now = self._clock()
            waiting = [c for c in waiting if not c.future.done() and deadline[id(c)] > now]

    def _provider_label(self, action_type: str) -> str:
        """The configured provider name of an action type, for metrics, spans and logs."""
        configured = self._registry.names.get(action_type)
        return configured or provider_name(self._registry.for_action(action_type))

    def _outcomes(
        self, items: Sequence[ClaimedItem], findings: Mapping[str, Finding]
    ) -> list[ItemOutcome]:
        # One random page id and the item's place in the page: as unique as a uuid4 per item
        # (122 random bits per page), with one read of the OS's random source per page.
        page_id = uuid.uuid4().hex
        escalation_for = self._registry.escalation_for
        outcomes = []
        for n, item in enumerate(items):
            finding = findings[item.identity.dispatch_id]
            outcomes.append(
                ItemOutcome(
                    item,
                    finding,
                    self._retry_delay_ms(item, finding),
                    f"auto-{page_id}-{n}",
                    escalation_for(item.identity.action_type).after_ms(finding.kind),
                )
            )
        return outcomes

    def _retry_delay_ms(self, item: ClaimedItem, finding: Finding) -> int:
        # Only a finding that leaves the control armed schedules a next scan; a verified or
        # human-bound one closes it or hands it over, and its delay is never read.
        if finding.kind.is_verified:
            return 0
        return self.backoff_ms(item.finding_count)

    def backoff_ms(self, finding_count: int) -> int:
        base, cap = self._settings.backoff_base_ms, self._settings.backoff_max_ms
        return backoff_ms(finding_count, base_ms=base, max_ms=cap, draw=self._rng.random())


def backoff_ms(finding_count: int, *, base_ms: int, max_ms: int, draw: float) -> int:
    """Capped exponential backoff with equal jitter: half fixed, half random (`draw` is a
    uniform number in [0, 1), the runtime's randomness)."""
    ceiling = min(max_ms, base_ms * int(2 ** min(finding_count, 30)))
    return ceiling // 2 + int(draw * (ceiling - ceiling // 2))


def provider_name(provider: EvidenceProvider | None) -> str:
    """A provider's label when the registry has no configured name for it (registries built
    in code): its `name` attribute, else its class name; `none` without a provider."""
    if provider is None:
        return "none"
    return str(getattr(provider, "name", None) or type(provider).__name__)


class _Shape(Enum):
    """How the reconciler asks a provider."""

    ITEM = "one call per item, on the pool"
    PAGE = "one call per page, on the pool"
    PAGE_HERE = "one call per page, on the cycle's thread (it bounds its own time)"


def _shape_of(provider: EvidenceProvider) -> _Shape:
    if not isinstance(provider, PageEvidenceProvider):
        return _Shape.ITEM
    if getattr(provider, "bounds_own_time", False) is True:
        return _Shape.PAGE_HERE
    return _Shape.PAGE


class _Answer(msgspec.Struct, frozen=True):
    """A provider's reply with the wall-clock start and duration of the call."""

    findings: Mapping[str, Finding]
    started_ns: int
    seconds: float


class _Pending(msgspec.Struct, frozen=True):
    provider: EvidenceProvider
    label: str
    identities: list[DispatchIdentity]
    future: Future[_Answer]

    def collect(
        self, timeout_seconds: float, submitted: float, clock: Callable[[], float]
    ) -> ProviderCall:
        failure: ProviderFailure | None = None
        error: BaseException | None = None
        unanswered = _UNAVAILABLE
        try:
            answer = self.future.result(timeout=timeout_seconds)
            answered, started_ns, seconds = answer.findings, answer.started_ns, answer.seconds
        except FutureTimeout:
            self.future.cancel()
            answered, failure = {}, ProviderFailure.TIMEOUT
        except Exception as exc:  # a provider bug must not stop the loop: evidence unavailable
            answered, failure, error = {}, ProviderFailure.ERROR, exc
        if failure is not None:
            seconds = clock() - submitted
            started_ns = time.time_ns() - int(seconds * 1e9)
            unanswered = Finding(FindingKind.UNAVAILABLE, failure=failure)
        findings = {i.dispatch_id: answered.get(i.dispatch_id, unanswered) for i in self.identities}
        if self.provider.capability is Capability.MANUAL_ONLY:
            findings = {dispatch_id: _guard(f) for dispatch_id, f in findings.items()}
        cause: str | None = None
        if failure is None:
            # A provider that could not reach or use its source says why on its findings.
            failed = next((f for f in findings.values() if f.failure is not None), None)
            failure, cause = (failed.failure, failed.cause) if failed else (None, None)
        return ProviderCall(
            self.label, self.identities, findings, started_ns, seconds, failure, error, cause
        )


def _timed(ask: Callable[[], Mapping[str, Finding]]) -> _Answer:
    # Wall-clock start for spans, monotonic duration; measured in the pool thread.
    started_ns, t0 = time.time_ns(), time.monotonic()
    findings = ask()
    return _Answer(findings, started_ns, time.monotonic() - t0)


def _run_here(
    future: Future[_Answer], provider: EvidenceProvider, identities: list[DispatchIdentity]
) -> None:
    """Run a page call on the caller's thread into a future, as the pool would have."""
    try:
        future.set_result(_ask_page(cast(PageEvidenceProvider, provider), identities))
    except Exception as exc:  # collected as `error`, like a pooled call's
        future.set_exception(exc)


def _ask_page(provider: PageEvidenceProvider, identities: list[DispatchIdentity]) -> _Answer:
    return _timed(lambda: provider.inspect_page(identities))


def _ask_one(provider: EvidenceProvider, identity: DispatchIdentity) -> _Answer:
    return _timed(lambda: {identity.dispatch_id: provider.inspect(identity)})


def _guard(finding: Finding) -> Finding:
    # A manual-only provider cannot settle anything automatically, whatever it returns.
    return _UNSUPPORTED if finding.kind.is_verified else finding


def _next_due_in_ms(item: ClaimedItem) -> int | None:
    """How long after the claim the next armed control falls due (the claim reads it)."""
    if item.next_due_at_ms is None or item.claimed_at_ms is None:
        return None
    return item.next_due_at_ms - item.claimed_at_ms
