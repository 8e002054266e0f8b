"""The executor API: barrier, renew and complete, each fenced, on the database clock."""

from __future__ import annotations

import pytest

from resolver.core.domain import Completion, ExecutionState, Outcome
from resolver.core.errors import (
    ConstraintViolation,
    FenceConflict,
    InvalidDispatch,
    LeaseLost,
    NotFound,
    NotLeasable,
)
from resolver.executor.client import CompletionResult, ExecutionClient
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World, new_spec

DONE = Completion(Outcome.SUCCEEDED, "ok", "m-1", "a" * 64)


def test_start_arms_the_control_in_the_same_transaction(world: World, sql: SQL) -> None:
    lease = world.started(now_ms=T0)
    assert lease.state is ExecutionState.EXECUTING
    row = sql.execution(lease.dispatch_id)
    assert row["started_at_ms"] == T0 and row["lease_expires_at_ms"] == T0 + EXEC_LEASE_MS
    control = sql.control(lease.dispatch_id)
    assert control["status"] == "armed"
    assert control["execution_version"] == lease.version
    assert control["next_scan_at_ms"] == lease.lease_expires_at_ms


def test_start_rolls_back_whole_when_arming_fails(world: World, sql: SQL) -> None:
    spec = world.executor.create_dispatch(new_spec())
    lease = world.executor.at(T0).lease(spec.dispatch_id)
    # A foreign writer left a control behind: the barrier's insert must fail, and with it
    # the state change.
    sql.all(
        "INSERT INTO approved_action_recovery_controls (dispatch_id, status, execution_version,"
        " next_scan_at_ms, armed_at_ms) VALUES (%s, 'armed', 1, 0, 0)",
        spec.dispatch_id,
    )
    with pytest.raises(ConstraintViolation, match="pk_approved_action_recovery_controls"):
        world.executor.at(T0).start(lease)
    assert sql.execution(spec.dispatch_id)["state"] == "leased"


def test_create_dispatch_is_idempotent_only_for_the_same_identity(world: World) -> None:
    spec = new_spec()
    assert world.executor.create_dispatch(spec) == spec
    assert world.executor.create_dispatch(spec) == spec
    drifted = new_spec(dispatch_id=spec.dispatch_id, idempotency_key=spec.idempotency_key)
    with pytest.raises(InvalidDispatch, match="different identity"):
        world.executor.create_dispatch(drifted)


def test_supersedes_must_name_a_dispatch(world: World) -> None:
    with pytest.raises(InvalidDispatch, match="names no dispatch"):
        world.executor.create_dispatch(new_spec(supersedes_dispatch_id="d-nope"))
    first = world.started()
    again = world.executor.create_dispatch(new_spec(supersedes_dispatch_id=first.dispatch_id))
    assert again.supersedes_dispatch_id == first.dispatch_id


def test_expired_leased_execution_is_taken_over_with_a_new_attempt(world: World) -> None:
    spec = world.executor.create_dispatch(new_spec())
    first = world.executor.at(T0).lease(spec.dispatch_id)
    with pytest.raises(NotLeasable, match="leased by"):
        world.executor.at(T0 + 10).lease(spec.dispatch_id)
    second = world.executor.at(T0 + EXEC_LEASE_MS).lease(spec.dispatch_id)
    assert second.attempt == 2 and second.token != first.token
    with pytest.raises(LeaseLost, match="taken over"):
        world.executor.at(T0 + EXEC_LEASE_MS).start(first)


def test_start_after_lease_expiry_is_lease_lost(world: World) -> None:
    spec = world.executor.create_dispatch(new_spec())
    lease = world.executor.at(T0).lease(spec.dispatch_id)
    with pytest.raises(LeaseLost, match="expired"):
        world.executor.at(T0 + EXEC_LEASE_MS).start(lease)


def test_executing_is_never_leased_again_even_when_expired(world: World) -> None:
    lease = world.started(now_ms=T0)
    with pytest.raises(NotLeasable, match="past the start barrier"):
        world.executor.at(T0 + 10 * EXEC_LEASE_MS).lease(lease.dispatch_id)


def test_unknown_dispatch_is_not_found(world: World) -> None:
    with pytest.raises(NotFound):
        world.executor.at(T0).lease("d-missing")


def test_complete_closes_the_control_with_the_mutation_id(world: World, sql: SQL) -> None:
    lease = world.started()
    assert world.executor.at(T0 + 5).complete(lease, DONE) is CompletionResult.COMMITTED
    row = sql.execution(lease.dispatch_id)
    assert (row["state"], row["result_code"], row["completion_mutation_id"]) == (
        "succeeded",
        "ok",
        "m-1",
    )
    control = sql.control(lease.dispatch_id)
    assert (control["status"], control["closed_by"], control["completion_mutation_id"]) == (
        "resolved",
        "completion",
        "m-1",
    )
    assert sql.resolutions(lease.dispatch_id) == []  # a completion forges no resolution


def test_completion_replay_is_idempotent_and_drift_conflicts(world: World) -> None:
    lease = world.started()
    world.executor.at(T0 + 5).complete(lease, DONE)
    assert world.executor.at(T0 + 6).complete(lease, DONE) is CompletionResult.REPLAYED
    drift = Completion(Outcome.SUCCEEDED, "other_code", "m-1", "a" * 64)
    with pytest.raises(FenceConflict, match="drifts"):
        world.executor.at(T0 + 7).complete(lease, drift)


def test_late_completion_with_an_unreplaced_fence_is_accepted(world: World) -> None:
    lease = world.started(now_ms=T0)
    late = T0 + 50 * EXEC_LEASE_MS
    assert world.executor.at(late).complete(lease, DONE) is CompletionResult.COMMITTED


def test_stale_fence_cannot_complete(world: World) -> None:
    lease = world.started(now_ms=T0)
    world.executor.at(T0 + 10).renew(lease)
    with pytest.raises(FenceConflict, match="version"):
        world.executor.at(T0 + 20).complete(lease, DONE)


def test_renew_moves_the_scan_and_bumps_versions(world: World, sql: SQL) -> None:
    lease = world.started(now_ms=T0)
    before = sql.control(lease.dispatch_id)
    renewed = world.executor.at(T0 + 500).renew(lease)
    assert renewed.version == lease.version + 1
    assert renewed.lease_expires_at_ms == T0 + 500 + EXEC_LEASE_MS
    after = sql.control(lease.dispatch_id)
    assert after["execution_version"] == renewed.version
    assert after["recovery_version"] == before["recovery_version"] + 1
    assert after["next_scan_at_ms"] == renewed.lease_expires_at_ms


def test_other_owner_cannot_use_a_lease(world: World, store) -> None:  # type: ignore[no-untyped-def]
    lease = world.started()
    other = ExecutionClient(store, owner="executor-2")
    from msgspec.structs import replace

    with pytest.raises(FenceConflict):
        other.at(T0 + 1).renew(replace(lease, owner="executor-2"))
