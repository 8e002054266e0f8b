"""The baseline: pgbench's built-in TPC-B-like script on the same server."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from resolver.demo import localpg

_TPS = re.compile(r"^tps = ([0-9.]+) \((?:without initial connection time|excluding)", re.M)


def find_pgbench() -> Path | None:
    """pgbench next to the server binaries first (same version), else on PATH."""
    bin_dir = localpg.find_bin_dir()
    if bin_dir is not None and (bin_dir / "pgbench").exists():
        return bin_dir / "pgbench"
    found = shutil.which("pgbench")
    return Path(found) if found else None


def initialise(pgbench: Path, url: str, scale: int) -> None:
    _run([str(pgbench), "-i", "-q", "-s", str(scale), url])


def tps(pgbench: Path, url: str, *, clients: int, seconds: int) -> float:
    """TPS of the TPC-B-like script at `clients` clients for `seconds` (simple protocol)."""
    out = _run(
        [
            str(pgbench),
            "-c",
            str(clients),
            "-j",
            str(min(clients, 2)),
            "-T",
            str(seconds),
            url,
        ]
    )
    match = _TPS.search(out)
    if match is None:
        raise RuntimeError(f"pgbench printed no TPS line:\n{out[-800:]}")
    return float(match.group(1))


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} failed: {(done.stderr or done.stdout)[-800:]}")
    return done.stdout
