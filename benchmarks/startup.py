"""`python -m benchmarks.startup`: spawn to first claim of real `resolver run` processes.

The start-up target is for the image's environment: a virtualenv holding the product and its
runtime dependencies only (no dev or test packages, which some libraries import when they are
present). Build one and point `--resolver` at its script:

    python3 -m venv /tmp/product && /tmp/product/bin/pip install -q .
    .venv/bin/python -m benchmarks.startup --resolver /tmp/product/bin/resolver

For each replica count (`--replicas`, default 1 and 4) and each repeat, a small backlog of
due controls with signed receipts is drained by that many replicas started together, and the
spawn-to-first-claim time is read from the database as `benchmarks.run` reads it (the
earliest claim among resolved controls), with when the slowest replica logged
`resolver_started`. It also prints the interpreter's own import time of the CLI module in
that environment (`-X importtime`, the top-level packages with the most cumulative time).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

import yaml

from benchmarks import seed
from benchmarks.phases import RECEIPT_ACTION, DrainCase, drain, prepare_drain
from benchmarks.procs import RESOLVER_SCRIPT_ENV
from benchmarks.run import RECEIPT_PROVIDER
from benchmarks.server import Databases, open_server


def import_profile(resolver: Path, top: int) -> list[tuple[int, str]]:
    """(cumulative µs, package) of the top-level imports of `resolver.app.cli`, slowest first,
    in the interpreter of the `resolver` script's virtualenv."""
    python = resolver.with_name("python")
    done = subprocess.run(
        [str(python), "-X", "importtime", "-c", "import resolver.app.cli"],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    )
    rows: list[tuple[int, str]] = []
    for line in done.stderr.splitlines():
        # "import time: self [us] | cumulative | imported package"; a top-level import has no
        # leading spaces before its name.
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2]
        if name.startswith(" ") and not name.startswith("  "):
            rows.append((int(parts[1]), name.strip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__)
    p.add_argument("--resolver", type=Path, help="the `resolver` script to start (default: ours)")
    p.add_argument("--database-url")
    p.add_argument("--replicas", default="1,4")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("-K", "--count", type=int, default=2_000)
    args = p.parse_args()
    if args.resolver is not None:
        os.environ[RESOLVER_SCRIPT_ENV] = str(args.resolver)
        for micros, name in import_profile(args.resolver, 12):
            print(f"import {name}: {micros / 1000:.0f} ms cumulative")
    work_dir = Path(tempfile.mkdtemp(prefix="resolver-startup-"))
    config = work_dir / "providers.yaml"
    config.write_text(
        yaml.safe_dump({"action_types": {RECEIPT_ACTION: {"provider": RECEIPT_PROVIDER}}}),
        encoding="utf-8",
    )
    case = DrainCase("startup-p64", "resolver", 64, RECEIPT_ACTION, receipts=True)
    with open_server(args.database_url, durable=True) as server:
        dbs = Databases(server)
        try:
            url = dbs.create("startup", migrated=True)
            env = {
                "RESOLVER_DATABASE_URL": url,
                "RESOLVER_CONFIG": str(config),
                **seed.keys_env(seed.BENCH_KEYS),
            }
            for replicas in (int(r) for r in args.replicas.split(",")):
                first, started = [], []
                for _ in range(args.repeats):
                    prepare_drain(url, case, args.count)
                    result = drain(
                        url,
                        case,
                        count=args.count,
                        processes=replicas,
                        work_dir=work_dir,
                        replica_env=env,
                        statements=False,
                        max_seconds=60.0,
                        all_server_processes=server.private,
                        prepared=True,
                    )
                    if result.startup_ms is not None:
                        first.append(result.startup_ms / 1000)
                    if result.slowest_started_ms is not None:
                        started.append(result.slowest_started_ms / 1000)
                print(
                    f"{replicas} replica(s): first claim "
                    f"{', '.join(f'{s:.2f}' for s in first)} s after the spawn "
                    f"(median {statistics.median(first):.2f}); slowest resolver_started "
                    f"median {statistics.median(started):.2f} s",
                    flush=True,
                )
        finally:
            dbs.close()


if __name__ == "__main__":
    main()
