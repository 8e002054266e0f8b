"""Node.js fixtures: the SDK (sdk/node) copied beside an npm-installed `pg`, and its tarball.

npm installs into a cache directory once; without node/npm or a reachable npm registry the
tests that need them are skipped and say why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from tests.helpers.cache import locked_cache_dir

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "node"
SDK_FILES = ("package.json", "index.js", "index.d.ts", "README.md")


def npm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    npm_bin = shutil.which("npm")
    if npm_bin is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed for the Node.js SDK and example")
    return subprocess.run(
        [npm_bin, *args, "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def npm_install(workdir: Path, *packages: str) -> None:
    done = npm("install", "--no-package-lock", *packages, cwd=workdir)
    if done.returncode != 0:
        pytest.skip(f"npm could not install (registry unreachable?): {done.stderr}")


def passes_node_suite(
    cwd: Path, files: Sequence[str], database_url: str, env: Mapping[str, str], at_least: int
) -> None:
    """`node --test files` in `cwd` against `database_url`, its crashes settled by this
    Python's `resolver run`, with `env` besides: every test ran and passed (none skipped for a
    missing database or resolver), at least `at_least` of them."""
    done = subprocess.run(
        ["node", "--test", *files],
        cwd=cwd,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(Path.home()),
            "DATABASE_URL": database_url,
            "RESOLVER_PYTHON": sys.executable,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    summary = dict(re.findall(r"^# (tests|pass|fail|skipped|cancelled) (\d+)$", done.stdout, re.M))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert (summary["fail"], summary["skipped"], summary["cancelled"]) == ("0", "0", "0"), summary
    assert int(summary["pass"]) == int(summary["tests"]) >= at_least, summary


@pytest.fixture(scope="session")
def node_sdk() -> Path:
    """sdk/node as a user's checkout: its files, its tests and `pg` in node_modules."""
    with locked_cache_dir("node-sdk") as workdir:
        for name in SDK_FILES:
            shutil.copy(SDK / name, workdir / name)
        shutil.rmtree(workdir / "test", ignore_errors=True)
        shutil.copytree(SDK / "test", workdir / "test")
        # pg, and the optional @aws-sdk/client-s3 the object-storage tests publish with.
        if not all((workdir / "node_modules" / m).is_dir() for m in ("pg", "@aws-sdk/client-s3")):
            npm_install(workdir)
    return workdir


@pytest.fixture(scope="session")
def sdk_tarball(node_sdk: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`npm pack` of the SDK: what a user would install."""
    out = tmp_path_factory.mktemp("npm-pack")
    done = npm("pack", "--json", "--pack-destination", str(out), cwd=node_sdk)
    assert done.returncode == 0, done.stderr
    (packed,) = json.loads(done.stdout)
    return out / packed["filename"]
