"""`python -m benchmarks.prune`: does retention slow the resolver down?

One database holds `--settled` old settled dispatches (set-based seeding as the table owner,
half of them with an automatic resolution, the other half completion-closed). Three drains of
`--count` due dispatches by `--replicas` real replica processes follow, each on a fresh due
set: a baseline, the same drain while `resolver prune --older-than 30d` (a real process,
already past its first batch when the replicas are released) removes the settled history
beside it, and a second baseline afterwards (the prune stopped by SIGTERM first, unless
`--finish-prune`: a million settled dispatches take the prune most of an hour at its
polite default duty cycle). The figure is the
contended drain rate as a ratio of the mean baseline rate (target >= 0.8), and how many
dispatches the prune removed per second meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, LiteralString

import yaml

from benchmarks import seed
from benchmarks.phases import INSTANT_ACTION, connect, vacuum
from benchmarks.procs import REPO_ROOT, Replicas
from benchmarks.run import provider_config
from benchmarks.server import Databases, open_server

DAY_MS = 86_400_000
POLL_SECONDS = 0.1

# Resolutions written since the drain started (the settled history has old ones).
DRAINED: LiteralString = """
SELECT /* bench-monitor */ count(*) AS n, min(resolved_at_ms) AS first_ms,
       max(resolved_at_ms) AS last_ms
FROM approved_action_recovery_resolutions WHERE resolved_at_ms >= %(go_ms)s
"""
ARMED: LiteralString = (
    "SELECT /* bench-monitor */ count(*) AS n FROM approved_action_recovery_controls"
    " WHERE status = 'armed'"
)
BATCHES: LiteralString = (
    "SELECT /* bench-monitor */ coalesce(sum(batches), 0)::bigint AS batches,"
    " coalesce(sum(dispatches_pruned), 0)::bigint AS n FROM recovery_prune_runs"
)
PRUNED: LiteralString = (
    "SELECT /* bench-monitor */ coalesce(sum(dispatches_pruned), 0)::bigint AS n"
    " FROM recovery_prune_runs"
)


@dataclass(slots=True)
class Drain:
    name: str
    resolved: int
    seconds: float
    pruned_meanwhile: int = 0

    @property
    def per_second(self) -> float:
        return self.resolved / self.seconds if self.seconds > 0 else 0.0


@dataclass(slots=True)
class Result:
    settled: int
    count: int
    replicas: int
    page_size: int
    batch: int
    duty_cycle: float
    seed_seconds: float
    drains: list[Drain]
    prune_seconds: float
    pruned: int

    @property
    def ratio(self) -> float:
        base = [d.per_second for d in self.drains if d.name.startswith("baseline")]
        contended = next(d.per_second for d in self.drains if d.name == "with-prune")
        return contended / (sum(base) / len(base))

    @property
    def prune_per_second(self) -> float:
        return self.pruned / self.prune_seconds if self.prune_seconds > 0 else 0.0


def _drain(
    url: str,
    name: str,
    *,
    count: int,
    replicas_count: int,
    page_size: int,
    work_dir: Path,
    env: dict[str, str],
    beside: list[str] | None = None,
    max_seconds: float = 600.0,
) -> tuple[Drain, subprocess.Popen[str] | None]:
    with connect(url) as conn:
        due_ms = seed.db_now_ms(conn) - 1_000
        seed.seed_due(conn, count, action_type=INSTANT_ACTION, prefix=f"{name}-", due_ms=due_ms)
    vacuum(url, checkpoint=True)
    pruner: subprocess.Popen[str] | None = None
    replicas: Replicas | None = None
    env = {**env, "RESOLVER_PAGE_SIZE": str(page_size)}
    try:
        with connect(url) as monitor:
            pruned_at_go = 0
            if beside is not None:
                # The drain starts once the prune is under way (its first batch committed),
                # so it measures pruning beside the drain, not the start of a process.
                pruner = _start_prune(beside, url, work_dir)
                pruned_at_go = _await_first_batch(monitor, pruner)
            go_ms = seed.db_now_ms(monitor)
            replicas = Replicas.start(replicas_count, work_dir=work_dir, name=name, env=env)
            deadline = time.monotonic() + max_seconds
            while time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
                row = monitor.execute(ARMED).fetchone()
                if (row is not None and row["n"] == 0) or replicas.all_exited():
                    break
            pruned = monitor.execute(PRUNED).fetchone()
            replicas.stop()
            span = monitor.execute(DRAINED, {"go_ms": go_ms}).fetchone()
    except BaseException:
        if replicas is not None:
            replicas.kill()
        if pruner is not None:
            pruner.kill()
        raise
    assert span is not None and pruned is not None
    # From the first resolution to the last: the replicas' start-up is not the drain.
    seconds = max(0.001, ((span["last_ms"] or go_ms) - (span["first_ms"] or go_ms)) / 1000)
    meanwhile = int(pruned["n"]) - pruned_at_go if beside is not None else 0
    return Drain(name, int(span["n"]), seconds, meanwhile), pruner


def _await_first_batch(monitor: Any, pruner: subprocess.Popen[str], limit: float = 300) -> int:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        row = monitor.execute(BATCHES).fetchone()
        if row is not None and row["batches"] > 0:
            return int(row["n"])
        if pruner.poll() is not None:
            raise RuntimeError(f"resolver prune exited early ({pruner.returncode})")
        time.sleep(POLL_SECONDS)
    raise RuntimeError("resolver prune committed no batch in time")


def _end_prune(
    url: str, pruner: subprocess.Popen[str], started: float, *, finish: bool
) -> tuple[int, float]:
    """Wait for the prune to finish, or stop it (SIGTERM: every committed batch stands, the
    next run carries on) once the drain beside it is over. Returns (pruned, seconds)."""
    if finish:
        out, _ = pruner.communicate(timeout=7_200)
        if pruner.returncode != 0:
            raise RuntimeError(f"resolver prune failed ({pruner.returncode})")
        return int(json.loads(out)["dispatches_pruned"]), time.monotonic() - started
    pruner.terminate()
    pruner.communicate(timeout=60)
    seconds = time.monotonic() - started
    with connect(url) as conn:
        row = conn.execute(PRUNED).fetchone()
    assert row is not None
    return int(row["n"]), seconds


def _start_prune(argv: list[str], url: str, work_dir: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    log = (work_dir / "prune.log").open("w", encoding="utf-8")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "resolver", "prune", *argv],
            env={**env, "RESOLVER_DATABASE_URL": url, "RESOLVER_LOG_LEVEL": "WARNING"},
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=REPO_ROOT,
        )
    finally:
        log.close()


def run(
    *,
    database_url: str | None,
    settled: int,
    count: int,
    replicas: int,
    page_size: int,
    batch: int,
    duty_cycle: float,
    finish_prune: bool = False,
    echo: Any = print,
) -> Result:
    work_dir = Path(tempfile.mkdtemp(prefix="resolver-bench-prune-"))
    with open_server(database_url, durable=True) as server:
        dbs = Databases(server)
        try:
            url = dbs.create("prune", migrated=True)
            config = work_dir / "providers.yaml"
            config.write_text(yaml.safe_dump(provider_config({"bench_instant"})), encoding="utf-8")
            env = {
                "RESOLVER_DATABASE_URL": url,
                "RESOLVER_CONFIG": str(config),
                "RESOLVER_LOG_LEVEL": "WARNING",
                **seed.keys_env(seed.BENCH_KEYS),
            }
            started = time.monotonic()
            with connect(url) as conn:
                old_ms = seed.db_now_ms(conn) - 40 * DAY_MS
                seed.seed_closed(conn, settled, first=1, prefix="s-", now_ms=old_ms)
            vacuum(url, checkpoint=True)
            seed_seconds = time.monotonic() - started
            echo(f"seeded {settled:,} settled dispatches in {seed_seconds:.0f}s")
            common = {
                "count": count,
                "replicas_count": replicas,
                "page_size": page_size,
                "work_dir": work_dir,
                "env": env,
            }
            drains = []
            baseline, _ = _drain(url, "baseline", **common)  # type: ignore[arg-type]
            drains.append(baseline)
            echo(f"baseline: {baseline.per_second:,.0f}/s")
            prune_started = time.monotonic()
            argv = ["--older-than", "30d", "--batch", str(batch), "--json"]
            argv += ["--duty-cycle", str(duty_cycle)]
            contended, pruner = _drain(url, "with-prune", beside=argv, **common)  # type: ignore[arg-type]
            drains.append(contended)
            echo(
                f"with prune: {contended.per_second:,.0f}/s "
                f"({contended.pruned_meanwhile:,} pruned meanwhile)"
            )
            assert pruner is not None
            pruned, prune_seconds = _end_prune(url, pruner, prune_started, finish=finish_prune)
            echo(f"prune: {pruned:,} in {prune_seconds:.0f}s")
            after, _ = _drain(url, "baseline-after", **common)  # type: ignore[arg-type]
            drains.append(after)
            echo(f"baseline after: {after.per_second:,.0f}/s")
        finally:
            dbs.close()
    return Result(
        settled,
        count,
        replicas,
        page_size,
        batch,
        duty_cycle,
        seed_seconds,
        drains,
        prune_seconds,
        pruned,
    )


def markdown(result: Result) -> str:
    lines = [
        "| drain | resolutions/s | resolved | seconds | pruned meanwhile |",
        "|---|---|---|---|---|",
    ]
    for d in result.drains:
        lines.append(
            f"| {d.name} | {d.per_second:,.0f} | {d.resolved:,} | {d.seconds:.2f} "
            f"| {d.pruned_meanwhile:,} |"
        )
    verdict = "yes" if result.ratio >= 0.8 else "**no**"
    lines += [
        "",
        f"with-prune / mean baseline: **{result.ratio:.2f}** (target >= 0.8: {verdict})",
        f"prune: {result.pruned:,} settled dispatches in {result.prune_seconds:.0f}s "
        f"({result.prune_per_second:,.0f}/s, batch {result.batch}, "
        f"duty cycle {result.duty_cycle:g}); "
        f"{result.replicas} replicas, page {result.page_size}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.prune", description=__doc__)
    p.add_argument("--database-url", help="measure this server instead of a private cluster")
    p.add_argument("--settled", type=int, default=1_000_000, help="old settled dispatches")
    p.add_argument("-K", "--count", type=int, default=50_000, help="due dispatches per drain")
    p.add_argument("-R", "--replicas", type=int, default=2)
    p.add_argument("--page-size", type=int, default=64)
    p.add_argument("--batch", type=int, default=500, help="resolver prune --batch")
    p.add_argument("--duty-cycle", type=float, default=0.1, help="resolver prune --duty-cycle")
    p.add_argument(
        "--finish-prune",
        action="store_true",
        help="wait for the prune to finish before the last baseline (else stop it there)",
    )
    p.add_argument("--json", type=Path, help="also write the result as JSON here")
    args = p.parse_args(argv)
    result = run(
        database_url=args.database_url,
        settled=args.settled,
        count=args.count,
        replicas=args.replicas,
        page_size=args.page_size,
        batch=args.batch,
        duty_cycle=args.duty_cycle,
        finish_prune=args.finish_prune,
    )
    print()
    print(markdown(result))
    if args.json:
        doc = {**asdict(result), "ratio": result.ratio, "prune_per_second": result.prune_per_second}
        args.json.write_text(json.dumps(doc, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
