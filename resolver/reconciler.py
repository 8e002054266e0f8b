"""One resolver cycle: claim a page, inspect outside any transaction, commit fenced."""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

import structlog
from opentelemetry.trace import Tracer

from resolver.domain import (
    ClaimedItem,
    CommitReport,
    DispatchIdentity,
    Finding,
    FindingKind,
    ItemOutcome,
    ProviderFailure,
)
from resolver.errors import StorageUnavailable
from resolver.evidence import Capability, EvidenceProvider, PageEvidenceProvider, ProviderRegistry
from resolver.history import NULL_HISTORY, CrashPoint, History, claimed_fields, crash_now
from resolver.ports import RecoveryStore
from resolver.telemetry.observer import RecoveryObserver, Telemetry

log = structlog.get_logger("resolver.reconciler")

_UNAVAILABLE = Finding(FindingKind.UNAVAILABLE)
_UNSUPPORTED = Finding(FindingKind.UNSUPPORTED)


@dataclass(frozen=True, slots=True)
class ReconcilerSettings:
    owner: str
    page_size: int = 16
    recovery_lease_ms: int = 60_000
    backoff_base_ms: int = 5_000
    backoff_max_ms: int = 600_000
    default_timeout_seconds: float = 10.0
    inspect_concurrency: int = 16


@dataclass(slots=True)
class CycleReport:
    page_size: int
    claimed: int = 0
    findings: Counter[FindingKind] = field(default_factory=Counter)
    accepted: frozenset[str] = frozenset()
    rejected: frozenset[str] = frozenset()
    released: int = 0

    @property
    def page_full(self) -> bool:
        """A full page means more may be due: the worker goes again without sleeping."""
        return self.released == 0 and self.claimed >= self.page_size


class Reconciler:
    """Stateless between cycles: everything it knows about a dispatch came from its claim."""

    def __init__(
        self,
        store: RecoveryStore,
        registry: ProviderRegistry,
        settings: ReconcilerSettings,
        *,
        rng: random.Random | None = None,
        telemetry: Telemetry | None = None,
        history: History = NULL_HISTORY,
        crash_at: CrashPoint | None = None,
    ) -> None:
        self._store = store
        self._history = history
        self._crash_at = crash_at
        self._registry = registry
        self._settings = settings
        self._rng = rng or random.Random()
        telemetry = telemetry or Telemetry()
        self._observer: RecoveryObserver = telemetry.observer
        self._tracer: Tracer = telemetry.tracer
        self._pool = ThreadPoolExecutor(
            max_workers=settings.inspect_concurrency, thread_name_prefix="inspect"
        )

    def close(self) -> None:
        # Threads stuck in a provider past its timeout are abandoned, never awaited.
        self._pool.shutdown(wait=False, cancel_futures=True)

    def run_cycle(
        self, *, now_ms: int | None = None, should_stop: Callable[[], bool] = lambda: False
    ) -> CycleReport:
        started = time.monotonic()
        with (
            structlog.contextvars.bound_contextvars(replica_id=self._settings.owner),
            self._tracer.start_as_current_span("resolver.cycle") as span,
        ):
            try:
                report = self._cycle(now_ms, should_stop)
            except StorageUnavailable:
                self._observer.cycle_failed("storage_unavailable", time.monotonic() - started)
                raise
            except Exception:
                self._observer.cycle_failed("error", time.monotonic() - started)
                raise
            span.set_attributes(_cycle_attributes(self._settings.owner, report))
        self._observer.cycle_completed(time.monotonic() - started)
        return report

    def _cycle(self, now_ms: int | None, should_stop: Callable[[], bool]) -> CycleReport:
        s = self._settings
        report = CycleReport(page_size=s.page_size)
        items = self._claim(now_ms)
        report.claimed = len(items)
        if not items:
            return report
        self._boundary(CrashPoint.CLAIMED)
        if should_stop():
            with self._tracer.start_as_current_span("resolver.release"):
                report.released = self._store.release_recovery_leases(items, now_ms)
            self._observer.released(len(items), report.released)
            return report
        findings = self.inspect(items)
        report.findings.update(f.kind for f in findings.values())
        outcomes = [self._outcome(item, findings[item.identity.dispatch_id]) for item in items]
        for outcome in outcomes:
            action_type = outcome.item.identity.action_type
            provider = self._provider_label(action_type)
            self._observer.found(action_type, provider, outcome.finding)
        self._boundary(CrashPoint.BEFORE_COMMIT)
        committed = self._commit(outcomes, now_ms)
        self._boundary(CrashPoint.AFTER_COMMIT)
        report.accepted, report.rejected = committed.accepted, committed.rejected
        for outcome in outcomes:
            _log_outcome(outcome, committed)
        log.info(
            "recovery_cycle",
            claimed=report.claimed,
            accepted=len(report.accepted),
            rejected=len(report.rejected),
            findings={kind.value: n for kind, n in report.findings.items()},
        )
        return report

    def _claim(self, now_ms: int | None) -> list[ClaimedItem]:
        s = self._settings
        self._history.record("invoke", "claim")
        with self._tracer.start_as_current_span("resolver.claim") as span:
            t0 = time.monotonic()
            try:
                items = self._store.claim_due_page(
                    s.owner, s.page_size, s.recovery_lease_ms, now_ms
                )
            except StorageUnavailable as exc:
                # The claim may have committed before the connection died: outcome unknown.
                self._history.record("info", "claim", error=type(exc).__name__)
                raise
            self._observer.claimed(len(items), time.monotonic() - t0)
            span.set_attribute("resolver.claimed", len(items))
        self._history.record("ok", "claim", items=[claimed_fields(i) for i in items])
        return items

    def _commit(self, outcomes: Sequence[ItemOutcome], now_ms: int | None) -> CommitReport:
        self._history.record("invoke", "commit", items=[_outcome_fields(o) for o in outcomes])
        with self._tracer.start_as_current_span("resolver.commit") as span:
            t0 = time.monotonic()
            try:
                committed: CommitReport = self._store.commit_outcomes(outcomes, now_ms)
            except StorageUnavailable as exc:
                self._history.record("info", "commit", error=type(exc).__name__)
                raise
            self._observer.committed(outcomes, committed, time.monotonic() - t0)
            span.set_attributes(
                {
                    "resolver.items": len(outcomes),
                    "resolver.accepted": len(committed.accepted),
                    "resolver.fence_rejected": len(committed.rejected),
                }
            )
        self._history.record(
            "ok", "commit", accepted=sorted(committed.accepted), rejected=sorted(committed.rejected)
        )
        return committed

    def _boundary(self, point: CrashPoint) -> None:
        if point is self._crash_at:
            crash_now(self._history, point)

    def inspect(self, items: Sequence[ClaimedItem]) -> dict[str, Finding]:
        """Findings for every item; nothing here holds a row lock or a transaction.

        A page provider gets one call for its items; any other provider one call per item,
        all concurrent. Each call waits at most the provider's timeout from the same start.
        """
        findings: dict[str, Finding] = {}
        batches: dict[int, tuple[EvidenceProvider, list[DispatchIdentity]]] = {}
        for item in items:
            provider = self._registry.for_action(item.identity.action_type)
            if provider is None:
                findings[item.identity.dispatch_id] = _UNSUPPORTED
            else:
                batches.setdefault(id(provider), (provider, []))[1].append(item.identity)
        for item in items:
            self._history.record("invoke", "inspect", **_lease_fields(item))
        calls: list[_Call] = []
        for provider, identities in batches.values():
            label = self._provider_label(identities[0].action_type)
            if isinstance(provider, PageEvidenceProvider):
                future = self._pool.submit(_ask_page, provider, identities)
                calls.append(_Call(provider, label, identities, future))
            else:
                calls.extend(
                    _Call(provider, label, [i], self._pool.submit(_ask_one, provider, i))
                    for i in identities
                )
        self._boundary(CrashPoint.INSPECTING)
        started = time.monotonic()
        for call in calls:
            timeout = call.provider.timeout_seconds or self._settings.default_timeout_seconds
            remaining = max(0.0, started + timeout - time.monotonic())
            result = call.collect(remaining, started)
            self._record_inspect(call, result)
            findings.update(result.findings)
        for item in items:
            finding = findings[item.identity.dispatch_id].kind.value
            self._history.record("ok", "inspect", **_lease_fields(item), finding=finding)
        return findings

    def _provider_label(self, action_type: str) -> str:
        """The configured provider name of an action type, for metrics, spans and logs."""
        configured = self._registry.names.get(action_type)
        return configured or provider_name(self._registry.for_action(action_type))

    def _record_inspect(self, call: _Call, result: _Result) -> None:
        provider = call.label
        self._observer.inspected(provider, result.seconds, result.failure)
        # Spans are made here, on the cycle's thread, with the times measured in the pool:
        # the cycle span is their parent without carrying context into worker threads.
        end_ns = result.started_ns + int(result.seconds * 1e9)
        for identity in call.identities:
            attributes = {
                "resolver.provider": provider,
                "resolver.action_type": identity.action_type,
                "resolver.dispatch_id": identity.dispatch_id,
                "resolver.finding": result.findings[identity.dispatch_id].kind.value,
            }
            if result.failure is not None:
                attributes["resolver.provider_failure"] = result.failure.value
            span = self._tracer.start_span(
                "resolver.inspect", start_time=result.started_ns, attributes=attributes
            )
            span.end(end_time=end_ns)

    def _outcome(self, item: ClaimedItem, finding: Finding) -> ItemOutcome:
        return ItemOutcome(
            item=item,
            finding=finding,
            retry_delay_ms=self.backoff_ms(item.finding_count),
            mutation_id=f"auto-{uuid.uuid4()}",
        )

    def backoff_ms(self, finding_count: int) -> int:
        """Capped exponential backoff with equal jitter: half fixed, half random."""
        s = self._settings
        ceiling = min(s.backoff_max_ms, s.backoff_base_ms * int(2 ** min(finding_count, 30)))
        return ceiling // 2 + int(self._rng.random() * (ceiling - ceiling // 2))


def provider_name(provider: EvidenceProvider | None) -> str:
    """A provider's label when the registry has no configured name for it (registries built
    in code): its `name` attribute, else its class name; `none` without a provider."""
    if provider is None:
        return "none"
    return str(getattr(provider, "name", None) or type(provider).__name__)


@dataclass(frozen=True, slots=True)
class _Answer:
    """A provider's reply with the wall-clock start and duration of the call."""

    findings: Mapping[str, Finding]
    started_ns: int
    seconds: float


@dataclass(frozen=True, slots=True)
class _Result:
    findings: dict[str, Finding]
    started_ns: int
    seconds: float
    failure: ProviderFailure | None


@dataclass(frozen=True, slots=True)
class _Call:
    provider: EvidenceProvider
    label: str
    identities: list[DispatchIdentity]
    future: Future[_Answer]

    def collect(self, timeout_seconds: float, submitted: float) -> _Result:
        name = self.label
        try:
            answer = self.future.result(timeout=timeout_seconds)
        except FutureTimeout:
            self.future.cancel()
            log.warning("provider_timeout", provider=name, items=len(self.identities))
            return self._failed(ProviderFailure.TIMEOUT, submitted)
        except Exception as exc:  # a provider bug must not stop the loop: evidence unavailable
            log.warning("provider_error", provider=name, error=type(exc).__name__)
            return self._failed(ProviderFailure.ERROR, submitted)
        answered = answer.findings
        findings = {
            i.dispatch_id: _guard(self.provider, answered.get(i.dispatch_id, _UNAVAILABLE))
            for i in self.identities
        }
        # A provider that could not reach or use its source says why on its findings.
        failure = next((f.failure for f in findings.values() if f.failure is not None), None)
        return _Result(findings, answer.started_ns, answer.seconds, failure)

    def _failed(self, failure: ProviderFailure, submitted: float) -> _Result:
        seconds = time.monotonic() - submitted
        unavailable = _guard(self.provider, Finding(FindingKind.UNAVAILABLE, failure=failure))
        findings = {i.dispatch_id: unavailable for i in self.identities}
        return _Result(findings, time.time_ns() - int(seconds * 1e9), seconds, failure)


def _timed(ask: Callable[[], Mapping[str, Finding]]) -> _Answer:
    started_ns, t0 = time.time_ns(), time.monotonic()
    findings = ask()
    return _Answer(findings, started_ns, time.monotonic() - t0)


def _ask_page(provider: PageEvidenceProvider, identities: list[DispatchIdentity]) -> _Answer:
    return _timed(lambda: provider.inspect_page(identities))


def _ask_one(provider: EvidenceProvider, identity: DispatchIdentity) -> _Answer:
    return _timed(lambda: {identity.dispatch_id: provider.inspect(identity)})


def _guard(provider: EvidenceProvider, finding: Finding) -> Finding:
    # A manual-only provider cannot settle anything automatically, whatever it returns.
    if provider.capability is Capability.MANUAL_ONLY and finding.kind.is_verified:
        return _UNSUPPORTED
    return finding


def outcome_label(outcome: ItemOutcome, committed: CommitReport) -> str:
    """What committing this finding did: resolved_*, manual, retry, or fence_rejected."""
    if outcome.item.identity.dispatch_id not in committed.accepted:
        return "fence_rejected"
    kind = outcome.finding.kind
    if kind.is_verified:
        return f"resolved_{outcome.finding.outcome}"
    return "manual" if kind.needs_human else "retry"


def _lease_fields(item: ClaimedItem) -> dict[str, object]:
    return {"dispatch_id": item.identity.dispatch_id, "token": item.recovery_token}


def _outcome_fields(outcome: ItemOutcome) -> dict[str, object]:
    return {
        **_lease_fields(outcome.item),
        "recovery_version": outcome.item.recovery_version,
        "execution_version": outcome.item.execution_version,
        "finding": outcome.finding.kind.value,
        "evidence_digest": outcome.finding.evidence_digest,
    }


def _log_outcome(outcome: ItemOutcome, committed: CommitReport) -> None:
    # One line per item, whatever happened: the audit trail an operator greps by dispatch id.
    dispatch_id = outcome.item.identity.dispatch_id
    log.info(
        "recovery_outcome",
        dispatch_id=dispatch_id,
        action_type=outcome.item.identity.action_type,
        finding=outcome.finding.kind.value,
        outcome=outcome_label(outcome, committed),
        committed=dispatch_id in committed.accepted,
    )


def _cycle_attributes(owner: str, report: CycleReport) -> dict[str, str | int]:
    return {
        "resolver.replica_id": owner,
        "resolver.claimed": report.claimed,
        "resolver.accepted": len(report.accepted),
        "resolver.fence_rejected": len(report.rejected),
        "resolver.released": report.released,
    }
