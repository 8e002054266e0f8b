"""`python -m benchmarks.cycle_cost`: what the replica's own loop costs per resolution.

One process runs the cycle of the real composition (`build_replica` from `RESOLVER_*`
settings, the `internal_mutation` provider over signed receipts, metrics and JSON logs to a
file) over `K` due controls, and the bare loop (the same claim and page commit, no Python
between them) over the same backlog, on a private cluster or `--database-url`. It prints:

- CPU µs per resolution of the whole loop, and of each stage (the claim, the provider's
  read and checks, the outcomes, the commit, each subscriber), read with the thread's CPU
  clock around each per-page call;
- with `--callgrind` (valgrind installed), the instructions per resolution of each loop
  instead: the process re-runs itself under callgrind with collection switched on for the
  loop only. Instruction counts do not move with the machine's load, so two builds compare
  run against run.

It measures cost, not throughput (that is benchmarks.run).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import psycopg
import yaml
from psycopg.rows import dict_row

from benchmarks import bare, seed
from benchmarks.phases import RECEIPT_ACTION, DrainCase, prepare_drain
from benchmarks.procs import callgrind_total
from benchmarks.run import RECEIPT_PROVIDER, provider_config
from benchmarks.server import Databases, open_server
from resolver.db.statements import claim_statement, statement

CALLGRIND_ENV = "BENCH_CYCLE_COST_CALLGRIND"


@contextmanager
def _collecting() -> Iterator[None]:
    """Callgrind collects only inside this block (when running under it)."""
    on = bool(os.environ.get(CALLGRIND_ENV))
    if on:
        _callgrind("on")
    try:
        yield
    finally:
        if on:
            _callgrind("off")


def _callgrind(state: str) -> None:
    subprocess.run(
        ["callgrind_control", "-i", state, str(os.getpid())], check=True, capture_output=True
    )


def _timed(stages: collections.defaultdict[str, float], name: str, fn: Callable[..., Any]) -> Any:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            stages[name] += time.thread_time() - started

    return timed


def replica_loop(url: str, page_size: int, work_dir: Path) -> tuple[int, float, dict[str, float]]:
    """Resolutions, loop CPU seconds and CPU seconds per stage of the real composition."""
    config = work_dir / "providers.yaml"
    config.write_text(yaml.safe_dump(provider_config({RECEIPT_PROVIDER})), encoding="utf-8")
    env = {
        "RESOLVER_DATABASE_URL": url,
        "RESOLVER_CONFIG": str(config),
        "RESOLVER_PAGE_SIZE": str(page_size),
        **seed.keys_env(seed.BENCH_KEYS),
    }
    # The replica reads its settings and keys from the environment, as `resolver run`.
    with mock.patch.dict(os.environ, env):
        return _replica_loop(work_dir)


def _replica_loop(work_dir: Path) -> tuple[int, float, dict[str, float]]:
    from resolver.app.composition import build_replica
    from resolver.app.config import Settings
    from resolver.telemetry import jsonlogs

    with (work_dir / "replica.log").open("w", encoding="utf-8") as log:
        jsonlogs.configure("INFO", log)
        replica = build_replica(Settings())
        reconciler, stages = replica.reconciler, collections.defaultdict[str, float](float)
        reconciler.run_cycle()  # the first page prepares the statements
        if not os.environ.get(CALLGRIND_ENV):
            _time_stages(replica, stages)
        resolved, started = 0, time.process_time()
        with _collecting():
            while (report := reconciler.run_cycle()).claimed:
                resolved += len(report.accepted)
        seconds = time.process_time() - started
        replica.close()
    return resolved, seconds, dict(stages)


def _time_stages(replica: Any, stages: collections.defaultdict[str, float]) -> None:
    reconciler = replica.reconciler
    store = reconciler._store
    for name in ("claim_due_page", "commit_outcomes"):
        setattr(store, name, _timed(stages, name, getattr(store, name)))
    for provider in {id(p): p for p in reconciler._registry.by_action_type.values()}.values():
        provider.inspect_page = _timed(stages, "provider inspect_page", provider.inspect_page)
    reconciler._outcomes = _timed(stages, "outcomes", reconciler._outcomes)
    fanout = replica.runtime.events
    for attr, handlers in list(vars(fanout).items()):
        if attr.startswith("_") and isinstance(handlers, tuple):
            wrapped = tuple(
                _timed(stages, f"{type(h.__self__).__name__}.{h.__name__}", h) for h in handlers
            )
            setattr(fanout, attr, wrapped)


def bare_loop(url: str, page_size: int) -> tuple[int, float]:
    claim, commit = claim_statement(page_size), statement("commit_automatic")
    params = {"owner": "bare", "lease_ms": bare.LEASE_MS, "now_ms": None}
    resolved = 0
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(claim, params).fetchall()  # prepare, as the replica's first page
        conn.execute(commit, {"items": bare.verified_items(rows), "now_ms": None})
        started = time.process_time()
        with _collecting():
            while rows := conn.execute(claim, params).fetchall():
                items = bare.verified_items(rows)
                resolved += len(conn.execute(commit, {"items": items, "now_ms": None}).fetchall())
        return resolved, time.process_time() - started


def measure(url: str, loop: str, count: int, page_size: int, work_dir: Path) -> None:
    case = DrainCase(f"receipts-p{page_size}", "resolver", page_size, RECEIPT_ACTION, True)
    prepare_drain(url, case, count)
    if loop == "bare":
        resolved, seconds = bare_loop(url, page_size)
        stages: dict[str, float] = {}
    else:
        resolved, seconds, stages = replica_loop(url, page_size, work_dir)
    n = max(1, resolved)
    print(f"{loop}: {resolved} resolutions, CPU {1e6 * seconds / n:.1f} µs per resolution")
    for name, spent in sorted(stages.items(), key=lambda kv: -kv[1]):
        print(f"    {1e6 * spent / n:7.2f} µs  {name}")
    print(f"RESOLVED {loop} {resolved}", file=sys.stderr)


def _under_callgrind(argv: list[str], loop: str, work_dir: Path) -> None:
    out = work_dir / f"{loop}.callgrind"
    env = {**os.environ, CALLGRIND_ENV: "1"}
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "benchmarks.cycle_cost",
            *argv,
            "--loop",
            loop,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    resolved = next(
        int(line.split()[-1]) for line in done.stderr.splitlines() if line.startswith("RESOLVED")
    )
    total = callgrind_total(out)
    assert total is not None, f"callgrind wrote no counts to {out}"
    print(f"{loop}: {resolved} resolutions, {total // max(1, resolved):,} instructions each")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.cycle_cost", description=__doc__)
    p.add_argument("--database-url")
    p.add_argument("-K", "--count", type=int, default=20_000)
    p.add_argument("--page-size", type=int, default=64)
    p.add_argument("--callgrind", action="store_true")
    p.add_argument("--loop", choices=("replica", "bare"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.callgrind and not args.loop and shutil.which("valgrind") is None:
        p.error("--callgrind needs valgrind (apt-get install valgrind)")
    with (
        tempfile.TemporaryDirectory(prefix="cycle-cost-") as tmp,
        open_server(args.database_url, durable=True) as server,
    ):
        dbs = Databases(server)
        try:
            url = dbs.create("cycle_cost", migrated=True, extensions=())
            forwarded = ["--database-url", url, "-K", str(args.count)]
            forwarded += ["--page-size", str(args.page_size)]
            for loop in (args.loop,) if args.loop else ("replica", "bare"):
                if args.callgrind and not args.loop:
                    _under_callgrind(forwarded, loop, Path(tmp))
                else:
                    measure(url, loop, args.count, args.page_size, Path(tmp))
        finally:
            dbs.close()


if __name__ == "__main__":
    main()
