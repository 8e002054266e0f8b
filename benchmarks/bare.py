"""The bare loop: the resolver's claim and page-commit statements, nothing else.

It is the ceiling any resolver can reach on this database: the product's own SQL (the claim,
`resolver_commit_automatic` with every item verified), no providers, no metrics, no per-item
Python beyond one dict per item. Run as a process by benchmarks.run.
"""

from __future__ import annotations

import hashlib
import json
import signal
import sys
import threading
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from benchmarks.protocol import ProcessStats, await_go, write_stats
from resolver.db.statements import claim_statement, statement

LEASE_MS = 60_000
IDLE_POLL_SECONDS = 0.05

# Like a replica, the loop keeps polling once the backlog is drained, until SIGTERM: the
# harness reads its CPU from /proc while it is still alive.
_stop = threading.Event()


def drain(url: str, page_size: int, owner: str) -> ProcessStats:
    stats = ProcessStats()
    claim = claim_statement(page_size)
    claim_params = {"owner": owner, "lease_ms": LEASE_MS, "now_ms": None}
    commit = statement("commit_automatic")
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
            accepted = conn.execute(commit, {"items": verified_items(rows), "now_ms": None})
            stats.pages += 1
            stats.resolved += len(accepted.fetchall())


def verified_items(rows: list[dict[str, Any]]) -> str:
    """The claimed page as `resolver_commit_automatic` items, every one verified succeeded."""
    return json.dumps(
        [
            {
                "dispatch_id": r["dispatch_id"],
                "recovery_token": r["recovery_token"],
                "recovery_version": r["recovery_version"],
                "execution_version": r["execution_version"],
                "finding": "verified_succeeded",
                "result_code": "ok",
                "evidence_digest": hashlib.sha256(r["dispatch_id"].encode()).hexdigest(),
                "mutation_id": f"bare-{r['dispatch_id']}",
                "delay_ms": 0,
            }
            for r in rows
        ],
        separators=(",", ":"),
    )


def main(argv: list[str]) -> None:
    url, page_size, owner, stats_path = argv[0], int(argv[1]), argv[2], argv[3]
    signal.signal(signal.SIGTERM, lambda *_: _stop.set())
    write_stats(stats_path, drain(url, page_size, owner))


if __name__ == "__main__":
    main(sys.argv[1:])
