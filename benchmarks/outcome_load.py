"""The processes of the outcome-feed benchmark (benchmarks.outcomes), run as

    python -m benchmarks.outcome_load complete URL PREFIX INDEX SLICES RATE STATS_PATH
    python -m benchmarks.outcome_load follow URL WAKE CONSUMER RECORDS_PATH

`complete`: an executor that completes its slice of the seeded executing executions under
PREFIX (every SLICES-th, from INDEX), one per transaction, through the product's own
statement (`execution_complete`), at RATE completions a second (0: as fast as it can); it says
`ready`, waits for `go`, and once its slice is done waits for SIGTERM (the harness reads its CPU
from /proc meanwhile), then writes each completion's round trip (commit_ms) to STATS_PATH.

`follow`: the registered consumer CONSUMER following the feed with `OutcomeFeed.follow` (WAKE
`listen` or `poll`, the SDK's defaults otherwise; its cursor saved after each batch, which is
how the harness sees how far it got) until SIGTERM, then writes one line per record it
received: its cursor and when it arrived (`time.time_ns()`, the host clock the database's
commit timestamps are on).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import psycopg

from benchmarks.protocol import ProcessStats, await_go, write_stats
from resolver.db.statements import statement
from resolver.outcomes import OutcomeFeed, OutcomeRecord, Wake

OWNER = "bench-executor"
SEEDED_VERSION = 2
_stop = threading.Event()


def complete(url: str, prefix: str, index: int, slices: int, rate: float) -> ProcessStats:
    stats = ProcessStats()
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT dispatch_id, token::text FROM approved_action_executions"
            " WHERE dispatch_id >= %s AND dispatch_id < %s AND state = 'executing'"
            " ORDER BY dispatch_id",
            (prefix, prefix + "\uffff"),
        ).fetchall()
        mine = rows[index::slices]
        call = statement("execution_complete")
        await_go()
        began = time.perf_counter()
        for n, (dispatch_id, token) in enumerate(mine):
            if rate > 0:
                # A steady arrival rate: each completion at its own instant, not after the last.
                if _stop.wait(max(0.0, began + n / rate - time.perf_counter())):
                    break
            elif _stop.is_set():
                break
            started = time.perf_counter()
            conn.execute(
                call,
                {
                    "dispatch_id": dispatch_id,
                    "owner": OWNER,
                    "token": token,
                    "version": SEEDED_VERSION,
                    "outcome": "succeeded",
                    "result_code": "ok",
                    "mutation_id": f"m-{dispatch_id}",
                    "evidence_digest": None,
                    "now_ms": None,
                },
            ).fetchall()
            stats.commit_ms.append((time.perf_counter() - started) * 1000)
            stats.resolved += 1
        # Connected until the harness has read its backend's CPU too.
        _stop.wait()
    return stats


def follow(url: str, wake: str, consumer: str, records_path: str) -> None:
    received: list[tuple[str, int]] = []

    def handle(record: OutcomeRecord) -> None:
        received.append((record.cursor, time.time_ns()))

    with OutcomeFeed(url, wake=Wake(wake)) as feed:
        print("ready", flush=True)
        feed.follow(consumer, handle, stop=_stop)
    Path(records_path).write_text("".join(f"{c}\t{ns}\n" for c, ns in received), encoding="utf-8")


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGTERM, lambda *_: _stop.set())
    if argv[0] == "complete":
        url, prefix, index, slices, rate, stats_path = argv[1:7]
        write_stats(stats_path, complete(url, prefix, int(index), int(slices), float(rate)))
    elif argv[0] == "follow":
        follow(*argv[1:5])
    else:
        raise SystemExit(f"unknown process {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
