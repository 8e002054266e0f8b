"""Late completion versus resolution: one winner, exact replay idempotent, drift conflicts."""

from __future__ import annotations

import threading

import pytest

from resolver.core.domain import ClaimedItem, Completion, ExecutionLease, ItemOutcome, Outcome
from resolver.core.errors import FenceConflict
from resolver.executor.client import CompletionResult, ExecutionClient
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.providers import verified
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS


def _claim(store: Storage, lease: ExecutionLease) -> ClaimedItem:
    (item,) = store.at(AFTER).claim_due_page("resolver", 16, 30_000)
    assert item.identity.dispatch_id == lease.dispatch_id
    return item


def _resolve(store: Storage, item: ClaimedItem, outcome: Outcome = Outcome.SUCCEEDED) -> bool:
    finding = verified(item.identity, outcome)
    report = store.at(AFTER + 1).commit_outcomes(
        [ItemOutcome(item, finding, 0, f"auto-{item.recovery_token}")]
    )
    return item.identity.dispatch_id in report.accepted


def _completion_matching(item: ClaimedItem, outcome: Outcome = Outcome.SUCCEEDED) -> Completion:
    finding = verified(item.identity, outcome)
    assert finding.evidence_digest is not None and finding.result_code is not None
    return Completion(outcome, finding.result_code, "exec-mutation-1", finding.evidence_digest)


def test_completion_first_then_resolver_writes_nothing(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1)
    item = _claim(store, lease)
    assert (
        world.executor.at(AFTER + 1).complete(lease, _completion_matching(item))
        is CompletionResult.COMMITTED
    )
    assert not _resolve(store, item)
    assert sql.resolutions(lease.dispatch_id) == []
    assert sql.control(lease.dispatch_id)["closed_by"] == "completion"


def test_resolution_first_then_exact_replay_is_idempotent(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1)
    item = _claim(store, lease)
    assert _resolve(store, item)
    result = world.executor.at(AFTER + 2).complete(lease, _completion_matching(item))
    assert result is CompletionResult.REPLAYED
    row = sql.execution(lease.dispatch_id)
    assert row["completion_mutation_id"] is None  # the replay changed nothing
    assert len(sql.resolutions(lease.dispatch_id)) == 1


@pytest.mark.parametrize("drift", ["outcome", "evidence", "no_evidence"])
def test_resolution_first_then_drifted_completion_conflicts(
    world: World, store: Storage, sql: SQL, drift: str
) -> None:
    (lease,) = world.crashed(1)
    item = _claim(store, lease)
    assert _resolve(store, item)
    good = _completion_matching(item)
    completion = {
        "outcome": Completion(
            Outcome.FAILED, good.result_code, good.mutation_id, good.evidence_digest
        ),
        "evidence": Completion(good.outcome, good.result_code, good.mutation_id, "b" * 64),
        "no_evidence": Completion(good.outcome, good.result_code, good.mutation_id, None),
    }[drift]
    before = sql.execution(lease.dispatch_id)
    with pytest.raises(FenceConflict, match="automatic resolution"):
        world.executor.at(AFTER + 2).complete(lease, completion)
    assert sql.execution(lease.dispatch_id) == before


def test_concurrent_completion_and_resolution_have_exactly_one_winner(
    world: World, database_url: str, sql: SQL
) -> None:
    rounds = 40
    leases = world.crashed(rounds)
    resolver_store = Storage(database_url)
    executor_store = Storage(database_url)
    resolver_store.open()
    executor_store.open()
    items = {
        i.identity.dispatch_id: i for i in resolver_store.at(AFTER).claim_due_page("r", 64, 30_000)
    }
    executor = ExecutionClient(executor_store, owner="executor-1")
    history: list[tuple[str, str, str]] = []
    try:
        for lease in leases:
            item = items[lease.dispatch_id]
            # The executor reports failure while the evidence says success: whoever wins,
            # the loser must see a conflict or a rejection, never a second terminal write.
            go = threading.Barrier(2)
            outcome: dict[str, str] = {}

            def complete(
                lease: ExecutionLease = lease,
                item: ClaimedItem = item,
                outcome: dict[str, str] = outcome,
                go: threading.Barrier = go,
            ) -> None:
                go.wait()
                try:
                    executor.at(AFTER + 1).complete(
                        lease, _completion_matching(item, Outcome.FAILED)
                    )
                    outcome["completion"] = "ok"
                except FenceConflict:
                    outcome["completion"] = "fail"

            def resolve(
                item: ClaimedItem = item,
                outcome: dict[str, str] = outcome,
                go: threading.Barrier = go,
            ) -> None:
                go.wait()
                outcome["resolution"] = "ok" if _resolve(resolver_store, item) else "fail"

            threads = [threading.Thread(target=complete), threading.Thread(target=resolve)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            history.append((lease.dispatch_id, outcome["completion"], outcome["resolution"]))
    finally:
        resolver_store.close()
        executor_store.close()
    for dispatch_id, completion, resolution in history:
        assert {completion, resolution} == {"ok", "fail"}, (dispatch_id, completion, resolution)
        row = sql.execution(dispatch_id)
        expected = "failed" if completion == "ok" else "succeeded"
        assert row["state"] == expected
        assert len(sql.resolutions(dispatch_id)) == (1 if resolution == "ok" else 0)
        assert sql.control(dispatch_id)["closed_by"] == (
            "completion" if completion == "ok" else "automatic"
        )
