"""Hypothesis stateful test of late evidence after a manual decision, against real PostgreSQL,
compared with a small in-memory model after every step.

Two replicas claim watches, stall, record what their providers found and close elapsed
windows, in any order, on the injectable database clock. The model says which watch each
claim takes, which records are fenced, which late facts exist; the terminal state of every
decided execution must never move.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from psycopg.rows import dict_row

from resolver.core.domain import (
    Decision,
    Finding,
    FindingKind,
    LateObservation,
    LateWatch,
    ManualDecision,
    Outcome,
    Principal,
    sha256_hex,
)
from resolver.executor.client import ExecutionClient
from resolver.human.manual import ManualResolutionService
from tests.helpers.database import T0, new_spec
from tests.helpers.postgres import DatabaseFactory
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

LEASE_MS = 1_000
WINDOW_MS = 6_000
WATCH_LEASE_MS = 1_500
CADENCE_MS = 1_000
DISPATCHES = ("d0", "d1", "d2", "d3")
REPLICAS = ("ra", "rb")


@dataclass
class MWatch:
    """A decision's watch; `finding`/`agrees` once late evidence was recorded."""

    outcome: str
    decided_at: int
    next_scan: int
    token: str | None = None
    closed: str | None = None
    finding: str | None = None
    agrees: bool | None = None


def finding_for(dispatch_id: str, kind: FindingKind) -> Finding:
    if kind.is_verified:
        outcome = Outcome.SUCCEEDED if kind is FindingKind.VERIFIED_SUCCEEDED else Outcome.FAILED
        digest = sha256_hex(f"late:{dispatch_id}:{outcome.value}")
        return Finding.verified(outcome, digest, "ok")
    return Finding(kind)


class LateEvidenceMachine(RuleBasedStateMachine):
    url: str = ""

    def __init__(self) -> None:
        super().__init__()
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                "TRUNCATE recovery_authorizations, approved_action_recovery_resolutions,"
                " approved_action_recovery_controls, approved_action_executions,"
                " approved_action_dispatches, recovery_role_bindings, recovery_projects,"
                " recovery_audit_chain CASCADE"
            )
            # Only a decision moves the head: the reset passes with the triggers off (the
            # suite's own superuser), as an owner's DDL would.
            conn.execute("SET session_replication_role = replica")
            conn.execute(
                "UPDATE recovery_audit_head SET seq = 0, hash = repeat('0', 64),"
                " prev_hash = repeat('0', 64)"
            )
            conn.execute("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
            conn.execute(
                "INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)"
            )
        self.store = Storage(self.url)
        self.store.open()
        self.client = ExecutionClient(self.store, owner="executor", lease_seconds=LEASE_MS / 1000)
        self.now = T0
        self.crashed: dict[str, int] = {}  # dispatch -> execution version, until decided
        self.decided: dict[str, str] = {}  # dispatch -> terminal state the decision set
        self.watches: dict[str, MWatch] = {}
        self.held: dict[str, list[LateWatch]] = {r: [] for r in REPLICAS}
        self.observations = 0

    def teardown(self) -> None:
        self.store.close()

    # -- the decisions the watches follow -------------------------------------------------

    @precondition(lambda self: len(self.crashed) + len(self.decided) < len(DISPATCHES))
    @rule()
    def crash(self) -> None:
        """An execution that crossed the barrier a lease ago and whose executor died."""
        d = next(d for d in DISPATCHES if d not in self.crashed and d not in self.decided)
        self.client.create_dispatch(new_spec(dispatch_id=d, idempotency_key=f"idem-{d}"))
        started = self.now - LEASE_MS
        client = self.client.at(started)
        lease = client.start(client.lease(d))
        self.crashed[d] = lease.version

    @precondition(lambda self: self.crashed)
    @rule(data=st.data(), decision=st.sampled_from(Decision))
    def decide(self, data: st.DataObject, decision: Decision) -> None:
        d = data.draw(st.sampled_from(sorted(self.crashed)))
        version = self.crashed.pop(d)
        request = ManualDecision(d, decision, f"m-{d}", version, "operator_checked")
        principal = Principal("alice", self.now, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid")
        ManualResolutionService(self.store, signer=TEST_SIGNER).at(self.now).decide(
            principal, request
        )
        self.decided[d] = decision.terminal_state.value
        # Never inspected (no finding overridden): a decision claiming an outcome is watched.
        if decision.terminal_state.value != "blocked":
            self.watches[d] = MWatch(decision.terminal_state.value, self.now, self.now)

    # -- the watchers ---------------------------------------------------------------------

    def _open_in_window(self, w: MWatch) -> bool:
        return w.closed is None and w.decided_at + WINDOW_MS > self.now

    @rule(replica=st.sampled_from(REPLICAS), page=st.integers(1, 3))
    def claim(self, replica: str, page: int) -> None:
        """Due watches, open and inside the window, in due order, under a fresh token."""
        due = sorted(
            (w.next_scan, d)
            for d, w in self.watches.items()
            if self._open_in_window(w) and w.next_scan <= self.now
        )[:page]
        claimed = self.store.at(self.now).claim_late_watches(
            replica, page, WATCH_LEASE_MS, WINDOW_MS
        )
        assert [w.identity.dispatch_id for w in claimed] == [d for _, d in due]
        for watch in claimed:
            w = self.watches[watch.identity.dispatch_id]
            assert watch.decided_outcome.value == w.outcome
            w.token, w.next_scan = watch.watch_token, self.now + WATCH_LEASE_MS
            self.held[replica].append(watch)

    @precondition(lambda self: any(self.held.values()))
    @rule(data=st.data())
    def record(self, data: st.DataObject) -> None:
        """A replica records its held looks: only a watch whose token is still the one it
        claimed, open and inside the window, is fenced; a verified finding becomes the one
        late fact and closes it, `unsupported` closes it, anything else schedules a look."""
        replica = data.draw(st.sampled_from([r for r in REPLICAS if self.held[r]]))
        held, self.held[replica] = self.held[replica], []
        observations = []
        for watch in held:
            d = watch.identity.dispatch_id
            kind = data.draw(st.sampled_from(FindingKind), label=f"finding for {d}")
            self.observations += 1
            observations.append(
                LateObservation(
                    watch, finding_for(d, kind), f"late-{self.observations}", CADENCE_MS
                )
            )
        fenced = [
            o
            for o in observations
            if self._open_in_window(self.watches[o.watch.identity.dispatch_id])
            and self.watches[o.watch.identity.dispatch_id].token == o.watch.watch_token
        ]
        records = self.store.at(self.now).record_late_observations(replica, observations, WINDOW_MS)
        assert sorted(r.watch.identity.dispatch_id for r in records) == sorted(
            o.watch.identity.dispatch_id for o in fenced
        )
        for o in fenced:
            w, kind = self.watches[o.watch.identity.dispatch_id], o.finding.kind
            w.token, w.next_scan = None, self.now + CADENCE_MS
            if kind.is_verified:
                w.closed, w.finding = "observed", kind.value
                w.agrees = kind.value == f"verified_{w.outcome}"
            elif kind is FindingKind.UNSUPPORTED:
                w.closed = "unsupported"

    @rule(replica=st.sampled_from(REPLICAS), data=st.data())
    def look(self, replica: str, data: st.DataObject) -> None:
        """One watcher page with no stall: claim, then record at once."""
        others = {r: self.held[r] for r in REPLICAS if r != replica}
        self.held.update({r: [] for r in others})
        self.claim(replica, len(DISPATCHES))
        if self.held[replica]:
            self.record(data)
        self.held.update(others)

    @rule()
    def expire(self) -> None:
        """Close every open watch whose window elapsed (held ones too: nothing locks them)."""
        elapsed = {
            d
            for d, w in self.watches.items()
            if w.closed is None and w.decided_at + WINDOW_MS <= self.now
        }
        assert self.store.at(self.now).expire_late_watches(WINDOW_MS, 10) == len(elapsed)
        for d in elapsed:
            self.watches[d].closed, self.watches[d].token = "window_elapsed", None

    @rule(ms=st.sampled_from([1_000, 2_000, 500, 1]))
    def advance(self, ms: int) -> None:
        self.now += ms

    # -- comparison -----------------------------------------------------------------------

    @invariant()
    def database_matches_model(self) -> None:
        with psycopg.connect(self.url, row_factory=dict_row) as conn:
            watches = conn.execute(
                "SELECT dispatch_id, decided_outcome, closed_reason, watch_token::text,"
                " next_scan_at_ms FROM recovery_late_watches"
            ).fetchall()
            facts = conn.execute(
                "SELECT dispatch_id, finding, agrees FROM recovery_late_evidence"
            ).fetchall()
            states = conn.execute(
                "SELECT dispatch_id, state FROM approved_action_executions"
                " WHERE state IN ('succeeded', 'failed', 'blocked')"
            ).fetchall()
        assert {
            w["dispatch_id"]: (w["decided_outcome"], w["closed_reason"], w["watch_token"])
            for w in watches
        } == {d: (w.outcome, w.closed, w.token) for d, w in self.watches.items()}
        for row in watches:
            if row["closed_reason"] is None:
                assert row["next_scan_at_ms"] == self.watches[row["dispatch_id"]].next_scan
        assert {f["dispatch_id"]: (f["finding"], f["agrees"]) for f in facts} == {
            d: (w.finding, w.agrees) for d, w in self.watches.items() if w.finding is not None
        }
        # Late evidence never moves a terminal state: each is what the decision set.
        assert {s["dispatch_id"]: s["state"] for s in states} == self.decided


@pytest.fixture(scope="module")
def machine_url(databases: DatabaseFactory) -> Iterator[str]:
    url = databases.create()
    yield url
    databases.drop(url)


def test_late_evidence_matches_the_model(machine_url: str) -> None:
    LateEvidenceMachine.url = machine_url
    runner = LateEvidenceMachine.TestCase
    runner.settings = settings(
        max_examples=40,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    runner().runTest()
