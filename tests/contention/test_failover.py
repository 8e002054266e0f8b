"""Failover: a primary with a streaming standby, killed and promoted twice mid-run.

Asynchronous replication may lose what the old primary acknowledged last (the checker counts
it); synchronous replication may not (the checker flags any acknowledged write that is gone).
Either way: no double terminal state, no automatic resolution without surviving evidence, no
stale write, no live lease resolved, everything settles.
"""

from __future__ import annotations

import os
import random

import pytest

from .harness import FAILOVER_ASYNC, FAILOVER_SYNC, Profile, run_profile

pytestmark = pytest.mark.contention


@pytest.mark.parametrize("profile", [FAILOVER_ASYNC, FAILOVER_SYNC], ids=lambda p: p.name)
def test_failovers_converge_without_violations(
    profile: Profile, capsys: pytest.CaptureFixture[str]
) -> None:
    # Replay a failure with RESOLVER_TEST_CONTENTION_SEED=<seed printed in the report>.
    seed = int(
        os.environ.get("RESOLVER_TEST_CONTENTION_SEED") or random.SystemRandom().randrange(2**31)
    )
    report = run_profile(profile, seed)
    with capsys.disabled():
        print("\n" + report.render())
    assert report.ok, report.render()
    assert report.faults["failover"] == profile.failovers
    if profile.replication == "sync":
        assert not report.verdict.lost, "synchronous replication lost an acknowledged write"
    assert report.verdict.operations["inspect"] >= profile.controls // 2
