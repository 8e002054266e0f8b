"""Fixtures for the deploy tests: the Prometheus binaries (promtool, prometheus) and a database
set up with every role."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.roles import RoleDatabase, role_database

APT_PACKAGE = "prometheus"  # Debian's package ships both promtool and the server


def prometheus_binary(name: str) -> Path:
    """The binary, installed from Debian's package when missing and we may; else a skip.

    In CI (.ci/run installs the package) a missing binary is a failure, never a skip.
    """
    found = shutil.which(name) or _install(name)
    if found:
        return Path(found)
    reason = (
        f"{name} is not installed and could not be installed; "
        f"run `apt-get install {APT_PACKAGE}` (bash .ci/run does)"
    )
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _install(name: str) -> str | None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", APT_PACKAGE]
    for step in (install, ["apt-get", "update", "-qq"], install):
        subprocess.run(step, env=env, capture_output=True, timeout=600, check=False)
        if shutil.which(name):
            break
    return shutil.which(name)


@pytest.fixture(scope="session")
def promtool() -> Path:
    return prometheus_binary("promtool")


@pytest.fixture(scope="session")
def prometheus() -> Path:
    return prometheus_binary("prometheus")


@pytest.fixture(scope="module")
def role_db(pg_server: str) -> Iterator[RoleDatabase]:
    """roles.sql and `resolver migrate --grants` on a fresh database, one per module."""
    with role_database(pg_server) as db:
        yield db
