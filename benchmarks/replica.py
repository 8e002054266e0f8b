"""A resolver replica as `resolver run` builds it, plus timers around claim and commit.

Configuration comes from the same `RESOLVER_*` variables and RESOLVER_CONFIG provider file;
`build_replica` is the same composition root. The only additions are the ready/go handshake
(so every replica starts draining at the same instant) and the stats file written at exit.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.protocol import ProcessStats, await_go, write_stats
from resolver.composition import build_replica, configure_logging
from resolver.config import load_settings
from resolver.domain import ClaimedItem, CommitReport, Finding, ItemOutcome


class TimedStore:
    """Delegates to the real store and records how long claims and commits take."""

    def __init__(self, store: Any, stats: ProcessStats) -> None:
        self._store = store
        self._stats = stats

    def claim_due_page(
        self, owner: str, page_size: int, lease_ms: int, now_ms: int | None = None
    ) -> list[ClaimedItem]:
        started = time.perf_counter()
        items: list[ClaimedItem] = self._store.claim_due_page(owner, page_size, lease_ms, now_ms)
        if items:  # claim-page latency: pages that claimed something
            self._stats.claim_ms.append((time.perf_counter() - started) * 1000)
        return items

    def commit_outcomes(
        self, outcomes: Sequence[ItemOutcome], now_ms: int | None = None
    ) -> CommitReport:
        started = time.perf_counter()
        report: CommitReport = self._store.commit_outcomes(outcomes, now_ms)
        self._stats.commit_ms.append((time.perf_counter() - started) * 1000)
        self._stats.pages += 1
        self._stats.resolved += len(report.accepted)
        return report

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def main(stats_path: str) -> None:
    configure_logging(os.environ.get("RESOLVER_LOG_LEVEL", "INFO").upper())
    stats = ProcessStats()
    replica = build_replica(load_settings())
    # Benchmark hooks: time the store calls and the inspection of each page.
    replica.reconciler._store = TimedStore(replica.store, stats)
    inspect = replica.reconciler.inspect

    def timed_inspect(items: Sequence[ClaimedItem]) -> dict[str, Finding]:
        started = time.perf_counter()
        findings = inspect(items)
        stats.inspect_ms.append((time.perf_counter() - started) * 1000)
        return findings

    replica.reconciler.inspect = timed_inspect  # type: ignore[method-assign]
    replica.store.ping()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: replica.worker.request_stop())
    await_go()
    try:
        replica.worker.run()
    finally:
        replica.close()
        stats.cycles = replica.worker.cycles_completed
        write_stats(stats_path, stats)


if __name__ == "__main__":
    main(sys.argv[1])
