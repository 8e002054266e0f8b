"""The quick profile: 4 `resolver run` processes, thousands of controls, every fault, 0 violations."""

from __future__ import annotations

import os
import random

import pytest

from .harness import QUICK, run_profile

pytestmark = pytest.mark.contention


def test_quick_profile_converges_without_violations(capsys: pytest.CaptureFixture[str]) -> None:
    # Replay a failure with RESOLVER_TEST_CONTENTION_SEED=<seed printed in the report>.
    seed = int(
        os.environ.get("RESOLVER_TEST_CONTENTION_SEED") or random.SystemRandom().randrange(2**31)
    )
    report = run_profile(QUICK, seed)
    with capsys.disabled():
        print("\n" + report.render())
    assert report.ok, report.render()
    assert report.faults["pg_restart"] == QUICK.pg_restarts
    assert sum(report.faults.values()) >= 10, "the fault schedule barely ran"
    assert report.verdict.operations["inspect"] >= QUICK.controls
