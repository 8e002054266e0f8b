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

from resolver.domain import ClaimedItem, DispatchIdentity, Finding, FindingKind
from resolver.evidence import Capability, EvidenceProvider, PageEvidenceProvider, ProviderRegistry
from resolver.ports import CommitReport, ItemOutcome, RecoveryStore

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
    ) -> None:
        self._store = store
        self._registry = registry
        self._settings = settings
        self._rng = rng or random.Random()
        self._pool = ThreadPoolExecutor(
            max_workers=settings.inspect_concurrency, thread_name_prefix="inspect"
        )

    def close(self) -> None:
        # Threads stuck in a provider past its timeout are abandoned, never awaited.
        self._pool.shutdown(wait=False, cancel_futures=True)

    def run_cycle(
        self, *, now_ms: int | None = None, should_stop: Callable[[], bool] = lambda: False
    ) -> CycleReport:
        s = self._settings
        report = CycleReport(page_size=s.page_size)
        items = self._store.claim_due_page(s.owner, s.page_size, s.recovery_lease_ms, now_ms)
        report.claimed = len(items)
        if not items:
            return report
        if should_stop():
            report.released = self._store.release_recovery_leases(items, now_ms)
            return report
        findings = self.inspect(items)
        report.findings.update(f.kind for f in findings.values())
        outcomes = [self._outcome(item, findings[item.identity.dispatch_id]) for item in items]
        committed: CommitReport = self._store.commit_outcomes(outcomes, now_ms)
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
        calls: list[_Call] = []
        for provider, identities in batches.values():
            if isinstance(provider, PageEvidenceProvider):
                calls.append(
                    _Call(provider, identities, self._pool.submit(_ask_page, provider, identities))
                )
            else:
                calls.extend(
                    _Call(provider, [i], self._pool.submit(_ask_one, provider, i))
                    for i in identities
                )
        started = time.monotonic()
        for call in calls:
            timeout = call.provider.timeout_seconds or self._settings.default_timeout_seconds
            remaining = max(0.0, started + timeout - time.monotonic())
            findings.update(call.collect(remaining))
        return findings

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


@dataclass(frozen=True, slots=True)
class _Call:
    provider: EvidenceProvider
    identities: list[DispatchIdentity]
    future: Future[Mapping[str, Finding]]

    def collect(self, timeout_seconds: float) -> dict[str, Finding]:
        name = type(self.provider).__name__
        try:
            answered = dict(self.future.result(timeout=timeout_seconds))
        except FutureTimeout:
            self.future.cancel()
            log.warning("provider_timeout", provider=name, items=len(self.identities))
            answered = {}
        except Exception as exc:  # a provider bug must not stop the loop: evidence unavailable
            log.warning("provider_error", provider=name, error=type(exc).__name__)
            answered = {}
        return {
            i.dispatch_id: _guard(self.provider, answered.get(i.dispatch_id, _UNAVAILABLE))
            for i in self.identities
        }


def _ask_page(
    provider: PageEvidenceProvider, identities: list[DispatchIdentity]
) -> Mapping[str, Finding]:
    return provider.inspect_page(identities)


def _ask_one(provider: EvidenceProvider, identity: DispatchIdentity) -> Mapping[str, Finding]:
    return {identity.dispatch_id: provider.inspect(identity)}


def _guard(provider: EvidenceProvider, finding: Finding) -> Finding:
    # A manual-only provider cannot settle anything automatically, whatever it returns.
    if provider.capability is Capability.MANUAL_ONLY and finding.kind.is_verified:
        return _UNSUPPORTED
    return finding


def _log_outcome(outcome: ItemOutcome, committed: CommitReport) -> None:
    dispatch_id = outcome.item.identity.dispatch_id
    accepted = dispatch_id in committed.accepted
    # A committed verified outcome is on record in its resolution row and in the cycle line;
    # an info line per item would cost more CPU than the page commit. The rest stay at info.
    emit = log.debug if accepted and outcome.finding.kind.is_verified else log.info
    emit(
        "recovery_outcome",
        dispatch_id=dispatch_id,
        action_type=outcome.item.identity.action_type,
        finding=outcome.finding.kind.value,
        committed=accepted,
    )
