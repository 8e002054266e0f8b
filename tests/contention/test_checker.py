"""The checker itself: a clean history passes, and each injected violation is named."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from resolver.core.domain import FindingKind, Outcome
from resolver_test_support.scripted import Script

from .checker import Event, HumanPolicy, LossPoint, Row, check
from .workload import Kind, Plan, _spec

D = "w0-000001"
PLAN = Plan(
    _spec(D, "pay.charge"), Kind.CRASHED_VERIFIED, Script((FindingKind.VERIFIED_SUCCEEDED,))
)
DIGEST = PLAN.expected_digest(Outcome.SUCCEEDED)


def ev(t: int, process: str, kind: str, f: str, **value: Any) -> Event:
    return {"t": t, "process": process, "type": kind, "f": f, **value}


def claim(t: int, process: str, token: str, rv: int, claimed_at: int = 1_500) -> list[Event]:
    item = {
        "dispatch_id": D,
        "token": token,
        "recovery_version": rv,
        "execution_version": 2,
        "claimed_at_ms": claimed_at,
    }
    return [ev(t, process, "invoke", "claim"), ev(t + 1, process, "ok", "claim", items=[item])]


def inspect(t: int, process: str, token: str) -> list[Event]:
    fields = {"dispatch_id": D, "token": token}
    return [
        ev(t, process, "invoke", "inspect", **fields),
        ev(t + 1, process, "ok", "inspect", **fields, finding="verified_succeeded"),
    ]


def commit(t: int, process: str, token: str, rv: int, accepted: bool = True) -> list[Event]:
    item = {
        "dispatch_id": D,
        "token": token,
        "recovery_version": rv,
        "execution_version": 2,
        "finding": "verified_succeeded",
        "evidence_digest": DIGEST,
        "mutation_id": f"auto-{token}",
    }
    return [
        ev(t, process, "invoke", "commit", items=[item]),
        ev(
            t + 1,
            process,
            "ok",
            "commit",
            accepted=[D] if accepted else [],
            rejected=[] if accepted else [D],
        ),
    ]


def clean_history() -> list[Event]:
    return [
        ev(10, "seeder", "ok", "start", dispatch_id=D, version=2, lease_expires_at_ms=1_000),
        *claim(20, "r1", "tok-a", 1),
        *inspect(30, "r1", "tok-a"),
        *commit(40, "r1", "tok-a", 1),
    ]


def clean_row() -> Row:
    return {
        "dispatch_id": D,
        "state": "succeeded",
        "version": 3,
        "completion_mutation_id": None,
        "exec_digest": DIGEST,
        "status": "resolved",
        "closed_by": "automatic",
        "recovery_token": None,
        "last_finding": "verified_succeeded",
        "source": "automatic",
        "outcome": "succeeded",
        "finding": "verified_succeeded",
        "res_digest": DIGEST,
        "res_mutation_id": "auto-tok-a",
        "resolutions": 1,
        "action_type": "pay.charge",
        "manual_reason": None,
        "manual_at_ms": None,
        "first_inspected_at_ms": 1_500,
        "people": 0,
        "open_proposals": 0,
    }


def test_a_clean_history_has_no_violation() -> None:
    verdict = check(clean_history(), [clean_row()], {D: PLAN})
    assert verdict.violations == []
    assert verdict.operations["claim"] == verdict.operations["inspect"] == 1


Mutation = Callable[[list[Event], Row], tuple[list[Event], Row, dict[str, Plan]]]


def _events(extra: list[Event]) -> Mutation:
    return lambda events, row: (sorted(events + extra, key=lambda e: e["t"]), row, {D: PLAN})


def _row(**changes: Any) -> Mutation:
    return lambda events, row: (events, {**row, **changes}, {D: PLAN})


def _plan(plan: Plan) -> Mutation:
    return lambda events, row: (events, row, {D: plan})


CASES: dict[str, tuple[str, Mutation]] = {
    "second inspect under one lease": (
        "one_inspect_per_lease",
        _events(inspect(31, "r1", "tok-a")),
    ),
    "claim of a live lease": (
        "no_live_lease_claimed",
        _events(
            [
                ev(
                    15,
                    "executors",
                    "ok",
                    "renew",
                    dispatch_id=D,
                    version=2,
                    lease_expires_at_ms=2_000,
                )
            ]
        ),
    ),
    "commit after a newer claim": ("stale_write", _events(claim(25, "r2", "tok-b", 2))),
    "commit after a renew": (
        "stale_write",
        _events(
            [ev(35, "executors", "ok", "renew", dispatch_id=D, version=3, lease_expires_at_ms=9)]
        ),
    ),
    "two accepted resolutions": (
        "one_terminal_transition",
        _events([*claim(50, "r2", "tok-c", 3), *commit(60, "r2", "tok-c", 3)]),
    ),
    "completion and resolution": (
        "one_terminal_transition",
        _events(
            [ev(70, "executors", "ok", "complete", dispatch_id=D, version=2, result="committed")]
        ),
    ),
    "resolution on the wrong digest": (
        "verified_evidence_only",
        _row(res_digest="f" * 64, exec_digest="f" * 64),
    ),
    "resolution on tampered evidence": (
        "verified_evidence_only",
        _plan(Plan(PLAN.spec, Kind.CRASHED_MANUAL, PLAN.script, tampered=True)),
    ),
    "conflict settled automatically": (
        "needs_human",
        _plan(Plan(PLAN.spec, Kind.CRASHED_MANUAL, Script((FindingKind.CONFLICT,)))),
    ),
    "left armed": ("settles", _row(status="armed", closed_by=None, state="executing", source=None)),
    "terminal execution, open control": ("atomic_commit", _row(status="manual", closed_by=None)),
    "commit with no claim": (
        "stale_write",
        lambda events, row: ([e for e in events if e["f"] != "claim"], row, {D: PLAN}),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_injected_violation_is_caught(case: str) -> None:
    rule, mutate = CASES[case]
    events, row, plans = mutate(copy.deepcopy(clean_history()), clean_row())
    violations = check(events, [row], plans).violations
    assert any(v.startswith(f"[{rule}]") for v in violations), violations


# -- people: escalations and two-person decisions ----------------------------------------------

POLICY = HumanPolicy(
    two_person=[("pay.*", "confirm_succeeded")],
    escalate_after_ms={"pay.charge": {"missing": 60_000}},
)
ESCALATED = {
    **clean_row(),
    "state": "executing",
    "version": 2,
    "exec_digest": None,
    "status": "manual",
    "closed_by": None,
    "last_finding": "missing",
    "manual_reason": "evidence_window_elapsed",
    "first_inspected_at_ms": 1_500,
    "manual_at_ms": 61_500,
    **dict.fromkeys(("source", "outcome", "finding", "res_digest", "res_mutation_id"), None),
    "resolutions": 0,
}
TWO_PEOPLE = {
    **clean_row(),
    "exec_digest": None,
    "closed_by": "manual",
    "source": "manual",
    "finding": "missing",
    "res_digest": None,
    "res_mutation_id": "op-b",
    "people": 2,
}
MANUAL_PLAN = {D: Plan(PLAN.spec, Kind.CRASHED_MANUAL, Script((FindingKind.MISSING,)))}
PEOPLE_CASES: dict[str, tuple[str, Row]] = {
    "escalated before its window": ("escalation_window", {**ESCALATED, "manual_at_ms": 60_000}),
    "escalated on a finding with no window": (
        "escalation_window",
        {**ESCALATED, "last_finding": "still_running"},
    ),
    "two-person decision by one person": ("two_people", {**TWO_PEOPLE, "people": 1}),
    "settled with a proposal still open": ("two_people", {**TWO_PEOPLE, "open_proposals": 1}),
}


def test_a_forged_decision_that_committed_is_caught_and_a_refused_one_is_not() -> None:
    refused = [
        ev(10, "forger", "invoke", "forge", dispatch_id=D, role="resolver_runtime", user="bob"),
        ev(11, "forger", "fail", "forge", dispatch_id=D, role="resolver_runtime", user="bob",
           error="InsufficientPrivilege"),
    ]  # fmt: skip
    assert check(refused, [TWO_PEOPLE], MANUAL_PLAN, policy=POLICY).violations == []
    committed = [*refused[:1], {**refused[1], "type": "ok"}]
    violations = check(committed, [TWO_PEOPLE], MANUAL_PLAN, policy=POLICY).violations
    assert any(v.startswith("[two_people]") and "resolver_runtime" in v for v in violations)


def test_a_clean_escalation_and_a_two_person_decision_pass() -> None:
    for row in (ESCALATED, TWO_PEOPLE):
        assert check([], [row], MANUAL_PLAN, policy=POLICY).violations == []
    # Without a rule naming it, one person suffices.
    one = {**TWO_PEOPLE, "action_type": "db.mutate", "people": 1}
    assert check([], [one], MANUAL_PLAN, policy=POLICY).violations == []


@pytest.mark.parametrize("case", sorted(PEOPLE_CASES))
def test_each_planted_people_violation_is_caught(case: str) -> None:
    rule, row = PEOPLE_CASES[case]
    violations = check([], [row], MANUAL_PLAN, policy=POLICY).violations
    assert any(v.startswith(f"[{rule}]") for v in violations), violations


# -- failovers: what a lost primary may take with it ------------------------------------------

COMPLETED_ROW = {
    **clean_row(),
    "closed_by": "completion",
    "source": None,
    "outcome": None,
    "finding": None,
    "res_digest": None,
    "res_mutation_id": None,
    "resolutions": 0,
    "completion_mutation_id": f"done-{D}",
}
LIVE = {D: Plan(PLAN.spec, Kind.LIVE_REPLAY, PLAN.script, executor_outcome=Outcome.SUCCEEDED)}
LATE_COMPLETION = ev(
    70,
    "executors",
    "ok",
    "complete",
    dispatch_id=D,
    version=2,
    outcome="succeeded",
    result="committed",
)


def test_a_resolution_lost_with_an_asynchronous_primary_is_counted_not_doubled() -> None:
    # The old primary acknowledged the resolution (t=41), died at t=50 before its standby
    # had it; on the promoted standby the executor's late completion won instead.
    events = [*clean_history(), LATE_COMPLETION]
    verdict = check(events, [COMPLETED_ROW], LIVE, [LossPoint(50, acknowledged=True)])
    assert verdict.violations == []
    assert verdict.lost == {"resolution": 1}


def test_a_resolution_sent_before_the_kill_may_be_lost_though_its_reply_came_after() -> None:
    # The commit was sent at t=40, the old primary committed it and died at t=40 before its
    # standby had it, and r1 recorded the reply at t=41: lost with the primary, not a loss of
    # something acknowledged after the failover.
    events = [*clean_history(), LATE_COMPLETION]
    verdict = check(events, [COMPLETED_ROW], LIVE, [LossPoint(40, acknowledged=True)])
    assert verdict.violations == []
    assert verdict.lost == {"resolution": 1}


def test_an_executor_write_sent_before_the_kill_may_be_lost_though_its_reply_came_after() -> None:
    # The executor sent its completion at t=44, the old primary committed it and died at t=45
    # before its standby had it, and the executor recorded the reply at t=47: lost with the
    # primary (the resolution the standby holds stands), not an acknowledged write gone.
    sent = ev(44, "executors", "invoke", "complete", dispatch_id=D, version=2)
    completion = {**LATE_COMPLETION, "t": 47}
    events = [*clean_history(), sent, completion]
    verdict = check(events, [clean_row()], LIVE, [LossPoint(45, acknowledged=True)])
    assert verdict.violations == []
    assert verdict.lost == {"completion": 1}
    after = check(events, [clean_row()], LIVE, [LossPoint(43, acknowledged=True)])
    assert any(v.startswith("[acknowledged_survives]") for v in after.violations)


def test_synchronous_replication_may_lose_no_acknowledged_write() -> None:
    events = [*clean_history(), LATE_COMPLETION]
    verdict = check(events, [COMPLETED_ROW], LIVE, [LossPoint(50, acknowledged=False)])
    rules = {v.split("]")[0] + "]" for v in verdict.violations}
    assert rules == {"[acknowledged_survives]", "[one_terminal_transition]"}, verdict.violations


def test_a_write_acknowledged_after_the_failover_must_survive() -> None:
    events = [*clean_history(), LATE_COMPLETION]
    verdict = check(events, [COMPLETED_ROW], LIVE, [LossPoint(30, acknowledged=True)])
    assert any(v.startswith("[acknowledged_survives]") for v in verdict.violations)


def test_a_claim_lost_at_a_failover_revoked_nothing() -> None:
    # r2's claim (asynchronously committed) was acknowledged at t=26 and lost at t=28; r1's
    # lease was still the database's at its commit (t=40).
    events = sorted([*clean_history(), *claim(25, "r2", "tok-b", 2)], key=lambda e: e["t"])
    lossless = check(events, [clean_row()], {D: PLAN}).violations
    assert any(v.startswith("[stale_write]") for v in lossless)
    verdict = check(events, [clean_row()], {D: PLAN}, [LossPoint(28, acknowledged=False)])
    assert verdict.violations == []


def test_the_same_resolution_made_again_after_a_lossy_failover_is_one_resolution() -> None:
    # r1's resolution (t=41) was lost at t=45; on the promoted standby the dispatch was
    # claimed again under the same recovery version and resolved on the same evidence.
    events = [*clean_history(), *claim(50, "r2", "tok-c", 1), *commit(60, "r2", "tok-c", 1)]
    row = {**clean_row(), "res_mutation_id": "auto-tok-c"}
    verdict = check(events, [row], {D: PLAN}, [LossPoint(45, acknowledged=True)])
    assert verdict.violations == []
    assert verdict.lost == {"resolution": 1}
    strict = check(events, [row], {D: PLAN}, [LossPoint(45, acknowledged=False)])
    assert any(v.startswith("[acknowledged_survives]") for v in strict.violations)


def test_a_case_whose_evidence_stayed_missing_must_escalate_or_be_decided() -> None:
    spec = _spec(D, "pkg.fetch")
    escalating = {D: Plan(spec, Kind.CRASHED_ESCALATED, Script((FindingKind.MISSING,)))}
    policy = HumanPolicy(escalate_after_ms={"pkg.fetch": {"missing": 60_000}})
    escalated = {**ESCALATED, "action_type": "pkg.fetch"}
    assert check([], [escalated], escalating, policy=policy).violations == []
    decided = {**TWO_PEOPLE, "action_type": "pkg.fetch", "people": 1}
    assert check([], [decided], escalating, policy=policy).violations == []
    # Planted: it reached the queue for another reason (never escalated).
    wrong = {**escalated, "manual_reason": "conflict"}
    violations = check([], [wrong], escalating, policy=policy).violations
    assert any(v.startswith("[escalation_window]") for v in violations), violations


# -- late evidence after a manual decision --------------------------------------------------

M = "w0-000002"
MANUAL_ROW = {
    **clean_row(),
    "dispatch_id": M,
    "state": "failed",
    "exec_digest": None,
    "closed_by": "manual",
    "last_finding": "missing",
    "source": "manual",
    "outcome": "failed",
    "finding": "missing",
    "res_digest": None,
    "res_mutation_id": "op-1",
}
LATE_ROW = {
    "dispatch_id": M,
    "observation_id": "late-p-0",
    "finding": "verified_succeeded",
    "agrees": False,
    "observer": "r1",
    "source": "manual",
    "decided_outcome": "failed",
    "state": "failed",
}


def late_record(t: int, process: str, observation_id: str, recorded: bool = True) -> list[Event]:
    record = {"dispatch_id": M, "observation_id": observation_id, "recorded": recorded}
    return [
        ev(t, process, "invoke", "late_record", items=[M]),
        ev(t + 1, process, "ok", "late_record", records=[{**record, "agrees": False}]),
    ]


def _late(
    events: list[Event], late_rows: list[Row], losses: list[LossPoint] | None = None
) -> list[str]:
    return check(events, [MANUAL_ROW], {}, losses or [], late_rows=late_rows).violations


def test_a_clean_late_contradiction_has_no_violation() -> None:
    events = [
        *late_record(10, "r1", "late-q-0", recorded=False),
        *late_record(20, "r1", "late-p-0"),
    ]
    assert _late(events, [LATE_ROW]) == []


LATE_CASES: dict[str, tuple[str, list[Event], list[Row]]] = {
    "two replicas record the same dispatch": (
        "one_late_fact",
        [*late_record(20, "r1", "late-p-0"), *late_record(30, "r2", "late-r-0")],
        [LATE_ROW],
    ),
    "one observation stored twice": (
        "one_late_fact",
        late_record(20, "r1", "late-p-0"),
        [LATE_ROW, {**LATE_ROW, "dispatch_id": "w0-000003"}],
    ),
    "the late look moved the terminal state": (
        "late_never_moves_terminal",
        late_record(20, "r1", "late-p-0"),
        [{**LATE_ROW, "state": "succeeded"}],
    ),
    "a contradiction recorded as agreeing": (
        "late_agrees",
        late_record(20, "r1", "late-p-0"),
        [{**LATE_ROW, "agrees": True}],
    ),
    "late fact beside an automatic resolution": (
        "late_after_manual",
        late_record(20, "r1", "late-p-0"),
        [{**LATE_ROW, "source": "automatic"}],
    ),
    "an acknowledged late fact is gone": (
        "acknowledged_survives",
        late_record(20, "r1", "late-p-0"),
        [],
    ),
}


@pytest.mark.parametrize("case", sorted(LATE_CASES))
def test_each_injected_late_evidence_violation_is_caught(case: str) -> None:
    rule, events, late_rows = LATE_CASES[case]
    violations = _late(copy.deepcopy(events), late_rows)
    assert any(v.startswith(f"[{rule}]") for v in violations), violations


def test_a_late_fact_acknowledged_before_a_lossy_failover_may_be_gone() -> None:
    events = late_record(20, "r1", "late-p-0")
    assert _late(events, [], [LossPoint(50, acknowledged=True)]) == []
