"""`python -m benchmarks.history`: the claim and the drain beside a long history.

A database that has run for months holds far more settled dispatches and waiting manual cases
than due ones. This measures whether that history moves the claim's latency or the drain's
rate: two databases on one private cluster (or `--database-url`), `empty` and `full`, hold the
same backlog of `K` due controls with signed receipts; `full` also holds every `History` of
`HISTORIES` (1,000,000 settled dispatches, 100,000 in the manual queue and 100,000
manual decisions with open late-evidence watches by default), seeded
set-based as the table owner. Each round then times the real claim statement (rolled back,
alternating between the two databases so machine noise hits both alike) and drains each
backlog with `R` real `resolver run` processes (the same drain as `benchmarks.run`, the
order of the two databases alternating by round). The figures that matter are the ratios
full / empty within the run.

To measure a new kind of history (another table the resolver's statements read), add a
`History` to `HISTORIES`: a name, a default count and the set-based seed of `count` rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import yaml

from benchmarks import seed
from benchmarks.phases import (
    RECEIPT_ACTION,
    DrainCase,
    DrainResult,
    claim_samples,
    connect,
    drain,
    percentile,
    vacuum,
)
from benchmarks.run import RECEIPT_PROVIDER, compile_sources
from benchmarks.server import Databases, open_server
from resolver.core.late_evidence import DEFAULT_WINDOW_SECONDS

Seeder = Callable[[psycopg.Connection[Any], int, int], None]
"""Seeds `count` rows of one history (connection, count, database clock in ms)."""


@dataclass(frozen=True, slots=True)
class History:
    """One kind of row a long-lived database accumulates beside its backlog."""

    name: str
    option: str
    default: int
    seed: Seeder


def _settled(conn: psycopg.Connection[Any], count: int, now_ms: int) -> None:
    seed.seed_closed(conn, count, first=1, prefix="h-", now_ms=now_ms)


def _manual(conn: psycopg.Connection[Any], count: int, now_ms: int) -> None:
    seed.seed_manual(conn, count, prefix="m-", now_ms=now_ms)


def _late(conn: psycopg.Connection[Any], count: int, now_ms: int) -> None:
    # The replicas run with the default window (RESOLVER_LATE_EVIDENCE_WINDOW_SECONDS unset),
    # so every watch is open and inside it, due at its decision: each replica's watcher claims
    # and looks at some during the drain, through the receipts provider of the backlog's type.
    seed.seed_late_window(
        conn,
        count,
        prefix="l-",
        action_type=RECEIPT_ACTION,
        now_ms=now_ms,
        window_ms=int(DEFAULT_WINDOW_SECONDS * 1000),
    )


HISTORIES: tuple[History, ...] = (
    History("settled dispatches", "settled", 1_000_000, _settled),
    History("manual queue", "manual", 100_000, _manual),
    History("late-evidence window", "late", 100_000, _late),
)


@dataclass(slots=True)
class Side:
    """One database's figures over the rounds."""

    claim_ms: list[float] = field(default_factory=list)
    drains: list[DrainResult] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        rates = [d.per_second for d in self.drains]
        return {
            "claim_p50_ms": percentile(self.claim_ms, 50),
            "claim_p99_ms": percentile(self.claim_ms, 99),
            "claim_samples": len(self.claim_ms),
            "drain_per_second": rates,
            "drain_median_per_second": statistics.median(rates) if rates else None,
            "replica_cpu_us": [d.process_cpu_us for d in self.drains],
            "server_cpu_us": [d.server_cpu_us for d in self.drains],
            "claim_server_mean_ms": [d.claim_ms_mean for d in self.drains],
        }


def run(args: argparse.Namespace) -> dict[str, Any]:
    compile_sources()
    counts = {h.name: int(getattr(args, h.option)) for h in HISTORIES}
    work_dir = Path(args.work_dir or tempfile.mkdtemp(prefix="resolver-history-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    config = work_dir / "providers.yaml"
    config.write_text(
        yaml.safe_dump({"action_types": {RECEIPT_ACTION: {"provider": RECEIPT_PROVIDER}}}),
        encoding="utf-8",
    )
    sides = {"empty": Side(), "full": Side()}
    seeding: dict[str, float] = {}
    with open_server(args.database_url, durable=True) as server:
        dbs = Databases(server)
        extensions = ("pg_stat_statements",) if server.has_pg_stat_statements else ()
        urls = {
            name: dbs.create(f"history_{name}", migrated=True, extensions=extensions)
            for name in sides
        }
        try:
            with connect(urls["full"]) as conn:
                now_ms = seed.db_now_ms(conn)
                for history in HISTORIES:
                    t0 = time.monotonic()
                    history.seed(conn, counts[history.name], now_ms)
                    seeding[history.name] = time.monotonic() - t0
                    print(
                        f"seeded {counts[history.name]:,} {history.name} "
                        f"in {seeding[history.name]:.1f} s",
                        flush=True,
                    )
            for round_no in range(args.rounds):
                _round(
                    args,
                    round_no,
                    urls,
                    sides,
                    work_dir,
                    config,
                    server.private,
                    server.has_pg_stat_statements,
                )
        finally:
            dbs.close()
    return _report(args, counts, seeding, sides)


def _round(
    args: argparse.Namespace,
    round_no: int,
    urls: dict[str, str],
    sides: dict[str, Side],
    work_dir: Path,
    config: Path,
    private: bool,
    statements: bool,
) -> None:
    prefix = f"b{round_no}-"
    for url in urls.values():
        with connect(url) as conn:
            due_ms = seed.db_now_ms(conn) - 1_000
            seed.seed_due(
                conn, args.count, action_type=RECEIPT_ACTION, prefix=prefix, due_ms=due_ms
            )
        seed.seed_receipts(url, prefix=prefix, keys=seed.BENCH_KEYS, finished_ms=due_ms + 500)
        vacuum(url, checkpoint=True)
    with connect(urls["empty"]) as a, connect(urls["full"]) as b:
        for _ in range(max(1, args.samples // 25)):
            sides["empty"].claim_ms += claim_samples(a, args.page_size, 25)
            sides["full"].claim_ms += claim_samples(b, args.page_size, 25)
    order = ["empty", "full"] if round_no % 2 == 0 else ["full", "empty"]
    case = DrainCase(
        f"history-p{args.page_size}", "resolver", args.page_size, RECEIPT_ACTION, receipts=True
    )
    for name in order:
        result = drain(
            urls[name],
            case,
            count=args.count,
            processes=args.replicas,
            work_dir=work_dir,
            replica_env={
                "RESOLVER_DATABASE_URL": urls[name],
                "RESOLVER_CONFIG": str(config),
                **seed.keys_env(seed.BENCH_KEYS),
            },
            statements=statements,
            max_seconds=args.max_drain_seconds,
            all_server_processes=private,
            prepared=True,
        )
        sides[name].drains.append(result)
        print(
            f"round {round_no + 1} {name}: {result.per_second:,.0f}/s, replica "
            f"{result.process_cpu_us or 0:.0f} us, PostgreSQL {result.server_cpu_us or 0:.0f}"
            f" us per resolution, claim mean {result.claim_ms_mean or 0:.2f} ms",
            flush=True,
        )


def _report(
    args: argparse.Namespace,
    counts: dict[str, int],
    seeding: dict[str, float],
    sides: dict[str, Side],
) -> dict[str, Any]:
    empty, full = sides["empty"].summary(), sides["full"].summary()
    rounds = [
        f.per_second / e.per_second
        for e, f in zip(sides["empty"].drains, sides["full"].drains, strict=True)
        if e.per_second
    ]
    return {
        "options": {k: v for k, v in vars(args).items() if k != "json"},
        "history": counts,
        "seed_seconds": seeding,
        "empty": empty,
        "full": full,
        "claim_p50_ratio": full["claim_p50_ms"] / empty["claim_p50_ms"]
        if empty["claim_p50_ms"]
        else None,
        "drain_ratio_per_round": rounds,
        "drain_ratio_median": statistics.median(rounds) if rounds else None,
        "drains": {n: [asdict(d) for d in s.drains] for n, s in sides.items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.history", description=__doc__)
    p.add_argument("--database-url", help="measure this server instead of a private cluster")
    p.add_argument("-K", "--count", type=int, default=20_000, help="due controls per drain")
    p.add_argument("-R", "--replicas", type=int, default=4)
    p.add_argument("--page-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=2, help="drains per database")
    p.add_argument("--samples", type=int, default=300, help="claims timed per database")
    p.add_argument("--max-drain-seconds", type=float, default=180.0)
    p.add_argument("--work-dir")
    p.add_argument("--json", help="also write the full report as JSON here")
    for history in HISTORIES:
        p.add_argument(
            f"--{history.option}",
            type=int,
            default=history.default,
            help=f"{history.name} in the full database",
        )
    args = p.parse_args()
    report = run(args)
    e, f = report["empty"], report["full"]
    print(
        f"claim p50 (p99): empty {e['claim_p50_ms']:.3f} ({e['claim_p99_ms']:.3f}) ms, "
        f"full {f['claim_p50_ms']:.3f} ({f['claim_p99_ms']:.3f}) ms, "
        f"ratio {report['claim_p50_ratio']:.2f}"
    )
    print(
        f"drain /s: empty {e['drain_per_second']}, full {f['drain_per_second']}, "
        f"full/empty per round {[round(r, 2) for r in report['drain_ratio_per_round']]}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
