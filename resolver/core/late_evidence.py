"""Late evidence after a human decision: the watcher that keeps looking, read-only.

A manual decision that claims an outcome opens a watch in the database (a trigger on the
resolution's insert). For `window_ms` after the decision, at a low cadence, a replica claims
due watches, asks the action type's automatic provider what it sees now, and records the
answer through one fenced statement: a verified finding becomes a late-evidence fact beside
the decision (agreeing or contradicting it) and closes the watch; anything else schedules the
next look. The terminal state never changes: nothing here writes an execution or a control.

It runs on the replica's loop thread between reconciler cycles (`run_if_due`), never more
often than its cadence, and costs the automatic path nothing but one clock read per cycle.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import msgspec

from resolver.core.domain import (
    DispatchIdentity,
    Finding,
    FindingKind,
    LateObservation,
    LateRecord,
    LateWatch,
)
from resolver.core.ports import LateEvidenceStore
from resolver.core.provider import (
    Capability,
    EvidenceProvider,
    PageEvidenceProvider,
    ProviderRegistry,
)
from resolver.core.runtime import Runtime

_UNAVAILABLE = Finding(FindingKind.UNAVAILABLE)
_UNSUPPORTED = Finding(FindingKind.UNSUPPORTED)

DEFAULT_WINDOW_SECONDS = 86_400
DEFAULT_CADENCE_SECONDS = 300.0


class LateEvidenceSettings(msgspec.Struct, frozen=True):
    """`window_ms` after a decision the provider keeps looking (0: never; open watches are
    then only closed); each watch is looked at again `cadence_ms` after its last look, and a
    replica runs a watcher cycle at most every `cadence_ms`, one page at a time."""

    owner: str
    window_ms: int = DEFAULT_WINDOW_SECONDS * 1000
    cadence_ms: int = int(DEFAULT_CADENCE_SECONDS * 1000)
    page_size: int = 16
    pages_per_cycle: int = 4
    """A cycle goes on to the next page only after a full one, and stops after this many."""
    expire_limit: int = 1_000
    """Watches whose window elapsed closed per cycle: one indexed update, so elapsed
    watches never pile up ahead of the due ones in the claim's index."""
    lease_ms: int = 60_000
    default_timeout_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.window_ms < 0 or self.cadence_ms <= 0:
            raise ValueError("late evidence: window >= 0 and cadence > 0")
        if min(self.page_size, self.pages_per_cycle, self.expire_limit) < 1:
            raise ValueError("late evidence: page size, pages and expire limit >= 1")


class LateCycleReport(msgspec.Struct, frozen=True):
    """What one watcher cycle did: watches closed by the window, claimed, and recorded."""

    expired: int = 0
    claimed: int = 0
    records: tuple[LateRecord, ...] = ()


class _Schedule:
    """When the next cycle is due on the runtime's clock; one per watcher, shared by its
    views (`at`)."""

    def __init__(self) -> None:
        self.next_at: float | None = None


class LateEvidenceWatcher:
    """Claims due watches, asks their providers, records the findings, fenced."""

    def __init__(
        self,
        store: LateEvidenceStore,
        registry: ProviderRegistry,
        settings: LateEvidenceSettings,
        runtime: Runtime | None = None,
    ) -> None:
        runtime = runtime or Runtime()
        self._store = store
        self._registry = registry
        self._settings = settings
        self._clock = runtime.clock
        self._events = runtime.events
        self._schedule = _Schedule()
        # A small pool of its own: a slow provider here never takes a reconciler thread.
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="late-evidence")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def at(self, now_ms: int) -> LateEvidenceWatcher:
        """This watcher with its store at `now_ms` (tests drive the database clock): the same
        providers, threads, events and cadence."""
        view = copy.copy(self)
        view._store = self._store.at(now_ms)
        return view

    def run_if_due(self) -> LateCycleReport | None:
        """One cycle if the cadence has passed on the runtime's clock since the last one (the
        first runs at once)."""
        now = self._clock()
        next_at = self._schedule.next_at
        if next_at is not None and now < next_at:
            return None
        self._schedule.next_at = now + self._settings.cadence_ms / 1000
        return self.run_cycle()

    def run_cycle(self) -> LateCycleReport:
        """Close what elapsed, then look at due watches, page after full page (bounded)."""
        s, store = self._settings, self._store
        expired = store.expire_late_watches(s.window_ms, s.expire_limit)
        claimed, records = 0, []
        for _ in range(s.pages_per_cycle if s.window_ms > 0 else 0):
            page = self._page()
            claimed += len(page[0])
            records.extend(page[1])
            if len(page[0]) < s.page_size:
                break
        return LateCycleReport(expired, claimed, tuple(records))

    def _page(self) -> tuple[list[LateWatch], list[LateRecord]]:
        s, store = self._settings, self._store
        watches = store.claim_late_watches(s.owner, s.page_size, s.lease_ms, s.window_ms)
        if not watches:
            return [], []
        findings = self._inspect(watches)
        page_id = uuid.uuid4().hex
        observations = [
            LateObservation(
                watch=w,
                finding=findings[w.identity.dispatch_id],
                observation_id=f"late-{page_id}-{n}",
                next_look_ms=s.cadence_ms,
            )
            for n, w in enumerate(watches)
        ]
        records = store.record_late_observations(s.owner, observations, s.window_ms)
        self._events.late_evidence(records)
        return watches, records

    def _inspect(self, watches: Sequence[LateWatch]) -> dict[str, Finding]:
        """A finding per watch. Only automatic providers are asked: an action type with no
        provider, or a manual-only one, is answered `unsupported`, which closes its watch."""
        findings: dict[str, Finding] = {}
        batches: dict[int, tuple[EvidenceProvider, list[DispatchIdentity]]] = {}
        for watch in watches:
            provider = self._registry.for_action(watch.identity.action_type)
            if provider is None or provider.capability is Capability.MANUAL_ONLY:
                findings[watch.identity.dispatch_id] = _UNSUPPORTED
            else:
                batches.setdefault(id(provider), (provider, []))[1].append(watch.identity)
        for provider, identities in batches.values():
            findings.update(self._ask(provider, identities))
        return findings

    def _ask(
        self, provider: EvidenceProvider, identities: list[DispatchIdentity]
    ) -> Mapping[str, Finding]:
        timeout = provider.timeout_seconds or self._settings.default_timeout_seconds
        ask: Callable[[], Mapping[str, Finding]]
        if isinstance(provider, PageEvidenceProvider):
            page = provider

            def ask() -> Mapping[str, Finding]:
                return page.inspect_page(identities)
        else:

            def ask() -> Mapping[str, Finding]:
                return {i.dispatch_id: provider.inspect(i) for i in identities}

        future = self._pool.submit(ask)
        try:
            answered = future.result(timeout=timeout)
        except FutureTimeout:
            future.cancel()
            answered = {}
        except Exception:  # a provider bug only means: nothing seen this time
            answered = {}
        return {i.dispatch_id: answered.get(i.dispatch_id, _UNAVAILABLE) for i in identities}
