"""`python -m benchmarks.lookup`: what an operator waits for, beside a long history.

The console's find and the first page of each list, as the API's read routes run them
(the repository's statements, one round trip each, the caller's project scope included), on a
database holding `--settled` dispatches settled by their executor or automatically (1,000,000
by default), `--manual` cases in the manual queue (`--proposals` of them with an open
two-person proposal), `--waiting` cases waiting for evidence and `--decided` manual decisions,
seeded set-based as the table owner. Each sample picks another dispatch: a find by idempotency key
(the automatically settled dispatch a pasted key names), by dispatch id and by approval id;
the first page (50 rows) and the total of the manual queue, the waiting list, the proposals
list, the triage counts and the decisions list. The figures are p50/p95/max per read, in
milliseconds; the goal is p95 under 50 ms.

    python -m benchmarks.lookup                       # a private cluster, the defaults
    python -m benchmarks.lookup --database-url postgresql://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks import seed
from benchmarks.phases import connect, percentile, vacuum
from benchmarks.server import Databases, open_server
from resolver.core.domain import CaseFilter, CaseList, DecisionFilter
from resolver.db.store import PostgresCaseReader, PostgresHandle
from resolver.human.api.cases import TOTAL_CAP

USER = "bench-operator"
PROJECTS = 32  # the seed spreads dispatches over proj-0 .. proj-31
COUNT_CAP = TOTAL_CAP  # what the API counts up to
GOAL_MS = 50.0


def _grant(url: str) -> None:
    """The operator may read every seeded project (the scope check runs on every read)."""
    with connect(url) as conn, conn.transaction():
        for n in range(PROJECTS):
            conn.execute("INSERT INTO recovery_projects VALUES (%s, 1)", (f"proj-{n}",))
            conn.execute(
                "INSERT INTO recovery_role_bindings VALUES (%s, %s, 'approval.recover', 1)",
                (f"proj-{n}", USER),
            )


def _seed(url: str, args: argparse.Namespace) -> dict[str, float]:
    took: dict[str, float] = {}
    with connect(url) as conn:
        now_ms = seed.db_now_ms(conn)
        t0 = time.monotonic()
        seed.seed_closed(conn, args.settled, first=1, prefix="h-", now_ms=now_ms)
        took["settled"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        seed.seed_manual(conn, args.manual, prefix="m-", now_ms=now_ms)
        took["manual"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        seed.seed_proposals(conn, min(args.proposals, args.manual), prefix="m-", now_ms=now_ms)
        seed.seed_waiting(conn, args.waiting, prefix="w-", now_ms=now_ms)
        took["waiting and proposals"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        seed.seed_late_window(
            conn,
            args.decided,
            prefix="l-",
            action_type="bench.decided",
            now_ms=now_ms,
            window_ms=7 * 86_400_000,
        )
        took["decided"] = round(time.monotonic() - t0, 1)
    print(f"seeded (seconds): {took}", flush=True)
    return took


def _reads(
    store: PostgresCaseReader, rng: random.Random, settled: int
) -> dict[str, Callable[[], Any]]:
    def settled_id() -> str:
        return f"h-{rng.randint(1, settled):09d}"

    return {
        "find by idempotency key": lambda: store.find_dispatches(USER, "idem-" + settled_id()),
        "find by dispatch id": lambda: store.find_dispatches(USER, settled_id()),
        "find by approval id": lambda: store.find_dispatches(USER, "ar-" + settled_id()),
        "case of a settled dispatch": lambda: store.get_case(USER, settled_id()),
        "manual queue, first page": lambda: store.list_cases(USER, CaseList.MANUAL, 50),
        "manual queue, total": lambda: store.count_cases(
            USER, CaseList.MANUAL, CaseFilter(), COUNT_CAP
        ),
        "manual queue, triage counts": lambda: store.case_counts(
            USER, CaseList.MANUAL, CaseFilter(), COUNT_CAP
        ),
        "waiting list, first page": lambda: store.list_cases(USER, CaseList.WAITING, 50),
        "waiting list, total": lambda: store.count_cases(
            USER, CaseList.WAITING, CaseFilter(), COUNT_CAP
        ),
        "proposals, first page": lambda: store.list_cases(
            USER, CaseList.MANUAL, 50, None, CaseFilter(open_proposal=True)
        ),
        "proposals, total": lambda: store.count_cases(
            USER, CaseList.MANUAL, CaseFilter(open_proposal=True), COUNT_CAP
        ),
        "decisions, first page": lambda: store.list_decisions(USER, DecisionFilter(), 50),
        "decisions, total": lambda: store.count_decisions(USER, DecisionFilter(), COUNT_CAP),
    }


def _check_seeded(store: PostgresCaseReader, args: argparse.Namespace) -> None:
    """Each list holds what was seeded: a page measured on an empty list proves nothing."""
    pages = {
        "manual queue": (CaseList.MANUAL, CaseFilter(), args.manual),
        "waiting list": (CaseList.WAITING, CaseFilter(), args.waiting),
        "proposals": (CaseList.MANUAL, CaseFilter(open_proposal=True), args.proposals),
    }
    for name, (which, filters, seeded) in pages.items():
        rows = len(store.list_cases(USER, which, 50, None, filters))
        if rows != min(50, seeded, args.manual if name == "proposals" else seeded):
            raise SystemExit(f"the {name} shows {rows} rows of the {seeded} seeded")


def _measure(reads: dict[str, Callable[[], Any]], samples: int) -> dict[str, dict[str, float]]:
    times: dict[str, list[float]] = {name: [] for name in reads}
    for _ in range(samples):
        for name, read in reads.items():  # interleaved: machine noise hits every read alike
            t0 = time.perf_counter()
            read()
            times[name].append((time.perf_counter() - t0) * 1000)
    return {
        name: {
            "p50_ms": round(statistics.median(values), 2),
            "p95_ms": round(percentile(values, 95), 2),
            "max_ms": round(max(values), 2),
        }
        for name, values in times.items()
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    with open_server(args.database_url, durable=False) as server:
        dbs = Databases(server)
        try:
            url = dbs.create("lookup", migrated=True)
            seeding = _seed(url, args)
            _grant(url)
            vacuum(url, checkpoint=True)
            with PostgresCaseReader(PostgresHandle(url)) as store:
                _check_seeded(store, args)
                reads = _reads(store, random.Random(args.seed), args.settled)
                _measure(reads, max(1, args.samples // 10))  # warm the pool and the caches
                figures = _measure(reads, args.samples)
        finally:
            dbs.close()
    worst = max(f["p95_ms"] for f in figures.values())
    return {
        "settled": args.settled,
        "manual": args.manual,
        "waiting": args.waiting,
        "proposals": args.proposals,
        "decided": args.decided,
        "samples": args.samples,
        "seeding_seconds": seeding,
        "reads": figures,
        "worst_p95_ms": worst,
        "goal_p95_ms": GOAL_MS,
        "met": worst < GOAL_MS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="an existing server (default: a private cluster)")
    parser.add_argument("--settled", type=int, default=1_000_000)
    parser.add_argument("--manual", type=int, default=2_000)
    parser.add_argument("--decided", type=int, default=20_000)
    parser.add_argument("--waiting", type=int, default=2_000)
    parser.add_argument("--proposals", type=int, default=200)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    report = run(parser.parse_args())
    print(json.dumps(report, indent=2))
    if not report["met"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
