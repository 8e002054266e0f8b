"""A hostile but running database: locks held elsewhere and timeouts that fire mid-commit.

Each test holds a real lock in a second session or makes a real statement run past its
timeout (a trigger that sleeps), and checks the typed answer, that nothing was half-written,
and that the same call succeeds once the database behaves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from psycopg import sql as pgsql

from resolver.app.composition import readiness_check
from resolver.core.domain import (
    CommitReport,
    Completion,
    Decision,
    Finding,
    ItemOutcome,
    ManualDecision,
    Outcome,
    Principal,
    sha256_hex,
)
from resolver.core.errors import LockTimeout, StatementTimeout, StorageUnavailable
from resolver.db import migrate
from resolver.demo import localpg
from resolver.executor.client import ExecutionClient
from resolver.human.api import create_app
from resolver.human.auth import TokenVerifier
from resolver.human.manual import ManualResolutionService
from tests.helpers.api import auth
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

LOCK_TIMEOUT_MS = 300
SKIP_LOCK_TIMEOUT_MS = 20_000
STATEMENT_TIMEOUT_MS = 1_000
NOW = T0 + 10 * EXEC_LEASE_MS  # every execution of these tests is recovery_required by then
REC_LEASE_MS = 30_000
EXECUTIONS, CONTROLS = "approved_action_executions", "approved_action_recovery_controls"


@pytest.fixture
def impatient(database_url: str) -> Iterator[Storage]:
    """A store with short lock and statement timeouts (settings, not test hooks)."""
    with Storage(
        database_url, lock_timeout_ms=LOCK_TIMEOUT_MS, statement_timeout_ms=STATEMENT_TIMEOUT_MS
    ) as store:
        yield store


@pytest.fixture
def granted(sql: SQL) -> None:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")


@contextmanager
def operator_holds(database_url: str, *locks: tuple[str, str]) -> Iterator[None]:
    """A psql session with an open transaction that locked rows (and went to lunch): each
    lock is a table and the dispatch id of the row locked FOR UPDATE."""
    with psycopg.connect(database_url) as conn:
        for table, dispatch_id in locks:
            query = pgsql.SQL("SELECT 1 FROM {} WHERE dispatch_id = %s FOR UPDATE")
            conn.execute(query.format(pgsql.Identifier(table)), (dispatch_id,))
        yield
        conn.rollback()


@contextmanager
def sleeping_trigger(database_url: str, table: str, seconds: float) -> Iterator[None]:
    """Every insert into `table` takes `seconds`: a statement timeout fires mid-commit."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION test_slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$"
            f" BEGIN PERFORM pg_sleep({seconds}); RETURN NEW; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER test_slow BEFORE INSERT ON {table}"  # a fixed table name
            " FOR EACH ROW EXECUTE FUNCTION test_slow_insert()"
        )
        try:
            yield
        finally:
            conn.execute(f"DROP TRIGGER test_slow ON {table}")
            conn.execute("DROP FUNCTION test_slow_insert()")


def decision(dispatch_id: str, version: int) -> ManualDecision:
    return ManualDecision(
        dispatch_id, Decision.CONFIRM_FAILED, f"op-{dispatch_id}", version, "operator_checked"
    )


ALICE = Principal("alice", NOW, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid")


@pytest.mark.usefixtures("granted")
def test_a_locked_execution_fails_the_manual_decision_fast_and_typed(
    world: World, impatient: Storage, database_url: str, sql: SQL
) -> None:
    lease = world.started()
    service = ManualResolutionService(impatient, signer=TEST_SIGNER)
    with operator_holds(database_url, (EXECUTIONS, lease.dispatch_id)):
        started = time.monotonic()
        with pytest.raises(LockTimeout):
            service.at(NOW).decide(ALICE, decision(lease.dispatch_id, lease.version))
        waited = time.monotonic() - started
    assert waited < STATEMENT_TIMEOUT_MS / 1000, f"waited {waited:.2f}s for the lock"
    assert sql.resolutions(lease.dispatch_id) == []
    assert sql.execution(lease.dispatch_id)["state"] == "executing"
    # The operator's transaction ended: the same decision now commits.
    service.at(NOW).decide(ALICE, decision(lease.dispatch_id, lease.version))
    assert sql.execution(lease.dispatch_id)["state"] == "failed"


def test_a_locked_execution_fails_the_executor_fast_and_typed(
    world: World, impatient: Storage, database_url: str, sql: SQL
) -> None:
    lease = world.started(now_ms=T0)
    executor = ExecutionClient(impatient, owner="executor-1", lease_seconds=1)
    done = Completion(Outcome.SUCCEEDED, "ok", "done-1", sha256_hex("receipt"))
    with operator_holds(database_url, (EXECUTIONS, lease.dispatch_id)):
        for call in (
            lambda: executor.at(T0 + 1).renew(lease),
            lambda: executor.at(T0 + 1).complete(lease, done),
        ):
            started = time.monotonic()
            with pytest.raises(LockTimeout):
                call()
            assert time.monotonic() - started < STATEMENT_TIMEOUT_MS / 1000
    assert (
        sql.execution(lease.dispatch_id)["version"],
        sql.control(lease.dispatch_id)["status"],
    ) == (
        lease.version,
        "armed",
    )
    executor.at(T0 + 1).complete(lease, done)
    assert sql.execution(lease.dispatch_id)["state"] == "succeeded"


def test_a_statement_timeout_inside_the_page_commit_rolls_the_whole_page_back(
    world: World, impatient: Storage, database_url: str, sql: SQL
) -> None:
    leases = world.crashed(2)
    items = impatient.at(NOW).claim_due_page("replica-a", 16, REC_LEASE_MS)
    outcomes = [
        ItemOutcome(
            item,
            Finding.verified(Outcome.SUCCEEDED, sha256_hex(item.identity.dispatch_id), "ok"),
            1_000,
            f"auto-{item.recovery_token}",
        )
        for item in items
    ]
    with (
        sleeping_trigger(database_url, "approved_action_recovery_resolutions", 2.0),
        pytest.raises(StatementTimeout),
    ):
        impatient.at(NOW).commit_outcomes(outcomes)
    for lease in leases:
        assert sql.execution(lease.dispatch_id)["state"] == "executing"
        assert sql.control(lease.dispatch_id)["status"] == "armed"
        assert sql.resolutions(lease.dispatch_id) == []
    # The recovery leases still hold: the same page commits once statements are fast again.
    report = impatient.at(NOW).commit_outcomes(outcomes)
    assert report.accepted == {lease.dispatch_id for lease in leases}


@pytest.mark.usefixtures("granted")
def test_a_statement_timeout_inside_the_manual_commit_writes_nothing(
    world: World, impatient: Storage, database_url: str, sql: SQL
) -> None:
    lease = world.started()
    service = ManualResolutionService(impatient, signer=TEST_SIGNER)
    request = decision(lease.dispatch_id, lease.version)
    with (
        sleeping_trigger(database_url, "recovery_authorizations", 2.0),
        pytest.raises(StatementTimeout),
    ):
        service.at(NOW).decide(ALICE, request)
    assert sql.resolutions(lease.dispatch_id) == []
    assert sql.all("SELECT * FROM recovery_authorizations") == []
    assert sql.execution(lease.dispatch_id)["state"] == "executing"
    # Retrying the same decision (same mutation id) is safe and now commits.
    service.at(NOW).decide(ALICE, request)
    assert sql.execution(lease.dispatch_id)["state"] == "failed"


# -- every connection slot taken by other clients ----------------------------------------------


@pytest.fixture
def crowded_server() -> Iterator[localpg.Cluster]:
    """A private cluster (it is filled to its last slot): no slot reserved for superusers,
    since the suite's clients are all the `postgres` superuser."""
    cluster = localpg.start(durable=False)
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET superuser_reserved_connections = 0")
    data, log = str(cluster.data_dir), str(cluster.data_dir / "server.log")
    # -l: the restarted server must not inherit (and hold open) our output pipe.
    localpg.run_tool(cluster, ["pg_ctl", "-D", data, "-l", log, "-w", "-m", "fast", "restart"])
    migrate.upgrade(cluster.url)
    try:
        yield cluster
    finally:
        cluster.stop()


@contextmanager
def every_slot_taken(url: str, victims: str) -> Iterator[None]:
    """Other clients take every free slot, then end the `victims` sessions (application_name
    LIKE), whose slots they take too: the victims must connect again, and cannot."""
    held: list[psycopg.Connection[object]] = []
    try:
        while True:
            try:
                held.append(psycopg.connect(url, autocommit=True, application_name="crowd"))
            except psycopg.OperationalError:
                break  # FATAL: sorry, too many clients already
        held[0].execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE %s",
            (victims,),
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the terminated sessions' slots, as they free up
            try:
                held.append(psycopg.connect(url, autocommit=True, application_name="crowd"))
            except psycopg.OperationalError:
                time.sleep(0.05)
                if held[0].execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
                    (victims,),
                ).fetchone() == (0,):
                    break
        yield
    finally:
        for conn in held:
            conn.close()


def test_exhausted_connections_make_the_api_answer_503_problems_and_not_ready(
    crowded_server: localpg.Cluster, jwks_file: Path, signing_key: rsa.RSAPrivateKey
) -> None:
    url = crowded_server.url
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    with Storage(url, connect_timeout_seconds=1, application_name="resolver:api") as store:
        app = create_app(
            store, verifier, readiness=readiness_check(store, url, 1), signer=TEST_SIGNER
        )
        with Server(app) as client:
            assert client.get("/readyz").status_code == 200
            with every_slot_taken(url, "resolver%"):
                # Readiness is cached for 2 s (ReadinessCheck's ttl): the answer given just
                # before the slots were taken may still stand; a fresh one must be 503.
                deadline = time.monotonic() + 10
                while (ready := client.get("/readyz")).status_code == 200:
                    assert time.monotonic() < deadline, "the API stayed ready without a slot"
                    time.sleep(0.2)
                queue = client.get("/v1/manual-queue", headers=auth(token(signing_key)))
                with pytest.raises(StorageUnavailable):
                    store.claim_due_page("replica-a", 16, REC_LEASE_MS)
            assert (ready.status_code, ready.json()) == (503, {"status": "not_ready"})
            assert queue.status_code == 503
            assert queue.headers["content-type"] == "application/problem+json"
            assert queue.json()["code"] == "unavailable"
            assert "Traceback" not in queue.text and "too many" not in queue.text
            # The slots are free again: the same process recovers without a restart (the pool
            # reconnects with its own backoff: a bounded wait for that condition).
            deadline = time.monotonic() + 15
            while client.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "the API never became ready again"
                time.sleep(0.2)
            again = client.get("/v1/manual-queue", headers=auth(token(signing_key)))
            assert again.status_code == 200


def test_the_claim_and_the_page_commit_skip_rows_an_operator_holds(
    world: World, impatient: Storage, database_url: str, sql: SQL
) -> None:
    held_control, held_execution, free = (lease.dispatch_id for lease in world.crashed(3))
    with (
        # A lock timeout far above any time the two calls could take on a loaded machine: had
        # either waited for a held row, it would have waited that long.
        Storage(database_url, lock_timeout_ms=SKIP_LOCK_TIMEOUT_MS) as patient,
        operator_holds(database_url, (CONTROLS, held_control), (EXECUTIONS, held_execution)),
    ):
        started = time.monotonic()
        items = patient.at(NOW).claim_due_page("replica-a", 16, REC_LEASE_MS)
        assert {i.identity.dispatch_id for i in items} == {held_execution, free}
        outcomes = [
            ItemOutcome(
                item,
                Finding.verified(Outcome.SUCCEEDED, sha256_hex(item.identity.dispatch_id), "ok"),
                1_000,
                f"auto-{item.recovery_token}",
            )
            for item in items
        ]
        report = patient.at(NOW).commit_outcomes(outcomes)
        waited = time.monotonic() - started
    # Neither call waited for the held rows: the free dispatch settled, the held one did not.
    assert waited < SKIP_LOCK_TIMEOUT_MS / 2000, f"waited {waited:.2f}s"
    assert (report.accepted, report.rejected) == ({free}, {held_execution})
    assert sql.execution(free)["state"] == "succeeded"
    assert sql.execution(held_execution)["state"] == "executing"
    assert sql.resolutions(held_execution) == []
    # Once the operator's transaction ends, the held dispatch settles after its lease lapses.
    later = NOW + REC_LEASE_MS
    again = impatient.at(later).claim_due_page("replica-b", 16, REC_LEASE_MS)
    assert {i.identity.dispatch_id for i in again} == {held_control, held_execution}
    retry = [
        ItemOutcome(i, Finding.verified(Outcome.FAILED, sha256_hex("r"), "ok"), 1_000, f"m-{n}")
        for n, i in enumerate(again)
    ]
    assert impatient.at(later).commit_outcomes(retry).accepted == {
        held_control,
        held_execution,
    }


def test_the_page_commit_waits_for_a_row_held_for_an_instant(
    world: World, impatient: Storage, database_url: str, sql: SQL
) -> None:
    """A claim that rechecked a control claimed since its snapshot holds its lock to its
    statement's end: a page commit arriving then waits for it (briefly) instead of leaving
    the item to wait a whole recovery lease."""
    held, free = (lease.dispatch_id for lease in world.crashed(2))
    items = impatient.at(NOW).claim_due_page("replica-a", 16, REC_LEASE_MS)
    outcomes = [
        ItemOutcome(
            item,
            Finding.verified(Outcome.SUCCEEDED, sha256_hex(item.identity.dispatch_id), "ok"),
            1_000,
            f"auto-{item.recovery_token}",
        )
        for item in items
    ]
    reports: list[CommitReport] = []
    with psycopg.connect(database_url) as holder, psycopg.connect(database_url) as watcher:
        holder.execute(f"SELECT 1 FROM {CONTROLS} WHERE dispatch_id = %s FOR UPDATE", (held,))
        holder_pid = holder.info.backend_pid
        commit = threading.Thread(
            target=lambda: reports.append(impatient.at(NOW).commit_outcomes(outcomes))
        )
        commit.start()
        # The commit is waiting on the holder's lock (observed, not assumed): release it.
        blocked = False
        deadline = time.monotonic() + 5
        while not blocked and commit.is_alive() and time.monotonic() < deadline:
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                (holder_pid,),
            ).fetchone()
            blocked = bool(row and row[0])
        holder.rollback()
        commit.join(10)
    assert blocked, "the commit never waited for the held row"
    assert (reports[0].accepted, reports[0].rejected) == ({held, free}, set())
    assert sql.execution(held)["state"] == "succeeded"
