"""Manual resolution: strong auth, permission and version fences, one atomic decision."""

from __future__ import annotations

import pytest

from resolver.core.domain import (
    CaseList,
    Completion,
    Decision,
    FindingKind,
    Grant,
    ManualDecision,
    ManualResult,
    Outcome,
    Principal,
)
from resolver.core.errors import FenceConflict, NotFound, PermissionDenied, StrongAuthRequired
from resolver.executor.client import CompletionResult
from resolver.human.manual import ManualResolutionService
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.providers import ScriptedProvider, fixed, reconciler, verified
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

NOW = T0 + EXEC_LEASE_MS + 60_000
ALICE = Principal(
    "alice", auth_time_ms=NOW - 60_000, amr=("pwd", "mfa"), issuer=TEST_ISSUER, token_kid="test-kid"
)


@pytest.fixture
def policy(sql: SQL) -> SQL:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1), ('proj-2', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    return sql


def _decision(
    lease_version: int,
    dispatch_id: str,
    decision: Decision = Decision.CONFIRM_SUCCEEDED,
    mutation_id: str = "op-1",
    reason: str = "checked_vendor_console",
) -> ManualDecision:
    return ManualDecision(dispatch_id, decision, mutation_id, lease_version, reason, "c" * 64)


def _unchanged(sql: SQL, dispatch_id: str) -> tuple[object, ...]:
    return (
        sql.execution(dispatch_id),
        sql.control(dispatch_id),
        sql.resolutions(dispatch_id),
        sql.all("SELECT * FROM recovery_authorizations"),
    )


def test_confirm_commits_authorization_resolution_and_terminal_state(
    world: World, store: Storage, policy: SQL
) -> None:
    (lease,) = world.crashed(1)
    service = ManualResolutionService(store, signer=TEST_SIGNER)
    result = service.at(NOW).decide(ALICE, _decision(lease.version, lease.dispatch_id))
    assert result is ManualResult.COMMITTED
    assert policy.execution(lease.dispatch_id)["state"] == "succeeded"
    (res,) = policy.resolutions(lease.dispatch_id)
    assert (
        res["source"],
        res["actor_user_id"],
        res["reason_code"],
        res["expected_execution_version"],
    ) == ("manual", "alice", "checked_vendor_console", lease.version)
    auth = policy.one("SELECT * FROM recovery_authorizations WHERE mutation_id = 'op-1'")
    assert (
        auth["user_id"],
        auth["permission"],
        auth["project_version"],
        auth["role_binding_version"],
        auth["amr"],
        auth["auth_time_ms"],
    ) == ("alice", "approval.recover", 1, 1, ["pwd", "mfa"], ALICE.auth_time_ms)
    control = policy.control(lease.dispatch_id)
    assert (control["status"], control["closed_by"]) == ("resolved", "manual")


def test_abandon_unknown_blocks(world: World, store: Storage, policy: SQL) -> None:
    (lease,) = world.crashed(1)
    ManualResolutionService(store, signer=TEST_SIGNER).at(NOW).decide(
        ALICE, _decision(lease.version, lease.dispatch_id, Decision.ABANDON_UNKNOWN)
    )
    assert policy.execution(lease.dispatch_id)["state"] == "blocked"


def test_the_only_decisions_are_the_three_terminal_ones() -> None:
    assert {d.value for d in Decision} == {"confirm_succeeded", "confirm_failed", "abandon_unknown"}
    assert not any(
        hasattr(ManualResolutionService, name)
        for name in ("retry", "reset", "reset_to_pending", "clear_start_barrier")
    )


def test_exact_replay_is_idempotent_and_reuse_with_other_fields_conflicts(
    world: World, store: Storage, policy: SQL
) -> None:
    (lease,) = world.crashed(1)
    service = ManualResolutionService(store, signer=TEST_SIGNER)
    decision = _decision(lease.version, lease.dispatch_id)
    service.at(NOW).decide(ALICE, decision)
    assert service.at(NOW + 1).decide(ALICE, decision) is ManualResult.REPLAYED
    with pytest.raises(FenceConflict):
        service.at(NOW + 2).decide(
            ALICE, _decision(lease.version, lease.dispatch_id, reason="other")
        )
    (other,) = world.crashed(1)
    with pytest.raises(FenceConflict, match="mutation id 'op-1' was already used"):
        service.at(NOW + 3).decide(ALICE, _decision(other.version, other.dispatch_id))
    assert policy.execution(other.dispatch_id)["state"] == "executing"


@pytest.mark.parametrize(
    ("principal", "error"),
    [
        (
            Principal("alice", NOW - 1_000, ("pwd",), issuer=TEST_ISSUER, token_kid="test-kid"),
            "strong authentication",
        ),
        (
            Principal(
                "alice", NOW - 5 * 60_000 - 1, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
            ),
            "older than 5 minutes",
        ),
        (
            Principal(
                "alice", NOW + 10 * 60_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
            ),
            "older than 5 minutes",
        ),
    ],
)
def test_weak_or_stale_authentication_is_refused(
    world: World, store: Storage, policy: SQL, principal: Principal, error: str
) -> None:
    (lease,) = world.crashed(1)
    before = _unchanged(policy, lease.dispatch_id)
    with pytest.raises(StrongAuthRequired, match=error):
        ManualResolutionService(store, signer=TEST_SIGNER).at(NOW).decide(
            principal, _decision(lease.version, lease.dispatch_id)
        )
    assert _unchanged(policy, lease.dispatch_id) == before


def test_user_without_the_permission_is_answered_as_for_an_unknown_dispatch(
    world: World, store: Storage, policy: SQL
) -> None:
    (lease,) = world.crashed(1)
    mallory = Principal("mallory", NOW - 1_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid")
    with pytest.raises(NotFound, match="no such dispatch") as forbidden:
        ManualResolutionService(store, signer=TEST_SIGNER).at(NOW).decide(
            mallory, _decision(lease.version, lease.dispatch_id)
        )
    with pytest.raises(NotFound) as unknown:
        ManualResolutionService(store, signer=TEST_SIGNER).at(NOW).decide(
            mallory, _decision(lease.version, "no-such-dispatch")
        )
    assert str(forbidden.value) == str(unknown.value)
    assert policy.execution(lease.dispatch_id)["state"] == "executing"


class _RevokingStore:
    """The real store, with the platform changing the binding between read and commit."""

    def __init__(self, store: Storage, sql: SQL) -> None:
        self._store, self._sql = store, sql

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def at(self, now_ms: int) -> _RevokingStore:
        return _RevokingStore(self._store.at(now_ms), self._sql)

    def find_grant(self, project_id: str, user_id: str) -> Grant | None:
        grant = self._store.find_grant(project_id, user_id)
        self._sql.all("UPDATE recovery_role_bindings SET version = version + 1")
        return grant


def test_role_binding_changed_before_commit_is_denied(
    world: World, store: Storage, policy: SQL
) -> None:
    (lease,) = world.crashed(1)
    before = _unchanged(policy, lease.dispatch_id)
    service = ManualResolutionService(_RevokingStore(store, policy), signer=TEST_SIGNER)  # type: ignore[arg-type]
    with pytest.raises(PermissionDenied, match="changed"):
        service.at(NOW).decide(ALICE, _decision(lease.version, lease.dispatch_id))
    assert _unchanged(policy, lease.dispatch_id) == before


def test_wrong_expected_version_conflicts(world: World, store: Storage, policy: SQL) -> None:
    (lease,) = world.crashed(1)
    with pytest.raises(FenceConflict, match="reload and decide again"):
        ManualResolutionService(store, signer=TEST_SIGNER).at(NOW).decide(
            ALICE, _decision(lease.version - 1, lease.dispatch_id)
        )


def test_live_execution_cannot_be_decided(world: World, store: Storage, policy: SQL) -> None:
    lease = world.started(now_ms=NOW)
    with pytest.raises(FenceConflict, match="live execution lease"):
        ManualResolutionService(store, signer=TEST_SIGNER).at(NOW + 1).decide(
            ALICE, _decision(lease.version, lease.dispatch_id)
        )


def test_unknown_dispatch_is_not_found(store: Storage, policy: SQL) -> None:
    with pytest.raises(NotFound):
        ManualResolutionService(store, signer=TEST_SIGNER).at(NOW).decide(
            ALICE, _decision(2, "d-nope")
        )


def test_automatic_resolution_first_makes_the_decision_conflict(
    world: World, store: Storage, policy: SQL
) -> None:
    (lease,) = world.crashed(1)
    reconciler(store, ScriptedProvider(verified)).at(T0 + EXEC_LEASE_MS).run_cycle()
    with pytest.raises(FenceConflict, match="already succeeded"):
        ManualResolutionService(store, signer=TEST_SIGNER).at(NOW).decide(
            ALICE, _decision(lease.version, lease.dispatch_id)
        )
    assert len(policy.resolutions(lease.dispatch_id)) == 1


def test_decision_revokes_a_recovery_lease_in_flight(
    world: World, store: Storage, policy: SQL
) -> None:
    (lease,) = world.crashed(1)
    (item,) = store.at(NOW - 1).claim_due_page("r", 16, 120_000)
    ManualResolutionService(store, signer=TEST_SIGNER).at(NOW).decide(
        ALICE, _decision(lease.version, lease.dispatch_id)
    )
    from resolver.core.domain import ItemOutcome

    report = store.at(NOW + 1).commit_outcomes(
        [ItemOutcome(item, verified(item.identity), 0, "auto-late")]
    )
    assert report.rejected == {lease.dispatch_id}
    assert [r["source"] for r in policy.resolutions(lease.dispatch_id)] == ["manual"]


def test_late_completion_after_a_manual_decision(world: World, store: Storage, policy: SQL) -> None:
    (lease,) = world.crashed(1)
    ManualResolutionService(store, signer=TEST_SIGNER).at(NOW).decide(
        ALICE, _decision(lease.version, lease.dispatch_id)
    )
    same = Completion(Outcome.SUCCEEDED, "ok", "exec-m", "c" * 64)
    assert world.executor.at(NOW + 1).complete(lease, same) is CompletionResult.REPLAYED
    with pytest.raises(FenceConflict, match="manual resolution"):
        world.executor.at(NOW + 2).complete(
            lease, Completion(Outcome.FAILED, "ok", "exec-m", "c" * 64)
        )


def test_queue_lists_manual_items_of_permitted_projects_with_keyset_paging(
    world: World, store: Storage, policy: SQL
) -> None:
    leases = world.crashed(3)
    reconciler(store, ScriptedProvider(fixed(FindingKind.CONFLICT))).at(
        T0 + EXEC_LEASE_MS
    ).run_cycle()
    first = store.list_cases("alice", CaseList.MANUAL, 2)
    assert [i.dispatch_id for i in first] == sorted(x.dispatch_id for x in leases)[:2]
    rest = store.list_cases(
        "alice", CaseList.MANUAL, 2, after=(first[-1].since_ms, first[-1].dispatch_id)
    )
    assert [i.dispatch_id for i in rest] == sorted(x.dispatch_id for x in leases)[2:]
    assert store.list_cases("mallory", CaseList.MANUAL, 10) == []
    assert {i.last_finding for i in first} == {"conflict"}
