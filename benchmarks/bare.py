"""The bare loop: the resolver's claim statement and a plain-SQL page commit, nothing else.

It is the ceiling any resolver can reach on this database: no providers, no metrics, no
per-item Python beyond building three arrays. Run as a process by benchmarks.run.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

import psycopg
from psycopg.rows import dict_row

from benchmarks import sql
from benchmarks.protocol import ProcessStats, await_go, write_stats
from resolver.db.statements import claim_statement

LEASE_MS = 60_000
IDLE_POLL_SECONDS = 0.05

# Like a replica, the loop keeps polling once the backlog is drained, until SIGTERM: the
# harness reads its CPU from /proc while it is still alive.
_stop = threading.Event()


def drain(url: str, page_size: int, owner: str) -> ProcessStats:
    stats = ProcessStats()
    claim = claim_statement(page_size)
    claim_params = {"owner": owner, "lease_ms": LEASE_MS, "now_ms": None}
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        await_go()
        while True:
            started = time.perf_counter()
            rows = conn.execute(claim, claim_params).fetchall()
            if rows:
                stats.claim_ms.append((time.perf_counter() - started) * 1000)
            else:
                if _stop.wait(IDLE_POLL_SECONDS):
                    return stats
                continue
            ids = [r["dispatch_id"] for r in rows]
            versions = [r["execution_version"] for r in rows]
            # Controls first: a statement that settles an execution must find its control
            # closed (migration 0004's settled-closed trigger). Only bare drainers run, each
            # on the rows it claimed, so the reversed lock order cannot deadlock here.
            with conn.pipeline(), conn.transaction():
                conn.execute(
                    sql.BARE_COMMIT_CONTROLS,
                    {
                        "ids": ids,
                        "tokens": [r["recovery_token"] for r in rows],
                        "recovery_versions": [r["recovery_version"] for r in rows],
                    },
                )
                conn.execute(
                    sql.BARE_COMMIT_EXECUTIONS, {"ids": ids, "execution_versions": versions}
                )
                conn.execute(
                    sql.BARE_COMMIT_RESOLUTIONS, {"ids": ids, "execution_versions": versions}
                )
            stats.pages += 1
            stats.resolved += len(rows)


def main(argv: list[str]) -> None:
    url, page_size, owner, stats_path = argv[0], int(argv[1]), argv[2], argv[3]
    signal.signal(signal.SIGTERM, lambda *_: _stop.set())
    write_stats(stats_path, drain(url, page_size, owner))


if __name__ == "__main__":
    main(sys.argv[1:])
