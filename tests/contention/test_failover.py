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

from . import patroni
from .harness import FAILOVER_ASYNC, FAILOVER_SYNC, PATRONI_FAILOVER, Profile, run_profile

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


@pytest.mark.skipif(
    not os.environ.get("RESOLVER_TEST_PATRONI"),
    reason="opt-in (several minutes, 8 replicas and a Patroni cluster): RESOLVER_TEST_PATRONI=1",
)
def test_patroni_failovers_lose_no_acknowledged_write(capsys: pytest.CaptureFixture[str]) -> None:
    """Patroni's own failovers on etcd (switchover, leader SIGKILLed, leader cut off from
    etcd) with synchronous_mode on, reached through a multi-host URL."""
    missing = patroni.available()
    if missing:
        pytest.skip(missing)
    seed = int(
        os.environ.get("RESOLVER_TEST_CONTENTION_SEED") or random.SystemRandom().randrange(2**31)
    )
    report = run_profile(PATRONI_FAILOVER, seed)
    with capsys.disabled():
        print("\n" + report.render())
    assert report.ok, report.render()
    assert report.faults["failover"] == PATRONI_FAILOVER.failovers
    assert not report.verdict.lost, "synchronous_mode lost an acknowledged write"
