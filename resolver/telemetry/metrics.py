"""Prometheus metrics: the reconciler's counters and histograms, and the cached backlog."""

from __future__ import annotations

import platform
import threading
import time
from collections import Counter as CollectionsCounter
from collections.abc import Callable, Iterable, Sequence

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from resolver import __version__
from resolver.core.domain import (
    BacklogSnapshot,
    ClaimedItem,
    CommitReport,
    FindingKind,
    ItemOutcome,
    LateRecord,
    Outcome,
    ResolutionSource,
)
from resolver.core.errors import ResolverError, StorageUnavailable
from resolver.core.events import CycleEvents, CycleReport, InspectedPage, Stage
from resolver.core.ports import BacklogReader

log = structlog.get_logger("resolver.telemetry")

PREFIX = "resolver"
# Inspect and cycle times are bounded by the provider timeout and the recovery lease
# (defaults 10 s and 60 s): the buckets reach that far.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
PAGE_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64)
DEFAULT_COUNT_CAP = 10_000


UNSUPPORTED = FindingKind.UNSUPPORTED.value


class ResolverMetrics(CycleEvents):
    """The reconciler's metrics on one registry: a subscriber of the cycle events."""

    def __init__(self, registry: CollectorRegistry, *, wall_clock: Callable[[], float] = time.time):
        self.registry = registry
        self._wall_clock = wall_clock
        self.cycles = Counter(
            f"{PREFIX}_cycles",
            "Reconciler cycles by result (completed, storage_unavailable, error).",
            ["result"],
            registry=registry,
        )
        self.findings = Counter(
            f"{PREFIX}_findings",
            "Findings of inspected dispatches by action type, provider and finding.",
            ["action_type", "provider", "finding"],
            registry=registry,
        )
        self.resolutions = resolutions_counter(registry)
        self.fence_rejections = Counter(
            f"{PREFIX}_fence_rejections",
            "Items whose fenced write was refused because the claim went stale, by stage.",
            ["stage"],
            registry=registry,
        )
        self.escalations = Counter(
            f"{PREFIX}_escalations",
            "Dispatches the page commit sent to the manual queue because a non-final finding "
            "outlasted its action type's window (manual_reason evidence_window_elapsed), by "
            "action type and the finding that outlasted it.",
            ["action_type", "finding"],
            registry=registry,
        )
        self.contradictions = Counter(
            f"{PREFIX}_decision_contradictions",
            "Manual decisions that verified evidence observed after them contradicts (the "
            "terminal state is unchanged: a person must look), by action type.",
            ["action_type"],
            registry=registry,
        )
        self.late_findings = Counter(
            f"{PREFIX}_late_evidence",
            "Verified findings recorded after a manual decision, by action type and whether "
            "they agree with it (true, false).",
            ["action_type", "agrees"],
            registry=registry,
        )
        self.provider_errors = Counter(
            f"{PREFIX}_provider_errors",
            "Provider calls that could not answer, by provider and kind: outage, timeout "
            "(transient), configuration (GRANT, query, credentials), error (the provider raised).",
            ["provider", "kind"],
            registry=registry,
        )
        self.claim_seconds = Histogram(
            f"{PREFIX}_claim_duration_seconds",
            "Time to claim one page.",
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.inspect_seconds = Histogram(
            f"{PREFIX}_inspect_duration_seconds",
            "Time of one provider call (one item, or one page for a page provider).",
            ["provider"],
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.commit_seconds = Histogram(
            f"{PREFIX}_commit_duration_seconds",
            "Time to commit one page of outcomes.",
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.cycle_seconds = Histogram(
            f"{PREFIX}_cycle_duration_seconds",
            "Time of one completed cycle: claim, inspect and commit.",
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.page_size = Histogram(
            f"{PREFIX}_claim_page_size",
            "Dispatches claimed per cycle.",
            registry=registry,
            buckets=PAGE_BUCKETS,
        )
        self.last_cycle = Gauge(
            f"{PREFIX}_last_cycle_timestamp_seconds",
            "Unix time of the last completed cycle (process start until the first one).",
            registry=registry,
        )
        # Start time, not 0: a replica that has not cycled yet is not "stalled for 56 years".
        self.last_cycle.set(wall_clock())
        # Known label values start at 0 so rate() and increase() see the first event.
        for result in ("completed", "storage_unavailable", "error"):
            self.cycles.labels(result)
        for stage in ("commit", "release"):
            self.fence_rejections.labels(stage)
        for outcome in Outcome:
            self.resolutions.labels(ResolutionSource.AUTOMATIC.value, outcome.value)

    def claimed(self, items: Sequence[ClaimedItem], seconds: float) -> None:
        self.claim_seconds.observe(seconds)
        self.page_size.observe(len(items))

    def inspected(self, page: InspectedPage) -> None:
        # Counted per page, one increment per label set: a label look-up per item cost more
        # than the rest of the metrics together.
        findings: CollectionsCounter[tuple[str, str, str]] = CollectionsCounter()
        for call in page.calls:
            self.inspect_seconds.labels(call.label).observe(call.seconds)
            if call.failure is not None:
                self.provider_errors.labels(call.label, call.failure.value).inc()
            found = call.findings
            findings.update(
                (i.action_type, call.label, found[i.dispatch_id].kind.value)
                for i in call.identities
            )
        for item in page.unsupported:  # no provider configured: no call, label `none`
            findings[(item.identity.action_type, "none", UNSUPPORTED)] += 1
        for labels, n in findings.items():
            self.findings.labels(*labels).inc(n)

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        self.commit_seconds.observe(seconds)
        if report.rejected:
            self.fence_rejections.labels("commit").inc(len(report.rejected))
        resolved: CollectionsCounter[str] = CollectionsCounter()
        for outcome in outcomes:
            result = outcome.finding.outcome
            if result is not None and outcome.item.identity.dispatch_id in report.accepted:
                resolved[result.value] += 1
        for result_value, n in resolved.items():
            self.resolutions.labels(ResolutionSource.AUTOMATIC.value, result_value).inc(n)
        for outcome in outcomes:
            if outcome.item.identity.dispatch_id in report.escalated:
                action_type = outcome.item.identity.action_type
                self.escalations.labels(action_type, outcome.finding.kind.value).inc()

    def late_evidence(self, records: Sequence[LateRecord]) -> None:
        for record in records:
            if record.recorded:
                action_type = record.watch.identity.action_type
                agrees = "true" if record.agrees else "false"
                self.late_findings.labels(action_type, agrees).inc()
                if record.contradicts:
                    self.contradictions.labels(action_type).inc()

    def released(self, items: Sequence[ClaimedItem], released: int, seconds: float) -> None:
        if len(items) > released:
            self.fence_rejections.labels("release").inc(len(items) - released)

    def cycle_completed(self, report: CycleReport, seconds: float) -> None:
        self.cycles.labels("completed").inc()
        self.cycle_seconds.observe(seconds)
        self.last_cycle.set(self._wall_clock())

    def cycle_failed(self, stage: Stage, error: BaseException, seconds: float) -> None:
        # A failed cycle's time says nothing about the work; only count it.
        reason = "storage_unavailable" if isinstance(error, StorageUnavailable) else "error"
        self.cycles.labels(reason).inc()


def resolutions_counter(registry: CollectorRegistry) -> Counter:
    """`resolver_resolutions_total{source,outcome}`: the worker counts `automatic`, the API
    process `manual`, so one family sums every resolution whichever process committed it."""
    return Counter(
        f"{PREFIX}_resolutions",
        "Committed resolutions by source (automatic, manual) and outcome.",
        ["source", "outcome"],
        registry=registry,
    )


def register_build_info(
    registry: CollectorRegistry, schema_revision: str, *, name: str = "build"
) -> None:
    """`resolver_<name>_info{version,python_version,schema_revision} 1`."""
    Info(f"{PREFIX}_{name}", "Version of this resolver build.", registry=registry).info(
        {
            "version": __version__,
            "python_version": platform.python_version(),
            "schema_revision": schema_revision,
        }
    )


def register_liveness_bound(registry: CollectorRegistry, seconds: float) -> None:
    """`resolver_liveness_bound_seconds`: when /healthz starts failing without a cycle end.

    A healthy loop ends a cycle at least every half of it, so the stall alert compares the
    last cycle's age with this and fires before the kubelet restarts the replica.
    """
    Gauge(
        f"{PREFIX}_liveness_bound_seconds",
        "Seconds without a finished cycle after which /healthz fails (twice the longest "
        "healthy gap between cycle ends).",
        registry=registry,
    ).set(seconds)


class BacklogCollector(Collector):
    """Backlog gauges read from PostgreSQL at most once per `ttl_seconds`.

    Every replica exports the same database-wide figures; alerts aggregate them with `max`.
    A failed read is cached for the same interval, so a database outage does not make
    every scrape wait for a connect timeout; the figures are then omitted, not made up.
    """

    def __init__(
        self,
        reader: BacklogReader,
        *,
        ttl_seconds: float = 5.0,
        count_cap: int = DEFAULT_COUNT_CAP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reader = reader
        self._ttl = ttl_seconds
        self._cap = count_cap
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._snapshot: BacklogSnapshot | None = None
        self._errors = 0

    def describe(self) -> Iterable[Metric]:
        # Names only: registering must not query the database.
        return [*_backlog_families(None, self._cap), self._error_family()]

    def collect(self) -> Iterable[Metric]:
        snapshot = self.snapshot()
        return [*_backlog_families(snapshot, self._cap), self._error_family()]

    def snapshot(self) -> BacklogSnapshot | None:
        """The cached snapshot, refreshed when older than the TTL (one reader at a time)."""
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= self._ttl:
                self._snapshot = self._read()
                self._read_at = self._clock()
            return self._snapshot

    def _read(self) -> BacklogSnapshot | None:
        try:
            return self._reader.backlog_snapshot(self._cap)
        except ResolverError as exc:
            self._errors += 1
            log.warning("backlog_read_failed", error=type(exc).__name__)
            return None

    def _error_family(self) -> CounterMetricFamily:
        family = CounterMetricFamily(
            f"{PREFIX}_backlog_read_errors",
            "Backlog reads that failed (the backlog gauges are omitted until one succeeds).",
        )
        family.add_metric([], self._errors)
        return family


def _backlog_families(snapshot: BacklogSnapshot | None, cap: int) -> list[Metric]:
    by_queue = GaugeMetricFamily(
        f"{PREFIX}_backlog_dispatches",
        "Open recovery controls by queue: due (claimable now), waiting, manual. "
        "Database-wide; aggregate replicas with max.",
        labels=["queue"],
    )
    by_type = GaugeMetricFamily(
        f"{PREFIX}_backlog_action_type_dispatches",
        "Open recovery controls by queue and action type. Database-wide.",
        labels=["queue", "action_type"],
    )
    oldest_claimable = GaugeMetricFamily(
        f"{PREFIX}_oldest_claimable_age_seconds",
        "How long the oldest claimable control (due, not leased) has been due; 0 when none.",
    )
    oldest_manual = GaugeMetricFamily(
        f"{PREFIX}_oldest_manual_age_seconds",
        "How long the oldest control has waited in the manual queue; 0 when none.",
    )
    proposals = GaugeMetricFamily(
        f"{PREFIX}_open_proposals",
        "Two-person proposals waiting for a second person (neither closed nor expired). "
        "Database-wide; aggregate replicas with max.",
    )
    oldest_proposal = GaugeMetricFamily(
        f"{PREFIX}_oldest_open_proposal_age_seconds",
        "How long the oldest open two-person proposal has waited for a second person; 0 when none.",
    )
    count_cap = GaugeMetricFamily(
        f"{PREFIX}_backlog_count_cap",
        "Backlog counts stop at this many controls per index: a count at the cap means more.",
    )
    count_cap.add_metric([], cap)
    if snapshot is not None:
        for queue, count in snapshot.by_queue().items():
            by_queue.add_metric([queue], count)
        for (queue, action_type), count in sorted(snapshot.dispatches.items()):
            by_type.add_metric([queue, action_type], count)
        oldest_claimable.add_metric([], snapshot.oldest_claimable_age_seconds)
        oldest_manual.add_metric([], snapshot.oldest_manual_age_seconds)
        proposals.add_metric([], snapshot.open_proposals)
        oldest_proposal.add_metric([], snapshot.oldest_open_proposal_age_seconds)
    return [
        by_queue,
        by_type,
        oldest_claimable,
        oldest_manual,
        proposals,
        oldest_proposal,
        count_cap,
    ]
