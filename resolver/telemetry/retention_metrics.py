"""Retention on /metrics: what `resolver prune` removed and when it last finished.

The prune is a short-lived process (a CronJob), so it exports nothing itself and needs no
Pushgateway: every run records its counts in `recovery_prune_runs`, batch by batch, and the
long-running replicas read that table with their other database-wide gauges. Every replica
shows the same figures; aggregate them with `max`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import structlog
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from resolver.core.errors import ResolverError
from resolver.retention.pruning import PruneSummary

log = structlog.get_logger("resolver.telemetry")


class PruneSummaryReader(Protocol):
    def prune_summary(self) -> PruneSummary: ...


class PruneCollector(Collector):
    """`resolver_pruned_dispatches_total`, `resolver_pruned_audit_dispatches_total` and
    `resolver_last_prune_timestamp_seconds`, read at most once per `ttl_seconds`."""

    def __init__(
        self,
        reader: PruneSummaryReader,
        *,
        ttl_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reader = reader
        self._ttl = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._summary: PruneSummary | None = None

    def describe(self) -> Iterable[Metric]:
        return _families(None)  # registering must not query the database

    def collect(self) -> Iterable[Metric]:
        return _families(self.summary())

    def summary(self) -> PruneSummary | None:
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= self._ttl:
                self._summary = self._read()
                self._read_at = self._clock()
            return self._summary

    def _read(self) -> PruneSummary | None:
        try:
            return self._reader.prune_summary()
        except ResolverError as exc:
            # The backlog collector already counts read errors; omit, never make up, figures.
            log.warning("prune_summary_read_failed", error=type(exc).__name__)
            return None


def _families(summary: PruneSummary | None) -> list[Metric]:
    pruned = CounterMetricFamily(
        "resolver_pruned_dispatches",
        "Settled dispatches whose execution, control and evidence `resolver prune` removed, "
        "over every recorded run (committed batches only). Database-wide; aggregate with max.",
    )
    audit = CounterMetricFamily(
        "resolver_pruned_audit_dispatches",
        "Dispatches whose audit facts (identity, resolution, authorization) were removed "
        "after their export. Database-wide; aggregate with max.",
    )
    last = GaugeMetricFamily(
        "resolver_last_prune_timestamp_seconds",
        "Unix time the last `resolver prune` run finished; absent until one has.",
    )
    if summary is not None:
        pruned.add_metric([], summary.dispatches_pruned)
        audit.add_metric([], summary.audit_pruned)
        if summary.last_finished_at_ms is not None:
            last.add_metric([], summary.last_finished_at_ms / 1000)
    return [pruned, audit, last]
