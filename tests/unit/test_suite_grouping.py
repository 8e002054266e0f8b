"""The suite's own distribution: the README's command keeps a group on one worker.

tests/conftest.py marks the tests of a module whose fixtures outlive a test (and the tests
sharing state beyond a database) with a group, and pytest-xdist hands each group out whole.
Checked as the README runs the suite, on two workers, over this module's probes: a module
fixture and the tests that use it, each writing down the worker it ran on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBES = 4
# Where the probes write; set only by the test below, so the probes run only under it.
RECORD = "RESOLVER_TEST_GROUPING_RECORD"

probe = pytest.mark.skipif(RECORD not in os.environ, reason="run by the test below only")


def _write(line: str) -> None:
    with Path(os.environ[RECORD]).open("a") as record:
        record.write(f"{line} {os.environ.get('PYTEST_XDIST_WORKER', 'main')}\n")


@pytest.fixture(scope="module")
def built_once() -> None:
    _write("built")


@probe
@pytest.mark.parametrize("n", range(PROBES))
@pytest.mark.usefixtures("built_once")
def test_probe(n: int) -> None:
    _write("ran")


def test_the_readme_command_runs_a_module_s_tests_on_one_worker(tmp_path: Path) -> None:
    record = tmp_path / "record"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{Path(__file__).relative_to(ROOT)}::test_probe",
        ],
        cwd=ROOT,
        env={**os.environ, RECORD: str(record)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line.split() for line in record.read_text().splitlines()]
    built = [worker for what, worker in lines if what == "built"]
    ran = [worker for what, worker in lines if what == "ran"]
    # Two workers, split: each builds the fixture and runs some of the probes.
    assert len(built) == 1 and ran == built * PROBES, lines
