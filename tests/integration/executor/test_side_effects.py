"""The Python executor SDK (resolver/executor/side_effects.py) against real PostgreSQL.

Heartbeat, cancellation on a lost lease, the receipt in the mutation's transaction, a lost
COMMIT reply (through a proxy that really loses it) and the completion at the end.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from resolver.core.domain import ExecutionLease, ExecutionState, Outcome, sha256_hex
from resolver.core.errors import LeaseLost, MutationNotCommitted
from resolver.evidence.receipts import KeyRing, encode_receipt
from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.executor.side_effects import SideEffect, SideEffectRunner
from tests.helpers import crashes
from tests.helpers.commit_proxy import CommitProxy, Fault
from tests.helpers.crashes import lease_expired
from tests.helpers.database import SQL, new_spec
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.protocol import count_calls
from tests.helpers.stores import Storage

KEYS = KeyRing({"sdk-k1": bytes.fromhex("6b" * 32)}, signing_kid="sdk-k1")
WAIT_SECONDS = 20.0
wait_until = functools.partial(crashes.wait_until, seconds=WAIT_SECONDS)


@pytest.fixture
def accounts(sql: SQL) -> None:
    sql.all("CREATE TABLE sdk_accounts (id int PRIMARY KEY, balance int NOT NULL)")
    sql.all("INSERT INTO sdk_accounts VALUES (42, 100)")


# Each test's runners, closed (with their pools of mutation connections) when it ends.
_runners: list[SideEffectRunner] = []


@pytest.fixture(autouse=True)
def _close_runners() -> Iterator[None]:
    yield
    while _runners:
        _runners.pop().close()


def runner(store: Storage, url: str, lease_seconds: float = 30.0) -> SideEffectRunner:
    made = SideEffectRunner(
        store, database_url=url, owner="sdk-worker", keys=KEYS, lease_seconds=lease_seconds
    )
    _runners.append(made)
    return made


def dispatch(store: Storage) -> str:
    spec = new_spec("db.mutation")
    ExecutionClient(store, owner="platform").create_dispatch(spec)
    return spec.dispatch_id


def charge(effect: SideEffect, conn: psycopg.Connection[object]) -> str:
    conn.execute("UPDATE sdk_accounts SET balance = balance - 10 WHERE id = 42")
    return effect.write_receipt(conn, Outcome.SUCCEEDED, "applied", receipt_id="ledger-1")


@pytest.mark.usefixtures("accounts")
def test_run_commits_mutation_and_receipt_then_completes(
    store: Storage, database_url: str, sql: SQL
) -> None:
    dispatch_id = dispatch(store)
    with runner(store, database_url).run(dispatch_id) as effect:
        assert sql.execution(dispatch_id)["state"] == "executing"
        with effect.transaction() as conn:
            digest = charge(effect, conn)
    assert effect.result is not None
    assert (effect.result.completion, effect.result.evidence_digest) == (
        CompletionResult.COMMITTED,
        digest,
    )
    execution = sql.execution(dispatch_id)
    assert (execution["state"], execution["evidence_digest"]) == ("succeeded", digest)
    assert sql.control(dispatch_id)["closed_by"] == "completion"
    assert sql.one("SELECT balance FROM sdk_accounts WHERE id = 42")["balance"] == 90
    receipt = sql.one("SELECT receipt FROM action_receipts WHERE dispatch_id = %s", dispatch_id)
    assert receipt["receipt"]["outcome"] == "succeeded"


@pytest.mark.usefixtures("accounts")
@pytest.mark.parametrize("checked_before_the_barrier", [False, True])
def test_the_receipt_is_signed_with_the_identity_the_barrier_read(
    store: Storage, database_url: str, sql: SQL, checked_before_the_barrier: bool
) -> None:
    """The start barrier's statement reads the receipt's identity (after the lease, or with
    it): the mutation's transaction writes the receipt and reads nothing first, each of its
    function calls counted."""
    dispatch_id = dispatch(store)
    checked: list[str] = []

    def check(lease: ExecutionLease) -> None:
        checked.append(lease.dispatch_id)

    hook = check if checked_before_the_barrier else None
    run = runner(store, database_url).run(dispatch_id, before_barrier=hook)
    with run as effect, effect.transaction() as conn:
        calls = count_calls(conn)
        charge(effect, conn)
        called = calls()
    assert checked == ([dispatch_id] if checked_before_the_barrier else [])
    assert called == {"resolver_receipt_write": 1}
    execution = sql.execution(dispatch_id)
    assert execution["state"] == "succeeded"
    receipt = sql.one("SELECT receipt FROM action_receipts WHERE dispatch_id = %s", dispatch_id)
    # Signed at the database clock the barrier read, plus the time that passed on this host.
    assert receipt["receipt"]["attempt"] == execution["attempt"]
    assert receipt["receipt"]["started_at_ms"] == execution["started_at_ms"]
    assert execution["started_at_ms"] <= receipt["receipt"]["finished_at_ms"]
    assert receipt["receipt"]["finished_at_ms"] <= execution["finished_at_ms"]


@pytest.mark.usefixtures("accounts")
def test_completing_in_the_transaction_the_receipt_s_write_completes_in_its_statement(
    store: Storage, database_url: str, sql: SQL
) -> None:
    """With complete=True the receipt's write and the completion are one statement: right
    after `write_receipt` the transaction has called each once, and nothing runs after the
    block but the COMMIT."""
    dispatch_id = dispatch(store)
    run = runner(store, database_url).run(dispatch_id)
    with run as effect, effect.transaction(complete=True) as conn:
        calls = count_calls(conn)
        digest = charge(effect, conn)
        called = calls()
    assert called == {"resolver_receipt_write": 1, "resolver_execution_complete": 1}
    assert effect.completed() is CompletionResult.COMMITTED
    assert effect.result is not None
    assert (effect.result.completion, effect.result.evidence_digest) == (
        CompletionResult.COMMITTED,
        digest,
    )
    execution = sql.execution(dispatch_id)
    assert (execution["state"], execution["evidence_digest"]) == ("succeeded", digest)
    assert execution["completion_mutation_id"] == f"c-{effect.lease.token}"
    assert sql.control(dispatch_id)["closed_by"] == "completion"
    assert sql.one("SELECT balance FROM sdk_accounts WHERE id = 42")["balance"] == 90


@pytest.mark.usefixtures("accounts")
def test_heartbeat_renews_the_lease_while_the_effect_runs(
    store: Storage, database_url: str, sql: SQL
) -> None:
    dispatch_id = dispatch(store)
    with runner(store, database_url, lease_seconds=0.6).run(dispatch_id) as effect:
        started = effect.lease.version
        # Three renewals of a 0.6 s lease: far past the lease the barrier granted.
        wait_until(lambda: sql.execution(dispatch_id)["version"] >= started + 3, "3 renewals")
        assert not effect.cancelled.is_set()
        with effect.transaction() as conn:
            charge(effect, conn)
    assert sql.execution(dispatch_id)["state"] == "succeeded"


@pytest.mark.usefixtures("accounts")
def test_a_lost_lease_cancels_the_effect_and_nothing_commits(
    store: Storage, database_url: str, sql: SQL
) -> None:
    dispatch_id = dispatch(store)
    thief = ExecutionClient(store, owner="sdk-worker", lease_seconds=30)

    def lose_the_lease_then_try_to_commit(effect: SideEffect) -> None:
        # Someone moves the row on under the same fence (a second process with a copy of it):
        # the heartbeat's next renewal is fenced out.
        thief.renew(effect.lease)
        assert effect.cancelled.wait(WAIT_SECONDS)
        assert effect.cancel_reason is not None and "FenceConflict" in effect.cancel_reason
        with effect.transaction() as conn:
            charge(effect, conn)

    sdk = runner(store, database_url, lease_seconds=0.6)
    with pytest.raises(LeaseLost):
        sdk.run_once(dispatch_id, lose_the_lease_then_try_to_commit)
    assert sql.execution(dispatch_id)["state"] == "executing"
    assert sql.all("SELECT 1 FROM action_receipts WHERE dispatch_id = %s", dispatch_id) == []
    assert sql.one("SELECT balance FROM sdk_accounts WHERE id = 42")["balance"] == 100


@pytest.mark.usefixtures("accounts")
def test_a_lease_that_ends_before_commit_is_refused_at_commit_as_lease_lost(
    store: Storage, database_url: str, sql: SQL
) -> None:
    """The receipt's lease is checked again at COMMIT: written under a live lease, committed
    after it ended, the transaction rolls back and the refusal arrives typed."""
    dispatch_id = dispatch(store)
    seen: list[SideEffect] = []

    def write_then_outlive_the_lease(effect: SideEffect) -> None:
        seen.append(effect)
        with effect.transaction() as conn:
            charge(effect, conn)
            expires = effect.lease.lease_expires_at_ms
            # The check reads the database clock: wait on that clock until the lease is over.
            wait_until(
                lambda: sql.one("SELECT resolver_now_ms(NULL) > %s AS over", expires)["over"],
                "the database clock to pass the lease",
            )

    with pytest.raises(LeaseLost) as refused:
        runner(store, database_url, lease_seconds=1.0).run_once(
            dispatch_id, write_then_outlive_the_lease
        )
    assert isinstance(refused.value.__cause__, psycopg.Error)
    assert refused.value.__cause__.sqlstate == "RS002"
    assert seen[0].cancelled.is_set() and seen[0].recorded() is None
    assert sql.execution(dispatch_id)["state"] == "executing"
    assert sql.all("SELECT 1 FROM action_receipts WHERE dispatch_id = %s", dispatch_id) == []
    assert sql.one("SELECT balance FROM sdk_accounts WHERE id = 42")["balance"] == 100


@pytest.mark.usefixtures("accounts")
def test_completed_in_the_mutation_s_transaction_a_late_commit_still_settles(
    store: Storage, database_url: str, sql: SQL
) -> None:
    """Completed in the mutation's transaction, a receipt written under a live lease commits
    with its terminal state even when the lease ended before the COMMIT: nothing could settle
    the execution meanwhile (the transaction holds its row from the receipt's identity read
    on), and nothing is left executing for recovery to judge. The check at COMMIT refusing a
    late receipt guards an execution a receipt would leave open (the test above)."""
    dispatch_id = dispatch(store)

    def write_then_outlive_the_lease(effect: SideEffect) -> None:
        with effect.transaction(complete=True) as conn:
            charge(effect, conn)
            expires = effect.lease.lease_expires_at_ms
            wait_until(
                lambda: sql.one("SELECT resolver_now_ms(NULL) > %s AS over", expires)["over"],
                "the database clock to pass the lease",
            )

    result = runner(store, database_url, lease_seconds=1.0).run_once(
        dispatch_id, write_then_outlive_the_lease
    )
    assert result.completion is CompletionResult.COMMITTED
    execution = sql.execution(dispatch_id)
    assert (execution["state"], execution["evidence_digest"]) == (
        "succeeded",
        result.evidence_digest,
    )
    assert one_transaction(sql, dispatch_id)
    assert sql.one("SELECT balance FROM sdk_accounts WHERE id = 42")["balance"] == 90
    assert sql.one(
        "SELECT status, closed_by FROM approved_action_recovery_controls WHERE dispatch_id = %s",
        dispatch_id,
    ) == {"status": "resolved", "closed_by": "completion"}


@pytest.fixture
def proxy(database_url: str) -> Iterator[tuple[CommitProxy, str]]:
    params = conninfo_to_dict(database_url)
    commit_proxy = CommitProxy(str(params["host"]), int(str(params["port"])))
    yield commit_proxy, make_conninfo(database_url, host="127.0.0.1", port=commit_proxy.port)
    commit_proxy.close()


def one_transaction(sql: SQL, dispatch_id: str) -> bool:
    """Whether the receipt and the execution's last change were written by one transaction."""
    row = sql.one(
        "SELECT e.xmin::text = r.xmin::text AS same FROM approved_action_executions AS e"
        " JOIN action_receipts AS r USING (dispatch_id) WHERE dispatch_id = %s",
        dispatch_id,
    )
    return bool(row["same"])


@pytest.mark.usefixtures("accounts")
@pytest.mark.parametrize("complete", [False, True], ids=["then-complete", "complete-in-it"])
def test_a_lost_commit_reply_is_settled_by_the_receipt_never_repeated(
    store: Storage, proxy: tuple[CommitProxy, str], sql: SQL, complete: bool
) -> None:
    commit_proxy, proxied_url = proxy
    dispatch_id = dispatch(store)
    runs = 0
    with runner(store, proxied_url).run(dispatch_id) as effect:
        commit_proxy.arm(Fault.LOSE_REPLY)
        with effect.transaction(complete=complete) as conn:
            runs += 1
            digest = charge(effect, conn)
    assert commit_proxy.fired.is_set()
    assert runs == 1
    assert sql.one("SELECT balance FROM sdk_accounts WHERE id = 42")["balance"] == 90
    execution = sql.execution(dispatch_id)
    assert (execution["state"], execution["evidence_digest"]) == ("succeeded", digest)
    assert effect.result is not None and effect.result.completion is CompletionResult.COMMITTED
    # Completed in the mutation's transaction, or by a call of its own after it.
    assert one_transaction(sql, dispatch_id) is complete


@pytest.mark.usefixtures("accounts")
@pytest.mark.parametrize("complete", [False, True], ids=["then-complete", "complete-in-it"])
def test_a_commit_lost_before_the_server_is_reported_not_committed(
    store: Storage, proxy: tuple[CommitProxy, str], sql: SQL, complete: bool
) -> None:
    commit_proxy, proxied_url = proxy
    dispatch_id = dispatch(store)

    def commit(effect: SideEffect) -> None:
        commit_proxy.arm(Fault.LOSE_COMMIT)
        with effect.transaction(complete=complete) as conn:
            charge(effect, conn)

    with pytest.raises(MutationNotCommitted):
        runner(store, proxied_url).run_once(dispatch_id, commit)
    assert commit_proxy.fired.is_set()
    assert sql.one("SELECT balance FROM sdk_accounts WHERE id = 42")["balance"] == 100
    assert sql.all("SELECT 1 FROM action_receipts WHERE dispatch_id = %s", dispatch_id) == []
    # Nothing completed: the execution waits for recovery (or a human), never a repeat.
    assert sql.execution(dispatch_id)["state"] == ExecutionState.EXECUTING.value


def test_an_external_effect_records_its_outcome_and_completes(
    store: Storage, database_url: str, sql: SQL
) -> None:
    dispatch_id = dispatch(store)
    digest = sha256_hex("the service's receipt")
    result = runner(store, database_url).run_once(
        dispatch_id,
        lambda effect: effect.record(Outcome.FAILED, "declined", evidence_digest=digest),
    )
    assert (result.completion, result.evidence_digest) == (CompletionResult.COMMITTED, digest)
    assert sql.execution(dispatch_id)["state"] == "failed"


def test_a_block_that_records_nothing_completes_nothing(
    store: Storage, database_url: str, sql: SQL
) -> None:
    dispatch_id = dispatch(store)
    with (
        pytest.raises(RuntimeError, match="recorded no outcome"),
        runner(store, database_url).run(dispatch_id),
    ):
        pass
    assert sql.execution(dispatch_id)["state"] == "executing"


def test_the_renewal_fraction_leaves_room_to_retry(store: Storage, database_url: str) -> None:
    with pytest.raises(ValueError, match="renew_fraction"):
        SideEffectRunner(store, database_url=database_url, owner="o", keys=KEYS, renew_fraction=0.9)


# -- crashes, settled by a real `resolver run --once` ----------------------------------------

CRASHER = Path(__file__).with_name("sdk_crash_executor.py")
RECEIPT_ENV = {
    "RESOLVER_RECEIPT_KEYS": f"sdk-k1={'6b' * 32}",
    "RESOLVER_RECEIPT_SIGNING_KID": "sdk-k1",
}


def crash_executor(database_url: str, dispatch_id: str, point: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")} | RECEIPT_ENV
    done = subprocess.run(
        [sys.executable, str(CRASHER), database_url, dispatch_id, point],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def resolver_run_once(database_url: str, tmp_path: Path) -> str:
    config = tmp_path / "providers.yaml"
    config.write_text("action_types:\n  db.mutation: {provider: internal_mutation}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")} | RECEIPT_ENV
    env |= {"RESOLVER_DATABASE_URL": database_url, "RESOLVER_CONFIG": str(config)}
    done = subprocess.run(
        [sys.executable, "-m", "resolver", "run", "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.usefixtures("accounts")
def test_a_crash_after_completing_in_the_mutation_s_transaction_leaves_nothing_to_recover(
    store: Storage, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(database_url, dispatch_id, "after-completing")
    execution = sql.execution(dispatch_id)
    assert execution["state"] == "succeeded"
    assert one_transaction(sql, dispatch_id)
    resolver_run_once(database_url, tmp_path)
    assert sql.resolutions(dispatch_id) == []
    assert sql.one("SELECT balance FROM sdk_accounts WHERE id = 42")["balance"] == 90


@pytest.mark.usefixtures("accounts")
def test_a_crash_after_the_side_effect_is_settled_succeeded_from_its_receipt(
    store: Storage, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(database_url, dispatch_id, "after")
    assert sql.execution(dispatch_id)["state"] == "executing"
    receipt = sql.one("SELECT receipt FROM action_receipts WHERE dispatch_id = %s", dispatch_id)
    wait_until(lambda: lease_expired(sql, dispatch_id), "the crashed executor's lease to end")
    resolver_run_once(database_url, tmp_path)
    execution = sql.execution(dispatch_id)
    digest = sha256_hex(encode_receipt(receipt["receipt"]))
    assert (execution["state"], execution["evidence_digest"]) == ("succeeded", digest)
    assert [r["source"] for r in sql.resolutions(dispatch_id)] == ["automatic"]
    assert sql.one("SELECT balance FROM sdk_accounts WHERE id = 42")["balance"] == 90


@pytest.mark.usefixtures("accounts")
def test_a_crash_before_the_side_effect_never_succeeds(
    store: Storage, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(database_url, dispatch_id, "before")
    wait_until(lambda: lease_expired(sql, dispatch_id), "the crashed executor's lease to end")
    resolver_run_once(database_url, tmp_path)
    assert sql.execution(dispatch_id)["state"] == "executing"
    assert sql.control(dispatch_id)["last_finding"] == "missing"
    assert sql.resolutions(dispatch_id) == []
    assert sql.one("SELECT balance FROM sdk_accounts WHERE id = 42")["balance"] == 100


def test_renewals_that_never_reach_the_database_cancel_before_the_lease_ends(
    database_url: str, sql: SQL
) -> None:
    params = conninfo_to_dict(database_url)
    proxy = FaultProxy(int(str(params["port"])))
    proxied = make_conninfo(database_url, host="127.0.0.1", port=proxy.port)
    try:
        with Storage(proxied, connect_timeout_seconds=1) as unreliable:
            dispatch_id = dispatch(unreliable)
            sdk = runner(unreliable, proxied, lease_seconds=0.6)

            def cut_off_then_try_to_commit(effect: SideEffect) -> None:
                # Every connection reset; a new one connects but nothing gets through.
                proxy.set_blackhole(True)
                proxy.reset_all()
                assert effect.cancelled.wait(WAIT_SECONDS)
                assert effect.cancel_reason is not None
                assert "no renewal reached the database" in effect.cancel_reason
                with effect.transaction() as conn:
                    charge(effect, conn)

            with pytest.raises(LeaseLost):
                sdk.run_once(dispatch_id, cut_off_then_try_to_commit)
    finally:
        proxy.close()
    assert sql.execution(dispatch_id)["state"] == "executing"
    assert sql.all("SELECT 1 FROM action_receipts WHERE dispatch_id = %s", dispatch_id) == []
