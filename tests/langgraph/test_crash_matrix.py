"""The crash matrix: the example LangGraph agent, SIGKILLed at each of the seven windows of an
approved tool call, for each of its four write tools, then restarted from its PostgreSQL
checkpoint.

In every case the restarted graph ends with the true outcome (the tool result is the state the
resolver holds, and the order service's state agrees with it), the order service saw each
effect at most once (its own request log, replays included), and nothing ran twice. A crash
before the receipt committed leaves no evidence: the replica finds none, a person decides that
nothing happened, and the waiting graph learns it from the outcome feed. Beside the matrix: an
approval that expired before the barrier never runs, and a blocked call runs again only under
a new approval, as a dispatch that supersedes the blocked one.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from resolver.core.domain import Decision
from resolver.integrations.langgraph import dispatch_ids
from tests.helpers.database import SQL
from tests.helpers.outcomes import feed_of
from tests.helpers.stores import Storage
from tests.langgraph.harness import (
    APPLIED,
    INITIAL,
    NOTHING_HAPPENED,
    WINDOWS,
    agent,
    approval,
    db_now_ms,
    decide,
    downstream,
    prepare_downstream,
    replica,
    requests_seen,
    wait_until,
)

TOOLS = sorted(APPLIED)


@pytest.fixture
def erp(database_url: str) -> str:
    prepare_downstream(database_url)
    return database_url


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("window", sorted(WINDOWS))
def test_a_crash_in_each_window_ends_with_the_true_outcome_and_each_effect_at_most_once(
    erp: str, store: Storage, sql: SQL, tmp_path: Path, window: str, tool: str
) -> None:
    step = WINDOWS[window]
    thread = f"t-{window}"
    dispatch_id, key = dispatch_ids(thread, "call-1", 1)
    with replica(erp, tmp_path):
        _, asked = agent(erp, thread, tool, "start", {})
        assert asked is not None and asked["interrupt"]["dispatch_id"] == dispatch_id
        code, _ = agent(
            erp, thread, tool, "resume", {"approval": approval(sql, "ar-1"), "crash": step}
        )
        assert code != 0, "the agent was to be killed"
        with ThreadPoolExecutor(1) as pool:
            restarted = pool.submit(agent, erp, thread, tool, "restart", {})
            if step in NOTHING_HAPPENED:
                decide(store, sql, dispatch_id, Decision.CONFIRM_FAILED)
            _, final = restarted.result(timeout=240)
    assert final is not None
    (result,) = final["tools"]
    execution = sql.execution(dispatch_id)
    assert (
        result["state"]
        == execution["state"]
        == ("failed" if step in NOTHING_HAPPENED else "succeeded")
    )
    assert final["reply"].startswith("Done.")
    seen = requests_seen(sql)
    assert all(n == 1 for n in seen.values()), seen
    if step in NOTHING_HAPPENED:
        assert (seen, downstream(sql)) == ({}, INITIAL)
        assert result["settled_by"] == "person"
    else:
        assert (seen, downstream(sql)) == ({key: 1}, APPLIED[tool])
    settled = [r.state.value for r in feed_of(erp) if r.dispatch_id == dispatch_id]
    assert settled == [execution["state"]]


def test_an_approval_that_expired_before_the_barrier_never_runs(
    erp: str, sql: SQL, tmp_path: Path
) -> None:
    thread = "t-expired"
    dispatch_id, _ = dispatch_ids(thread, "call-1", 1)
    with replica(erp, tmp_path):
        agent(erp, thread, "create_order", "start", {})
        short = approval(sql, "ar-short", seconds=5.0)
        code, _ = agent(
            erp, thread, "create_order", "resume", {"approval": short, "crash": "leased"}
        )
        assert code != 0
        # The restarted process must find the approval expired, whatever its start-up takes.
        wait_until(lambda: db_now_ms(sql) > short["expires_at_ms"], "the approval to expire")
        _, final = agent(erp, thread, "create_order", "restart", {})
    assert final is not None
    assert final["tools"][0]["state"] == "approval_expired"
    execution = sql.execution(dispatch_id)
    assert (execution["state"], execution["started_at_ms"]) == ("leased", None)
    assert (requests_seen(sql), downstream(sql)) == ({}, INITIAL)


def test_a_blocked_call_runs_again_only_under_a_new_approval_as_a_superseding_dispatch(
    erp: str, store: Storage, sql: SQL, tmp_path: Path
) -> None:
    thread = "t-blocked"
    first, _ = dispatch_ids(thread, "call-1", 1)
    second, second_key = dispatch_ids(thread, "call-1", 2)
    with replica(erp, tmp_path):
        agent(erp, thread, "adjust_stock", "start", {})
        agent(
            erp,
            thread,
            "adjust_stock",
            "resume",
            {"approval": approval(sql, "ar-1"), "crash": "barrier_crossed"},
        )
        with ThreadPoolExecutor(1) as pool:
            restarted = pool.submit(agent, erp, thread, "adjust_stock", "restart", {})
            decide(store, sql, first, Decision.ABANDON_UNKNOWN)
            _, asked = restarted.result(timeout=240)
        assert asked is not None
        assert asked["interrupt"]["blocked_dispatch_id"] == first
        assert asked["interrupt"]["dispatch_id"] == second
        assert requests_seen(sql) == {}
        _, final = agent(erp, thread, "adjust_stock", "resume", {"approval": approval(sql, "ar-2")})
    assert final is not None
    assert final["tools"][0] == final["tools"][0] | {"dispatch_id": second, "state": "succeeded"}
    assert sql.one(
        "SELECT supersedes_dispatch_id FROM approved_action_dispatches WHERE dispatch_id = %s",
        second,
    ) == {"supersedes_dispatch_id": first}
    kinds = [(r.kind.value, r.dispatch_id, r.state.value) for r in feed_of(erp)]
    assert kinds == [
        ("settled", first, "blocked"),
        ("superseded", first, "blocked"),
        ("settled", second, "succeeded"),
    ]
    assert (requests_seen(sql), downstream(sql)) == ({second_key: 1}, APPLIED["adjust_stock"])
