"""Crash-window matrix (crash windows R01-R10): kill -9 at every boundary, then converge.

Resolver windows: after the claim commits, during inspect, before the commit, after the
commit. Executor windows: after the lease, after the barrier, after a renew, after the side
effect, after the completion. Each case runs real `resolver run` processes, kills one with
SIGKILL at the boundary (RESOLVER_TEST_CRASH_AT or the executor's own hook), lets a healthy
replica take over, and checks the recorded history and the final rows.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg.rows import dict_row

from resolver.core.domain import FindingKind, Outcome
from resolver.executor.client import ExecutionClient
from resolver_test_support.crash import CrashPoint
from resolver_test_support.history import FileHistory
from resolver_test_support.scripted import SCRIPT_TABLE_DDL, Script
from tests.helpers.stores import Storage

from .checker import SNAPSHOT_SQL, check, read_histories
from .executor_proc import SIDE_EFFECTS_DDL, ExecutorCrash
from .harness import replica_env, spawn_replica
from .workload import (
    MANUAL_ONLY_TYPE,
    RECEIPT_TYPE,
    Kind,
    Plan,
    _spec,
    provider_config,
    receipt_key_env,
    seed_crashed,
    write_scripts,
)

pytestmark = pytest.mark.contention

# A bound on waiting, never a pause: generous, since a loaded machine (CI beside other jobs,
# the suite's own parallel workers) may take many seconds to start a replica process.
DEADLINE_SECONDS = 90.0
# The crashed executor's lease: long enough that its own steps (lease, start, the receipt
# written under the lease) finish inside it on a loaded machine, where 50 ms did not; the
# replica started next takes about as long to start as the lease takes to lapse.
EXECUTOR_LEASE_SECONDS = 1.0
FINDINGS = {
    "internal_mutation": (Kind.CRASHED_VERIFIED, "resolved", "succeeded"),
    "verified_succeeded": (Kind.CRASHED_VERIFIED, "resolved", "succeeded"),
    "verified_failed": (Kind.CRASHED_VERIFIED, "resolved", "failed"),
    "conflict": (Kind.CRASHED_MANUAL, "manual", "executing"),
    "manual_only": (Kind.CRASHED_MANUAL, "manual", "executing"),
}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "history").mkdir()
    (tmp_path / "providers.yaml").write_text(yaml.safe_dump(provider_config()))
    return tmp_path


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute(SCRIPT_TABLE_DDL)
        conn.execute(SIDE_EFFECTS_DDL)
        yield conn


def wait_for(what: str, condition: Callable[[], bool]) -> None:
    """Polls a database condition with a bounded deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def one(conn: psycopg.Connection[dict[str, Any]], query: str, *params: Any) -> dict[str, Any]:
    row = conn.execute(query, params or None).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row


def control(conn: psycopg.Connection[dict[str, Any]], dispatch_id: str) -> dict[str, Any] | None:
    return conn.execute(
        "SELECT c.*, e.state FROM approved_action_recovery_controls c"
        " JOIN approved_action_executions e USING (dispatch_id) WHERE dispatch_id = %s",
        (dispatch_id,),
    ).fetchone()


def run_replica(url: str, workdir: Path, replica_id: str, **extra: str) -> subprocess.Popen[bytes]:
    # A short recovery lease (still above provider timeout + commit margin) keeps takeover quick.
    env = replica_env(url, replica_id, workdir, RESOLVER_RECOVERY_LEASE_SECONDS="1.6", **extra)
    with (workdir / f"{replica_id}.log").open("wb") as log:
        return spawn_replica(env, log)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=20)


def settled(conn: psycopg.Connection[dict[str, Any]], dispatch_id: str) -> Callable[[], bool]:
    def check_it() -> bool:
        row = control(conn, dispatch_id)
        return row is not None and row["status"] != "armed"

    return check_it


def verdict_for(
    workdir: Path, conn: psycopg.Connection[dict[str, Any]], plans: dict[str, Plan]
) -> list[str]:
    events = read_histories(sorted((workdir / "history").glob("*.jsonl")))
    return check(events, conn.execute(SNAPSHOT_SQL).fetchall(), plans).violations


def crashed_plan(finding: str) -> Plan:
    kind = FINDINGS[finding][0]
    if finding == "manual_only":
        return Plan(_spec("d-crash", MANUAL_ONLY_TYPE), kind, None)
    return Plan(_spec("d-crash", "pay.charge"), kind, Script((FindingKind(finding),)))


@pytest.mark.parametrize("finding", sorted(FINDINGS))
@pytest.mark.parametrize("point", list(CrashPoint))
def test_resolver_killed_at_a_boundary_converges(
    point: CrashPoint,
    finding: str,
    database_url: str,
    db: psycopg.Connection[dict[str, Any]],
    workdir: Path,
) -> None:
    if finding == "internal_mutation":
        # The executor wrote its signed receipt with the mutation, then died: the built-in
        # provider verifies the receipt.
        d = "d-crash"
        run_executor(database_url, d, ExecutorCrash.AFTER_EFFECT, EXECUTOR_LEASE_SECONDS, finding)
        plan = Plan(
            _spec(d, RECEIPT_TYPE), Kind.CRASHED_VERIFIED, None, receipt_outcome=Outcome.SUCCEEDED
        )
    else:
        plan = crashed_plan(finding)
        write_scripts(db, [plan])
        with Storage(database_url) as store:
            history = FileHistory(workdir / "history" / "seeder.jsonl", "seeder")
            seed_crashed(store, plan, history, EXECUTOR_LEASE_SECONDS)
        d = plan.spec.dispatch_id

    doomed = run_replica(database_url, workdir, "doomed", RESOLVER_TEST_CRASH_AT=point.value)
    assert doomed.wait(timeout=DEADLINE_SECONDS) == -9, "the replica did not die at its boundary"
    row = control(db, d)
    assert row is not None
    if point is CrashPoint.AFTER_COMMIT:
        assert row["status"] != "armed" and row["recovery_token"] is None
    else:
        # The dead replica's recovery lease is still held: nobody may inspect until it expires.
        assert (row["status"], row["recovery_owner"], row["state"]) == (
            "armed",
            "doomed",
            "executing",
        )

    healthy = run_replica(database_url, workdir, "healthy")
    try:
        wait_for("the healthy replica to settle the dispatch", settled(db, d))
    finally:
        stop(healthy)
    _, status, state = FINDINGS[finding]
    row = control(db, d)
    assert row is not None and (row["status"], row["state"]) == (status, state)
    assert one(db, "SELECT count(*) AS n FROM approved_action_recovery_resolutions")["n"] == (
        1 if status == "resolved" else 0
    )
    assert verdict_for(workdir, db, {d: plan}) == []


def run_executor(
    url: str, dispatch_id: str, crash_at: ExecutorCrash, lease_seconds: float, provider: str
) -> int:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.contention.executor_proc",
            url,
            dispatch_id,
            crash_at.value,
            str(lease_seconds),
            provider,
        ],
        env={**os.environ, **receipt_key_env()},
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    assert done.returncode in (0, -9), done.stderr.decode()[-2000:]
    return done.returncode


EXECUTOR_CASES = {
    # crash point: (final control status, final execution state, closed_by, side effects)
    ExecutorCrash.AFTER_LEASE: ("resolved", "succeeded", "completion", 1),
    ExecutorCrash.AFTER_START: ("armed", "executing", None, 0),
    ExecutorCrash.AFTER_RENEW: ("resolved", "succeeded", "automatic", 1),
    ExecutorCrash.AFTER_EFFECT: ("resolved", "succeeded", "automatic", 1),
    ExecutorCrash.AFTER_COMPLETE: ("resolved", "succeeded", "completion", 1),
}


@pytest.mark.parametrize("provider", ["scripted", "internal_mutation"])
@pytest.mark.parametrize("crash_at", list(EXECUTOR_CASES))
def test_executor_killed_at_a_boundary_converges(
    crash_at: ExecutorCrash,
    provider: str,
    database_url: str,
    db: psycopg.Connection[dict[str, Any]],
    workdir: Path,
) -> None:
    d = "d-exec"
    lease_seconds = 0.5
    assert run_executor(database_url, d, crash_at, lease_seconds, provider) == (
        0 if crash_at is ExecutorCrash.NONE else -9
    )
    if crash_at is ExecutorCrash.AFTER_LEASE:
        # Never crossed the barrier: recovery has nothing to do; a new attempt runs it once.
        assert control(db, d) is None
        wait_for("the dead executor's lease to lapse", lambda: _lease_lapsed(db, d))
        assert run_executor(database_url, d, ExecutorCrash.NONE, lease_seconds, provider) == 0
    replica = run_replica(database_url, workdir, "healthy")
    try:
        if crash_at in (ExecutorCrash.AFTER_RENEW, ExecutorCrash.AFTER_EFFECT):
            wait_for("recovery to settle from the receipt", settled(db, d))
        else:
            wait_for("the replica to run a few cycles", lambda: _cycles(workdir, 5))
    finally:
        stop(replica)
    status, state, closed_by, effects = EXECUTOR_CASES[crash_at]
    row = control(db, d)
    execution = one(db, "SELECT * FROM approved_action_executions WHERE dispatch_id = %s", d)
    assert execution["state"] == state
    assert row is not None and (row["status"], row["closed_by"]) == (status, closed_by)
    assert one(db, "SELECT count(*) AS n FROM side_effects")["n"] == effects  # never twice
    assert one(db, "SELECT count(*) AS n FROM approved_action_recovery_resolutions")["n"] == (
        1 if closed_by == "automatic" else 0
    )
    if crash_at is ExecutorCrash.AFTER_START:
        # No evidence either way: it stays recovery_required (missing), is never re-executed.
        assert row is not None and row["last_finding"] == "missing"
        with (
            Storage(database_url) as store,
            pytest.raises(Exception, match="recovery or a human"),
        ):
            ExecutionClient(store, owner="retry").lease(d)
    if provider == "internal_mutation":
        plan = Plan(
            _spec(d, RECEIPT_TYPE), Kind.CRASHED_VERIFIED, None, None, None, Outcome.SUCCEEDED
        )
    else:
        script = Script((FindingKind.VERIFIED_SUCCEEDED,))
        plan = Plan(_spec(d, "pay.charge"), Kind.CRASHED_VERIFIED, script)
    violations = [v for v in verdict_for(workdir, db, {d: plan}) if not v.startswith("[settles]")]
    assert violations == []


def _lease_lapsed(conn: psycopg.Connection[dict[str, Any]], dispatch_id: str) -> bool:
    row = one(
        conn,
        "SELECT lease_expires_at_ms <= resolver_now_ms(NULL) AS lapsed"
        " FROM approved_action_executions WHERE dispatch_id = %s",
        dispatch_id,
    )
    return bool(row["lapsed"])


def _cycles(workdir: Path, n: int) -> bool:
    path = workdir / "history" / "healthy.jsonl"
    return path.exists() and path.read_text().count('"type":"ok","f":"claim"') >= n
