"""Directories under the user's cache that tests fill once (npm packages, a Debian base) and
reuse across runs: whoever fills one holds its lock, so parallel workers and concurrent runs
take turns instead of installing into the same directory at once."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_root() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "approved-action-resolver-tests"


@contextmanager
def locked_cache_dir(name: str) -> Iterator[Path]:
    """The cache directory `name`, created if missing, held exclusively until the block ends."""
    workdir = cache_root() / name
    workdir.mkdir(parents=True, exist_ok=True)
    with (cache_root() / f"{name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield workdir
