"""Hypothesis stateful test: the executor API, claims, commits and manual decisions against
real PostgreSQL, compared with a small in-memory model after every step.

Time is the injectable `now_ms` of every statement, advanced by a rule. Manual decisions go
through the real `ManualResolutionService`, by authorized users and by ones who must be refused.
One dispatch (d0) is a payment whose `confirm_succeeded` needs two people: the model follows its
proposals (proposed, confirmed, rejected, withdrawn, voided by a new version, expired).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from psycopg.rows import dict_row

from resolver.core.domain import (
    ClaimedItem,
    Completion,
    Decision,
    ExecutionLease,
    Finding,
    FindingKind,
    ItemOutcome,
    ManualDecision,
    ManualResult,
    Outcome,
    Principal,
    ProposalAction,
    ProposalResult,
    sha256_hex,
)
from resolver.core.errors import (
    FenceConflict,
    NotFound,
    ProposalConflict,
    ResolverError,
    StrongAuthRequired,
)
from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.human.manual import ManualResolutionService
from tests.helpers.database import T0, new_spec
from tests.helpers.postgres import DatabaseFactory
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

from .checker import check
from .forgery import forge_two_person

pytestmark = pytest.mark.contention

LEASE_MS = 1_000
RECOVERY_LEASE_MS = 1_500
RETRY_MS = 500
# The model's own statement of the routing rule the database applies (resolver_finding_status).
NEEDS_HUMAN = frozenset({FindingKind.CONFLICT, FindingKind.UNSUPPORTED})
DISPATCHES = ("d0", "d1", "d2")
REPLICAS = ("ra", "rb")
TERMINAL = ("succeeded", "failed", "blocked")
# The two-person case: d0 (the dispatch the search starts first) is a payment, and marking a
# payment succeeded needs two people.
PAYMENT = "d0"
TWO_PERSON = ("payments.*", "confirm_succeeded")
PROPOSAL_TTL_MS = 3_000
MAX_PROPOSALS = 16
DECIDERS = ("alice", "bob")


@dataclass
class MProposal:
    decision: Decision
    proposed_by: str
    version: int
    expires: int


@dataclass
class MExecution:
    state: str = "leased"
    version: int = 1
    expires: int = 0
    leases: list[ExecutionLease] = field(default_factory=list)
    completed_by_us: bool = False
    outcome_digest: str | None = None


@dataclass
class MControl:
    status: str = "armed"
    execution_version: int = 0
    recovery_version: int = 0
    token: str | None = None
    lease_expires: int | None = None
    next_scan: int = 0
    last_finding: str | None = None
    finding_count: int = 0


@dataclass
class MResolution:
    source: str
    outcome: str
    digest: str | None


def digest_for(dispatch_id: str, outcome: Outcome) -> str:
    return sha256_hex(f"receipt:{dispatch_id}:{outcome.value}")


def finding_for(dispatch_id: str, kind: FindingKind) -> Finding:
    if kind.is_verified:
        outcome = Outcome.SUCCEEDED if kind is FindingKind.VERIFIED_SUCCEEDED else Outcome.FAILED
        return Finding.verified(outcome, digest_for(dispatch_id, outcome), "ok")
    return Finding(kind)


class RecoveryMachine(RuleBasedStateMachine):
    """One database per run of the machine; the model is the specification."""

    url: str = ""

    def __init__(self) -> None:
        super().__init__()
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                "TRUNCATE recovery_authorizations, approved_action_recovery_resolutions,"
                " approved_action_recovery_controls, approved_action_executions,"
                " approved_action_dispatches, recovery_role_bindings, recovery_projects,"
                " recovery_audit_chain, recovery_proposals, recovery_two_person_rules CASCADE"
            )
            conn.execute("INSERT INTO recovery_two_person_rules VALUES (%s, %s)", TWO_PERSON)
            # Each example starts a fresh audit chain (migration 0012) with its mutation ids.
            # Only a decision moves the head: the reset passes with the triggers off (the
            # suite's own superuser), as an owner's DDL would.
            conn.execute("SET session_replication_role = replica")
            conn.execute(
                "UPDATE recovery_audit_head SET seq = 0, hash = repeat('0', 64),"
                " prev_hash = repeat('0', 64)"
            )
            conn.execute("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
            for user in DECIDERS:
                conn.execute(
                    "INSERT INTO recovery_role_bindings VALUES ('proj-1', %s, 'approval.recover', 1)",
                    (user,),
                )
        self.store = Storage(self.url)
        self.store.open()
        self.client = ExecutionClient(self.store, owner="executor", lease_seconds=LEASE_MS / 1000)
        self.operators = ManualResolutionService(
            self.store, proposal_ttl_ms=PROPOSAL_TTL_MS, signer=TEST_SIGNER
        )
        self.decisions = 0
        self.now = T0
        self.executions: dict[str, MExecution] = {}
        self.controls: dict[str, MControl] = {}
        self.resolutions: dict[str, MResolution] = {}
        self.held: dict[str, list[tuple[ClaimedItem, Finding]]] = {r: [] for r in REPLICAS}
        self.proposals: dict[str, MProposal] = {}
        self.proposal_count: dict[str, int] = {}

    def teardown(self) -> None:
        self.store.close()

    @initialize()
    def begin(self) -> None:
        # Held items survive renewals, completions and takeovers: their commit must then
        # fail the fence, which the commit rule checks against the model.
        self.now = T0

    # -- executor -------------------------------------------------------------------------

    @precondition(lambda self: len(self.executions) < len(DISPATCHES))
    @rule(data=st.data())
    def start(self, data: st.DataObject) -> None:
        """Create, lease and cross the start barrier (the lease is live: it was just taken)."""
        d = data.draw(st.sampled_from([d for d in DISPATCHES if d not in self.executions]))
        action_type = "payments.charge" if d == PAYMENT else "test.action"
        self.client.create_dispatch(
            new_spec(action_type, dispatch_id=d, idempotency_key=f"idem-{d}")
        )
        leased = self.client.at(self.now).lease(d)
        lease = self.client.at(self.now).start(leased)
        m = MExecution("executing", 2, self.now + LEASE_MS, [leased, lease])
        self.executions[d] = m
        assert (lease.version, lease.lease_expires_at_ms) == (m.version, m.expires)
        self.controls[d] = MControl(execution_version=m.version, next_scan=m.expires)

    @precondition(lambda self: self.executions)
    @rule(data=st.data(), stale=st.booleans())
    def renew(self, data: st.DataObject, stale: bool) -> None:
        d = data.draw(st.sampled_from(sorted(self.executions)))
        m = self.executions[d]
        lease = m.leases[0] if stale else m.leases[-1]
        ok = m.state in ("leased", "executing") and lease.version == m.version
        try:
            renewed = self.client.at(self.now).renew(lease)
        except FenceConflict:
            assert not ok, "a current lease could not renew"
            return
        assert ok, "a stale lease renewed"
        m.version, m.expires = m.version + 1, self.now + LEASE_MS
        self.proposals.pop(d, None)  # a new version voids the open proposal
        m.leases.append(renewed)
        c = self.controls.get(d)
        if c is not None and c.status in ("armed", "manual"):
            c.status, c.execution_version = "armed", m.version
            c.recovery_version += 1
            c.token, c.lease_expires, c.next_scan = None, None, m.expires

    @precondition(lambda self: self.controls)
    @rule(data=st.data(), outcome=st.sampled_from(Outcome), stale=st.booleans())
    def complete(self, data: st.DataObject, outcome: Outcome, stale: bool) -> None:
        d = data.draw(st.sampled_from(sorted(self.controls)))
        m = self.executions[d]
        lease = m.leases[1] if stale and len(m.leases) > 1 else m.leases[-1]
        completion = Completion(outcome, "ok", f"done-{d}", digest_for(d, outcome))
        expected = self._expected_completion(d, m, lease, completion)
        try:
            result: CompletionResult | None = self.client.at(self.now).complete(lease, completion)
        except FenceConflict:
            result = None
        assert result == expected, (result, expected)
        if result is CompletionResult.COMMITTED:
            m.state, m.version = outcome.value, m.version + 1
            self.proposals.pop(d, None)
            m.completed_by_us, m.outcome_digest = True, completion.evidence_digest
            c = self.controls[d]
            c.status, c.execution_version = "resolved", m.version
            c.recovery_version += 1
            c.token = c.lease_expires = None

    def _expected_completion(
        self, d: str, m: MExecution, lease: ExecutionLease, completion: Completion
    ) -> CompletionResult | None:
        if m.state == "executing" and lease.version == m.version:
            return CompletionResult.COMMITTED
        if m.state != completion.outcome.value:
            return None
        if d in self.resolutions:
            same = self.resolutions[d].digest == completion.evidence_digest
            return CompletionResult.REPLAYED if same else None
        return CompletionResult.REPLAYED if m.completed_by_us else None

    # -- resolver -------------------------------------------------------------------------

    @rule(replica=st.sampled_from(REPLICAS), page=st.integers(1, 3), data=st.data())
    def claim_and_inspect(self, replica: str, page: int, data: st.DataObject) -> None:
        """Claim a page; each item's inspect result is drawn now and committed later."""
        due = sorted(
            (c.next_scan, d)
            for d, c in self.controls.items()
            if c.status == "armed"
            and c.next_scan <= self.now
            and (c.lease_expires is None or c.lease_expires <= self.now)
            and self.executions[d].state == "executing"
            and self.executions[d].expires <= self.now
            and self.executions[d].version == c.execution_version
        )[:page]
        items = self.store.at(self.now).claim_due_page(replica, page, RECOVERY_LEASE_MS)
        assert {i.identity.dispatch_id for i in items} == {d for _, d in due}
        for item in items:
            d = item.identity.dispatch_id
            c = self.controls[d]
            c.recovery_version += 1
            assert item.recovery_version == c.recovery_version
            assert item.execution_version == c.execution_version
            assert item.claimed_at_ms == self.now
            c.token, c.lease_expires = item.recovery_token, self.now + RECOVERY_LEASE_MS
            c.next_scan = self.now + RECOVERY_LEASE_MS
            kind = data.draw(st.sampled_from(FindingKind), label=f"finding for {d}")
            self.held[replica].append((item, finding_for(d, kind)))

    @precondition(lambda self: any(self.held.values()))
    @rule(data=st.data())
    def stall_and_take_over(self, data: st.DataObject) -> None:
        """A replica holding a page stalls past its recovery lease; the other claims."""
        stalled = data.draw(st.sampled_from([r for r in REPLICAS if self.held[r]]))
        self.advance(RECOVERY_LEASE_MS)
        other = next(r for r in REPLICAS if r != stalled)
        self.claim_and_inspect(other, len(DISPATCHES), data)

    @precondition(lambda self: any(self.held.values()))
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        replica = data.draw(st.sampled_from([r for r in REPLICAS if self.held[r]]))
        ready, self.held[replica] = self.held[replica], []
        outcomes = [ItemOutcome(i, f, RETRY_MS, f"auto-{i.recovery_token}") for i, f in ready]
        fenced = [(i, f) for i, f in ready if self._fence_holds(i)]
        report = self.store.at(self.now).commit_outcomes(outcomes)
        assert report.accepted == {i.identity.dispatch_id for i, _ in fenced}, (report, fenced)
        for item, finding in fenced:
            self._apply_commit(item, finding)

    def _fence_holds(self, item: ClaimedItem) -> bool:
        d = item.identity.dispatch_id
        c, m = self.controls[d], self.executions[d]
        return (
            c.status == "armed"
            and c.token == item.recovery_token
            and c.recovery_version == item.recovery_version
            and c.execution_version == item.execution_version
            and m.state == "executing"
            and m.version == item.execution_version
        )

    def _apply_commit(self, item: ClaimedItem, finding: Finding) -> None:
        d = item.identity.dispatch_id
        c, m = self.controls[d], self.executions[d]
        c.recovery_version += 1
        c.token = c.lease_expires = None
        c.last_finding, c.finding_count = finding.kind.value, c.finding_count + 1
        if finding.outcome is not None:
            m.state, m.version = finding.outcome.value, m.version + 1
            self.proposals.pop(d, None)
            c.status, c.execution_version = "resolved", m.version
            self.resolutions[d] = MResolution(
                "automatic", finding.outcome.value, finding.evidence_digest
            )
        elif finding.kind in NEEDS_HUMAN:
            c.status = "manual"
        else:
            c.next_scan = self.now + RETRY_MS

    # -- operator and clock ---------------------------------------------------------------

    @precondition(lambda self: self.controls)
    @rule(
        data=st.data(),
        decision=st.sampled_from(Decision),
        stale=st.booleans(),
        who=st.sampled_from(["alice", "bob", "alice-weak-auth", "mallory"]),
    )
    def manual(self, data: st.DataObject, decision: Decision, stale: bool, who: str) -> None:
        """A human decision: a granted user with strong auth on the current version wins,
        alone or, on the payment's succeeded, as the second of two people."""
        d = data.draw(st.sampled_from(sorted(self.controls)))
        self._decide(d, who, decision, stale)

    @precondition(lambda self: bool(self._recovery_required()))
    @rule(data=st.data(), decision=st.sampled_from(Decision), who=st.sampled_from(DECIDERS))
    def decide_recovery_required(self, data: st.DataObject, decision: Decision, who: str) -> None:
        """A decision aimed where one can land: an execution whose lease expired, current
        version, by a granted user (the path to proposals and confirmations)."""
        d = data.draw(st.sampled_from(self._recovery_required()))
        self._decide(d, who, decision, stale=False)

    def _recovery_required(self) -> list[str]:
        return sorted(
            d
            for d, m in self.executions.items()
            if d in self.controls and m.state == "executing" and m.expires <= self.now
        )

    @precondition(lambda self: any(p.expires > self.now for p in self.proposals.values()))
    @rule(data=st.data(), same=st.booleans(), proposer=st.booleans())
    def second_person(self, data: st.DataObject, same: bool, proposer: bool) -> None:
        """While a proposal is open: the other person (or the proposer again) sends the same
        decision or another one."""
        d = data.draw(st.sampled_from(sorted(self.proposals)))
        proposal = self.proposals[d]
        other = next(u for u in DECIDERS if u != proposal.proposed_by)
        decision = proposal.decision
        if not same:
            decision = data.draw(st.sampled_from([x for x in Decision if x is not decision]))
        self._decide(d, proposal.proposed_by if proposer else other, decision, stale=False)

    def _decide(self, d: str, who: str, decision: Decision, stale: bool) -> None:
        m = self.executions[d]
        self.decisions += 1
        expected_version = m.version - 1 if stale else m.version
        user = who.removesuffix("-weak-auth")
        principal = Principal(
            user,
            self.now,
            ("pwd",) if "weak" in who else ("mfa",),
            issuer=TEST_ISSUER,
            token_kid="test-kid",
        )
        request = ManualDecision(
            d, decision, f"m-{self.decisions}", expected_version, "operator_checked"
        )
        fenced = (
            who in DECIDERS
            and m.state == "executing"
            and m.version == expected_version
            and m.expires <= self.now
        )
        expected = self._expected_decision(d, user, decision) if fenced else None
        answer: ManualResult | str | type[ResolverError]
        try:
            answer = self.operators.at(self.now).decide(principal, request)
        except ProposalConflict as exc:
            answer = exc.code
        except ResolverError as exc:
            answer = type(exc)
        if who not in DECIDERS:
            # Someone with no permission learns nothing: the answer to an unknown dispatch.
            assert answer in (NotFound, StrongAuthRequired), answer
            return
        if expected is None:
            assert answer is FenceConflict, answer
            return
        assert answer == expected, (answer, expected, self.proposals.get(d))
        self._apply_decision(d, user, decision, answer)

    def _open_proposal(self, d: str) -> MProposal | None:
        """The model's open proposal, if it can still be confirmed (expiry closes it)."""
        proposal = self.proposals.get(d)
        if proposal is not None and proposal.expires <= self.now:
            del self.proposals[d]
            return None
        return proposal

    def _expected_decision(self, d: str, user: str, decision: Decision) -> ManualResult | str:
        proposal = self._open_proposal(d)
        two_person = d == PAYMENT and decision is Decision.CONFIRM_SUCCEEDED
        if proposal is None and not two_person:
            return ManualResult.COMMITTED
        if proposal is None:
            if self.proposal_count.get(d, 0) >= MAX_PROPOSALS:
                return "proposal_limit"
            return ManualResult.PROPOSED
        if proposal.proposed_by == user:
            return "second_person_required"
        if proposal.decision is not decision:
            return "proposal_rejected"
        return ManualResult.COMMITTED

    def _apply_decision(
        self, d: str, user: str, decision: Decision, answer: ManualResult | str
    ) -> None:
        m, c = self.executions[d], self.controls[d]
        if answer is ManualResult.PROPOSED:
            self.proposals[d] = MProposal(decision, user, m.version, self.now + PROPOSAL_TTL_MS)
            self.proposal_count[d] = self.proposal_count.get(d, 0) + 1
            return
        if answer == "proposal_rejected":
            del self.proposals[d]
            return
        if answer is not ManualResult.COMMITTED:
            return
        self.proposals.pop(d, None)
        m.state, m.version = decision.terminal_state.value, m.version + 1
        c.status, c.execution_version = "resolved", m.version
        c.recovery_version += 1
        c.token = c.lease_expires = None
        self.resolutions[d] = MResolution("manual", decision.terminal_state.value, None)

    @precondition(lambda self: PAYMENT in self.controls)
    @rule(colleague=st.sampled_from(["bob", "mallory"]))
    def forge_by_hand(self, colleague: str) -> None:
        """The two-person decision written by hand, as the schema owner (this suite's
        superuser) with the triggers on: refused, whatever the model holds, and nothing moves
        (the invariants compare every row with the model)."""
        self.decisions += 1
        history = _Recorded()
        with psycopg.connect(self.url, autocommit=True) as conn:
            forged = forge_two_person(
                conn, history, "owner", PAYMENT, "alice", colleague, f"forged-{self.decisions}"
            )
        assert not forged
        assert check(history.events, [], {}).violations == []

    @precondition(lambda self: self.controls)
    @rule(
        data=st.data(),
        action=st.sampled_from(ProposalAction),
        who=st.sampled_from(DECIDERS),
        aimed=st.booleans(),
    )
    def close_proposal(
        self, data: st.DataObject, action: ProposalAction, who: str, aimed: bool
    ) -> None:
        """Withdraw (the proposer) or reject (the other person) the open proposal, if any:
        usually of a dispatch that has one (`aimed`), sometimes of any."""
        choices = sorted(self.proposals) if aimed and self.proposals else sorted(self.controls)
        d = data.draw(st.sampled_from(choices))
        self.decisions += 1
        principal = Principal(who, self.now, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid")
        proposal = self._open_proposal(d)
        if proposal is None:
            expected: ProposalResult | str = "no_proposal"
        elif action is ProposalAction.WITHDRAW:
            expected = ProposalResult.WITHDRAWN if proposal.proposed_by == who else "not_proposer"
        else:
            expected = ProposalResult.REJECTED if proposal.proposed_by != who else "own_proposal"
        try:
            answer: ProposalResult | str = self.operators.at(self.now).close_proposal(
                principal, d, action, f"m-{self.decisions}", "operator_checked"
            )
        except ProposalConflict as exc:
            answer = exc.code
        assert answer == expected, (answer, expected)
        if isinstance(answer, ProposalResult):
            del self.proposals[d]

    @rule(ms=st.sampled_from([1_000, 2_000, 500, 1]))  # big steps first: leases lapse
    def advance(self, ms: int) -> None:
        self.now += ms

    # -- comparison -----------------------------------------------------------------------

    @invariant()
    def database_matches_model(self) -> None:
        rows = self._rows()
        assert set(rows) == set(self.executions)
        for d, m in self.executions.items():
            row = rows[d]
            assert (row["state"], row["version"]) == (m.state, m.version), (d, row, m)
            if m.state in ("leased", "executing"):
                assert row["lease_expires_at_ms"] == m.expires
            c = self.controls.get(d)
            if c is None:
                assert row["status"] is None
                continue
            actual = (
                row["status"],
                row["execution_version"],
                row["recovery_version"],
                row["recovery_token"],
                row["recovery_lease_expires_at_ms"],
                row["last_finding"],
                row["finding_count"],
            )
            model = (
                c.status,
                c.execution_version,
                c.recovery_version,
                c.token,
                c.lease_expires,
                c.last_finding,
                c.finding_count,
            )
            assert actual == model, (d, actual, model)
            if c.status == "armed":
                assert row["next_scan_at_ms"] == c.next_scan
            r = self.resolutions.get(d)
            assert row["resolutions"] == (1 if r else 0)
            if r is not None:
                assert (row["source"], row["outcome"], row["res_digest"]) == (
                    r.source,
                    r.outcome,
                    r.digest,
                )

    @invariant()
    def proposals_match_model(self) -> None:
        """The open, unexpired proposals are the model's, and every manual settle of the
        payment's succeeded carries two people."""
        with psycopg.connect(self.url, row_factory=dict_row) as conn:
            open_rows = conn.execute(
                "SELECT dispatch_id, outcome, proposed_by, expected_execution_version,"
                " expires_at_ms FROM recovery_proposals"
                " WHERE closed_as IS NULL AND expires_at_ms > %s",
                (self.now,),
            ).fetchall()
            people = conn.execute(
                "SELECT r.dispatch_id, r.outcome, count(DISTINCT a.user_id) AS people"
                " FROM approved_action_recovery_resolutions r"
                " JOIN recovery_authorizations a USING (mutation_id)"
                " WHERE r.source = 'manual' GROUP BY r.dispatch_id, r.outcome"
            ).fetchall()
        actual = {
            r["dispatch_id"]: (
                r["outcome"],
                r["proposed_by"],
                r["expected_execution_version"],
                r["expires_at_ms"],
            )
            for r in open_rows
        }
        model = {
            d: (p.decision.terminal_state.value, p.proposed_by, p.version, p.expires)
            for d, p in self.proposals.items()
            if p.expires > self.now
        }
        assert actual == model, (actual, model)
        for r in people:
            two = r["dispatch_id"] == PAYMENT and r["outcome"] == "succeeded"
            assert r["people"] == (2 if two else 1), r

    def _rows(self) -> dict[str, dict[str, Any]]:
        with psycopg.connect(self.url, row_factory=dict_row) as conn:
            rows = conn.execute(
                "SELECT e.dispatch_id, e.state, e.version, e.lease_expires_at_ms, c.status,"
                " c.execution_version, c.recovery_version, c.recovery_token::text,"
                " c.recovery_lease_expires_at_ms, c.last_finding, c.finding_count,"
                " c.next_scan_at_ms, r.source, r.outcome, r.evidence_digest AS res_digest,"
                " (SELECT count(*) FROM approved_action_recovery_resolutions r2"
                "   WHERE r2.dispatch_id = e.dispatch_id) AS resolutions"
                " FROM approved_action_executions e"
                " LEFT JOIN approved_action_recovery_controls c USING (dispatch_id)"
                " LEFT JOIN approved_action_recovery_resolutions r USING (dispatch_id)"
            ).fetchall()
        return {r["dispatch_id"]: r for r in rows}


@pytest.fixture(scope="module")
def machine_url(databases: DatabaseFactory) -> Iterator[str]:
    url = databases.create()
    yield url
    databases.drop(url)


def test_recovery_matches_the_model(machine_url: str) -> None:
    RecoveryMachine.url = machine_url
    runner = RecoveryMachine.TestCase
    runner.settings = settings(
        max_examples=60,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    runner().runTest()


class _Recorded:
    """A history kept in memory, for the checker."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def record(self, kind: str, f: str, **value: Any) -> None:
        self.events.append({"t": len(self.events), "process": "forger", "type": kind, "f": f,
                            **value})  # fmt: skip
