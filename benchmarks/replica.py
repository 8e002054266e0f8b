"""A resolver replica as `resolver run` builds it, plus a subscriber that times each phase.

Configuration comes from the same `RESOLVER_*` variables and RESOLVER_CONFIG provider file;
`build_replica` is the same composition root. The only additions are the ready/go handshake
(so every replica starts draining at the same instant), the timing subscriber on the
cycle-events seam, and the stats file written at exit.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from benchmarks.protocol import ProcessStats, await_go, write_stats
from resolver.cli import run_until_signalled, stop_signals_blocked
from resolver.composition import build_replica, configure_logging
from resolver.config import load_settings
from resolver.domain import ClaimedItem, CommitReport, ItemOutcome
from resolver.events import CycleEvents, CycleReport, InspectedPage


class PhaseTimes(CycleEvents):
    """Claim, inspect and commit times of every page, from the durations the events carry."""

    def __init__(self, stats: ProcessStats) -> None:
        self._stats = stats

    def claimed(self, items: Sequence[ClaimedItem], seconds: float) -> None:
        if items:  # claim-page latency: pages that claimed something
            self._stats.claim_ms.append(seconds * 1000)

    def inspected(self, page: InspectedPage) -> None:
        self._stats.inspect_ms.append(page.seconds * 1000)

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        self._stats.commit_ms.append(seconds * 1000)
        self._stats.pages += 1
        self._stats.resolved += len(report.accepted)

    def cycle_completed(self, report: CycleReport, seconds: float) -> None:
        self._stats.cycles += 1


def main(stats_path: str) -> None:
    configure_logging(os.environ.get("RESOLVER_LOG_LEVEL", "INFO").upper())
    stats = ProcessStats()
    settings = load_settings()
    # The same lifecycle and signal wiring as `resolver run`: SIGTERM stops the replica
    # within the grace period; blocked before any thread (pools) exists.
    with stop_signals_blocked():
        replica = build_replica(settings, subscribers=(PhaseTimes(stats),))
        try:
            replica.store.ping()
            await_go()
            run_until_signalled(replica, once=False, grace_seconds=settings.shutdown_grace_seconds)
        finally:
            replica.close()
            write_stats(stats_path, stats)


if __name__ == "__main__":
    main(sys.argv[1])
