"""deploy/sql/roles.sql and resolver/db/grants.sql on real PostgreSQL: what each role can and cannot do.

The SQL files are executed exactly as docs/deployment.md tells an operator to run them; the
runtime role then drives real resolver cycles (in process and as `resolver run --once`), and
every write it must not make is attempted and refused by PostgreSQL's privilege checks.
"""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql
from psycopg.types.json import Jsonb

from resolver.core.domain import (
    Completion,
    DispatchIdentity,
    ExecutionLease,
    Finding,
    FindingKind,
    Outcome,
)
from resolver.core.errors import InvalidDispatch
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.db import migrate
from resolver.executor.client import CompletionResult, ExecutionClient
from tests.helpers.database import T0, new_spec
from tests.helpers.postgres import with_database
from tests.helpers.providers import ScriptedProvider, fixed, registry
from tests.helpers.releases import load_release_0_1_0
from tests.helpers.roles import (
    GRANTS_SQL,
    ROLES,
    ROLES_SQL,
    RoleDatabase,
    crash,
    executor_client,
    resolver_cli,
    run_sql_file,
)
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER, write_public_keys
from tests.helpers.stores import Storage
from tests.helpers.telemetry import wait_for

DAY_MS = 86_400_000

# -- ownership ---------------------------------------------------------------------------------


def test_migration_role_owns_the_schema_and_everything_in_it(role_db: RoleDatabase) -> None:
    (schema,) = role_db.admin_rows(
        "SELECT nspowner::regrole::text AS owner FROM pg_namespace WHERE nspname = 'resolver'"
    )
    assert schema["owner"] == "resolver_migrator"
    tables = role_db.admin_rows(
        "SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'resolver'"
    )
    assert {t["tablename"] for t in tables} >= {
        "alembic_version",
        "approved_action_dispatches",
        "approved_action_executions",
        "approved_action_recovery_controls",
        "approved_action_recovery_resolutions",
        "recovery_authorizations",
    }
    assert {t["tableowner"] for t in tables} == {"resolver_migrator"}
    assert not role_db.admin_rows(
        "SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'approved_action%'"
    )


def test_the_sql_files_are_idempotent(role_db: RoleDatabase) -> None:
    run_sql_file(role_db.admin, ROLES_SQL)
    run_sql_file(role_db.urls["resolver_migrator"], GRANTS_SQL)
    again = resolver_cli(role_db.urls["resolver_migrator"], "migrate")
    assert again.returncode == 0, again.stderr


# -- the runtime role can do the resolver's whole job ----------------------------------------------


def _db_now(role_db: RoleDatabase) -> int:
    with role_db.connect("resolver_executor") as conn:
        (row,) = conn.execute("SELECT resolver_now_ms(NULL) AS now").fetchall()
    return int(row["now"])


def _crashed_a_day_ago(role_db: RoleDatabase, count: int) -> tuple[list[ExecutionLease], int]:
    """Executions that crashed a day ago, and the database's time now. Only the schema owner
    may move the clock; the pod roles then decide on the database's own."""
    now = _db_now(role_db)
    with Storage(role_db.urls["resolver_migrator"]) as owner:
        return crash(owner, count, now - DAY_MS), now


def test_runtime_role_runs_full_resolver_cycles(role_db: RoleDatabase) -> None:
    assert migrate.current_revision(role_db.urls["resolver_runtime"]) == migrate.head_revision()
    kinds = [
        FindingKind.VERIFIED_SUCCEEDED,
        FindingKind.VERIFIED_FAILED,
        FindingKind.MISSING,
        FindingKind.CONFLICT,
        FindingKind.UNSUPPORTED,
    ]
    leases, now = _crashed_a_day_ago(role_db, len(kinds))
    with (
        Storage(role_db.urls["resolver_executor"]) as executor_store,
        Storage(role_db.urls["resolver_runtime"]) as runtime_store,
    ):
        ids = [lease.dispatch_id for lease in leases]
        script = dict(zip(ids, kinds, strict=True))

        answered: dict[str, Finding] = {}

        def answer(identity: DispatchIdentity) -> Finding:
            finding = answered[identity.dispatch_id] = fixed(script[identity.dispatch_id])(identity)
            return finding

        reconciler = Reconciler(
            runtime_store,
            registry("test.action", ScriptedProvider(answer)),
            ReconcilerSettings(owner="replica-a", page_size=16, recovery_lease_ms=30_000),
            Runtime(rng=random.Random(3)),
        )
        try:
            report = reconciler.run_cycle()
            assert report.claimed == len(ids) and report.accepted == set(ids)
            assert not report.rejected
            # A stopping replica hands its page back: the release path, as the runtime role (a
            # claim and a release write through the role's own column grants; no commit runs).
            later = now + 10 * 60_000
            stopping = reconciler.at(later).run_cycle(should_stop=lambda: True)
            assert (stopping.claimed, stopping.released) == (1, 1)
            snapshot = runtime_store.at(later).backlog_snapshot(100)
        finally:
            reconciler.close()
        assert snapshot.controls_by_status() == {"armed": 1, "manual": 2}

        # The executor role's side of the races: a late completion that replays the winning
        # resolution exactly, and an executor alive after all (renew re-arms, then completes).
        executor = executor_client(executor_store)
        replay = Completion(Outcome.SUCCEEDED, "ok", "m-replay", answered[ids[0]].evidence_digest)
        assert executor.complete(leases[0], replay) is CompletionResult.REPLAYED
        renewed = executor.renew(leases[3])
        done = Completion(Outcome.FAILED, "declined", "m-late")
        assert executor.complete(renewed, done) is CompletionResult.COMMITTED

    states = {
        r["dispatch_id"]: r["state"]
        for r in role_db.admin_rows("SELECT dispatch_id, state FROM approved_action_executions")
    }
    assert [states[i] for i in ids] == ["succeeded", "failed", "executing", "failed", "executing"]
    resolutions = role_db.admin_rows(
        "SELECT dispatch_id, source FROM approved_action_recovery_resolutions ORDER BY dispatch_id"
    )
    assert [(r["dispatch_id"], r["source"]) for r in resolutions] == [
        (ids[0], "automatic"),
        (ids[1], "automatic"),
    ]


def test_resolver_run_once_as_the_runtime_role(role_db: RoleDatabase) -> None:
    """The deployed command path: readiness check on alembic_version, claim, commit."""
    with Storage(role_db.urls["resolver_executor"]) as executor_store:
        leasing = executor_client(executor_store)
        # Past the barrier with a 1 ms execution lease, so due for the real-time replica at
        # once: the executor role cannot move the clock, it can only ask for a short lease.
        starting = ExecutionClient(executor_store, owner="executor-1", lease_seconds=0.001)
        leases = []
        for _ in range(2):
            spec = leasing.create_dispatch(new_spec())
            leases.append(starting.start(leasing.lease(spec.dispatch_id)))
        ids = [lease.dispatch_id for lease in leases]
        expiry = max(lease.lease_expires_at_ms for lease in leases)
        with role_db.connect("resolver_executor") as conn:
            for _ in range(1_000):
                (row,) = conn.execute("SELECT resolver_now_ms(NULL) AS now").fetchall()
                if row["now"] > expiry:
                    break
    result = resolver_cli(role_db.urls["resolver_runtime"], "run", "--once")
    assert result.returncode == 0, result.stderr
    controls = role_db.admin_rows(
        "SELECT dispatch_id, status, last_finding FROM approved_action_recovery_controls"
    )
    by_id = {c["dispatch_id"]: c for c in controls}
    # No provider is configured for the action type: unsupported, so it waits for a human.
    assert [(by_id[i]["status"], by_id[i]["last_finding"]) for i in ids] == [
        ("manual", "unsupported")
    ] * 2
    status = resolver_cli(role_db.urls["resolver_runtime"], "status", "--json")
    assert status.returncode == 0, status.stderr


# -- and nothing more --------------------------------------------------------------------------------

RUNTIME_REFUSED = {
    "update dispatches": "UPDATE approved_action_dispatches SET project_id = project_id",
    "insert dispatches": (
        "INSERT INTO approved_action_dispatches (dispatch_id, approval_request_id, project_id,"
        " action_type, action_digest, idempotency_key, schema_version)"
        " VALUES ('x', 'x', 'x', 'x', repeat('a', 64), 'x', 1)"
    ),
    "update resolutions": "UPDATE approved_action_recovery_resolutions SET reason_code = NULL",
    "update authorizations": "UPDATE recovery_authorizations SET user_id = user_id",
    "insert executions": (
        "INSERT INTO approved_action_executions (dispatch_id, state, owner, token, version,"
        " attempt, lease_expires_at_ms) VALUES ('x', 'leased', 'o', gen_random_uuid(), 1, 1, 0)"
    ),
    "delete dispatches": "DELETE FROM approved_action_dispatches",
    "delete executions": "DELETE FROM approved_action_executions",
    "delete controls": "DELETE FROM approved_action_recovery_controls",
    "delete resolutions": "DELETE FROM approved_action_recovery_resolutions",
    "delete authorizations": "DELETE FROM recovery_authorizations",
    "truncate controls": "TRUNCATE approved_action_recovery_controls",
    "rewrite alembic_version": "UPDATE alembic_version SET version_num = version_num",
    "create table": "CREATE TABLE resolver.intruder (id int)",
    "create function": "CREATE FUNCTION resolver.intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "alter table": "ALTER TABLE approved_action_executions ADD COLUMN intruder int",
    "disable immutability trigger": (
        "ALTER TABLE approved_action_recovery_resolutions DISABLE TRIGGER USER"
    ),
    "create index": "CREATE INDEX intruder ON approved_action_executions (state)",
    "drop table": "DROP TABLE approved_action_recovery_resolutions",
    "create table in public": "CREATE TABLE public.intruder (id int)",
}


@pytest.mark.parametrize("statement", RUNTIME_REFUSED.values(), ids=RUNTIME_REFUSED.keys())
def test_runtime_role_cannot_rewrite_facts_delete_or_run_ddl(
    role_db: RoleDatabase, statement: str
) -> None:
    with role_db.connect("resolver_runtime") as conn:
        if "public." in statement and conn.info.server_version < 150000:
            pytest.skip("before PostgreSQL 15 PUBLIC may create in `public`: see the doc's REVOKE")
        # A privilege error, not the immutability trigger: the role never gets that far.
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute(statement)  # type: ignore[call-overload]


EXECUTOR_REFUSED = {
    "insert dispatches": (
        "INSERT INTO approved_action_dispatches (dispatch_id, approval_request_id, project_id,"
        " action_type, action_digest, idempotency_key, schema_version)"
        " VALUES ('x', 'x', 'x', 'x', repeat('a', 64), 'x', 1)"
    ),
    "insert executions": (
        "INSERT INTO approved_action_executions (dispatch_id, state, owner, token, version,"
        " attempt, lease_expires_at_ms) VALUES ('x', 'leased', 'o', gen_random_uuid(), 1, 1, 0)"
    ),
    "update executions": "UPDATE approved_action_executions SET version = version + 1",
    "insert controls": (
        "INSERT INTO approved_action_recovery_controls (dispatch_id, status, execution_version,"
        " next_scan_at_ms, armed_at_ms) VALUES ('x', 'armed', 1, 0, 0)"
    ),
    "update controls": "UPDATE approved_action_recovery_controls SET next_scan_at_ms = 0",
    "delete controls": "DELETE FROM approved_action_recovery_controls",
    "update resolutions": "UPDATE approved_action_recovery_resolutions SET reason_code = NULL",
    "delete resolutions": "DELETE FROM approved_action_recovery_resolutions",
    "insert receipts": "INSERT INTO action_receipts (dispatch_id, receipt) VALUES ('x', '{}')",
    "update receipts": "UPDATE action_receipts SET receipt = receipt",
    "delete receipts": "DELETE FROM action_receipts",
    "lock executions": "SELECT 1 FROM approved_action_executions FOR UPDATE",
    "insert resolutions": (
        "INSERT INTO approved_action_recovery_resolutions (dispatch_id, mutation_id, source,"
        " outcome, expected_execution_version, actor_user_id, reason_code, resolved_at_ms)"
        " VALUES ('x', 'm', 'manual', 'blocked', 1, 'u', 'r', 0)"
    ),
    "read authorizations": "SELECT * FROM recovery_authorizations",
    "update dispatches": "UPDATE approved_action_dispatches SET project_id = project_id",
    "delete executions": "DELETE FROM approved_action_executions",
    "create table": "CREATE TABLE resolver.intruder (id int)",
}


@pytest.mark.parametrize("statement", EXECUTOR_REFUSED.values(), ids=EXECUTOR_REFUSED.keys())
def test_executor_role_cannot_resolve_or_rewrite(role_db: RoleDatabase, statement: str) -> None:
    with role_db.connect("resolver_executor") as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute(statement)  # type: ignore[call-overload]


def test_executor_role_may_not_move_the_protocol_clock(role_db: RoleDatabase) -> None:
    with Storage(role_db.urls["resolver_executor"]) as executor_store:
        client = executor_client(executor_store)
        spec = client.create_dispatch(new_spec())
        with pytest.raises(InvalidDispatch, match="test clock"):
            client.at(T0).lease(spec.dispatch_id)
        assert client.lease(spec.dispatch_id).attempt == 1


PROTOCOL_CALLS = {
    "create": "SELECT * FROM resolver_dispatch_create_v2('x', 'x', 'x', 'x', repeat('a', 64), 'x')",
    "lease": "SELECT * FROM resolver_execution_lease('x', 'o', 1000)",
    "renew": "SELECT * FROM resolver_execution_renew('x', 'o', gen_random_uuid(), 1, 1000)",
    "complete": (
        "SELECT * FROM resolver_execution_complete('x', 'o', gen_random_uuid(), 1,"
        " 'succeeded', 'ok', 'm')"
    ),
    "receipt": "SELECT * FROM resolver_receipt_write('x', 'o', gen_random_uuid(), 1, '{}')",
}


@pytest.mark.parametrize("role", ["resolver_runtime", "resolver_evidence_reader"])
@pytest.mark.parametrize("statement", PROTOCOL_CALLS.values(), ids=PROTOCOL_CALLS.keys())
def test_only_the_executor_role_executes_the_protocol(
    role_db: RoleDatabase, role: str, statement: str
) -> None:
    with role_db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute(statement)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "role", ["resolver_executor", "resolver_evidence_reader", "resolver_retention", "resolver_api"]
)
def test_only_the_runtime_role_executes_the_page_commit(role_db: RoleDatabase, role: str) -> None:
    # SECURITY DEFINER: EXECUTE is the whole door, refused before any table is touched. The
    # API's role in particular can never write an automatic resolution.
    with role_db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute("SELECT * FROM resolver_commit_automatic('[]'::json, NULL)")


@pytest.mark.parametrize(
    "helper", ["resolver_commit_wait_executions", "resolver_commit_wait_controls"]
)
def test_no_pod_role_executes_the_commits_second_try(role_db: RoleDatabase, helper: str) -> None:
    # The automatic commit (SECURITY DEFINER) calls these as the owner when a SKIP LOCKED pass
    # skipped a row; no role locks executions on its own.
    statement = f"SELECT {helper}(ARRAY['nobody'])"
    for role in ("resolver_runtime", "resolver_api", "resolver_executor"):
        with role_db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
            conn.execute(statement)  # type: ignore[call-overload]


def test_executor_role_writes_a_receipt_only_through_the_fenced_function(
    role_db: RoleDatabase,
) -> None:
    with Storage(role_db.urls["resolver_executor"]) as executor_store:
        (lease,) = crash(executor_store, 1)
    with role_db.connect("resolver_executor") as conn, conn.transaction():
        (identity,) = conn.execute(
            "SELECT * FROM resolver_receipt_identity(%s, %s, %s::uuid, %s)",
            (lease.dispatch_id, lease.owner, lease.token, lease.version),
        ).fetchall()
        receipt = {k: v for k, v in identity.items() if k not in ("db_now_ms", "schema_version")}
        (written,) = conn.execute(
            "SELECT * FROM resolver_receipt_write(%s, %s, %s::uuid, %s, %s)",
            (lease.dispatch_id, lease.owner, lease.token, lease.version, Jsonb(receipt)),
        ).fetchall()
    assert written["dispatch_id"] == lease.dispatch_id
    assert role_db.admin_rows(
        f"SELECT 1 FROM action_receipts WHERE dispatch_id = '{lease.dispatch_id}'"
    )


def test_database_clock_is_not_executable_by_every_role(role_db: RoleDatabase) -> None:
    with (
        role_db.connect("resolver_evidence_reader") as conn,
        pytest.raises(errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT resolver_now_ms(NULL)")


def test_evidence_reader_reads_evidence_only_in_read_only_transactions(
    role_db: RoleDatabase,
) -> None:
    # An evidence table of the SQL providers (created by their migration where it exists).
    with role_db.connect("resolver_migrator") as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS resolver.action_receipts"
            " (dispatch_id text PRIMARY KEY, receipt jsonb NOT NULL, written_at_ms bigint)"
        )
    run_sql_file(role_db.urls["resolver_migrator"], GRANTS_SQL)
    with role_db.connect("resolver_evidence_reader") as conn:
        assert conn.execute("SHOW default_transaction_read_only").fetchone() == {
            "default_transaction_read_only": "on"
        }
        assert conn.execute("SELECT count(*) AS n FROM action_receipts").fetchone() is not None
        with pytest.raises(errors.ReadOnlySqlTransaction):
            conn.execute("CREATE TEMP TABLE scratch (id int)")
        for statement in (
            "SELECT * FROM approved_action_executions",
            "SELECT * FROM approved_action_recovery_resolutions",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)  # type: ignore[call-overload]
        # Even switching the session to read-write, the role holds no write privilege.
        conn.execute("SET default_transaction_read_only = off")
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("INSERT INTO action_receipts VALUES ('x', '{}', 0)")


def test_api_role_commits_a_manual_decision_but_cannot_grant_itself(
    role_db: RoleDatabase,
) -> None:
    from resolver.core.domain import Decision, ManualDecision, Principal
    from resolver.human.manual import ManualResolutionService

    with psycopg.connect(role_db.urls["resolver_migrator"], autocommit=True) as platform:
        platform.execute("SET search_path = resolver")
        platform.execute(
            "INSERT INTO recovery_projects VALUES ('proj-1', 1) ON CONFLICT DO NOTHING"
        )
        platform.execute(
            "INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)"
            " ON CONFLICT DO NOTHING"
        )
    (lease,), now = _crashed_a_day_ago(role_db, 1)
    with Storage(role_db.urls["resolver_api"]) as api_store:
        decision = ManualDecision(
            lease.dispatch_id,
            Decision.ABANDON_UNKNOWN,
            f"op-{lease.dispatch_id}",
            lease.version,
            "operator_unsure",
        )
        principal = Principal(
            "alice", now - 1_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
        )
        result = ManualResolutionService(api_store, signer=TEST_SIGNER).decide(principal, decision)
        assert result.value == "committed"
    for role in ("resolver_api", "resolver_runtime"):
        with role_db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO recovery_role_bindings"
                " VALUES ('proj-1', 'mallory', 'approval.recover', 1)"
            )


def test_audit_verify_runs_as_the_runtime_role_and_needs_no_other(
    role_db: RoleDatabase, tmp_path: Path
) -> None:
    """docs/manual-resolution.md: `resolver audit verify` reads RESOLVER_DATABASE_URL, and
    the replicas' runtime role is enough; a role without the chain cannot verify it."""
    from resolver.core.domain import Decision, ManualDecision, Principal
    from resolver.human.manual import ManualResolutionService

    with psycopg.connect(role_db.urls["resolver_migrator"], autocommit=True) as platform:
        platform.execute("SET search_path = resolver")
        platform.execute(
            "INSERT INTO recovery_projects VALUES ('proj-1', 1) ON CONFLICT DO NOTHING"
        )
        platform.execute(
            "INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)"
            " ON CONFLICT DO NOTHING"
        )
    (lease,), now = _crashed_a_day_ago(role_db, 1)
    with Storage(role_db.urls["resolver_api"]) as api_store:
        decision = ManualDecision(
            lease.dispatch_id,
            Decision.ABANDON_UNKNOWN,
            f"op-v-{lease.dispatch_id}",
            lease.version,
            "operator_unsure",
        )
        principal = Principal(
            "alice", now - 1_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
        )
        service = ManualResolutionService(api_store, signer=TEST_SIGNER)
        assert service.decide(principal, decision)
    # Either face may verify, the API's public keys in hand.
    keys = write_public_keys(tmp_path / "audit-keys")
    for role in ("resolver_runtime", "resolver_api"):
        verified = resolver_cli(role_db.urls[role], "audit", "verify", "--public-keys", str(keys))
        assert verified.returncode == 0, verified.stderr
        assert "audit chain verified" in verified.stdout
        assert "signatures verified" in verified.stdout
    refused = resolver_cli(role_db.urls["resolver_evidence_reader"], "audit", "verify")
    assert refused.returncode != 0


def test_runtime_role_opens_watches_and_records_late_evidence(role_db: RoleDatabase) -> None:
    """A decision as the API role opens its watch (the trigger runs as the owner); the
    watcher claims and records as the runtime role, which can neither rewrite the fact nor
    delete a watch."""
    from resolver.core.domain import Decision, FindingKind, ManualDecision, Principal
    from resolver.core.late_evidence import LateEvidenceSettings, LateEvidenceWatcher
    from resolver.human.manual import ManualResolutionService

    with psycopg.connect(role_db.urls["resolver_migrator"], autocommit=True) as platform:
        platform.execute("SET search_path = resolver")
        platform.execute(
            "INSERT INTO recovery_projects VALUES ('proj-1', 1) ON CONFLICT DO NOTHING"
        )
        platform.execute(
            "INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)"
            " ON CONFLICT DO NOTHING"
        )
    (lease,), now = _crashed_a_day_ago(role_db, 1)
    with (
        Storage(role_db.urls["resolver_runtime"]) as runtime_store,
        Storage(role_db.urls["resolver_api"]) as api_store,
    ):
        decision = ManualDecision(
            lease.dispatch_id, Decision.CONFIRM_FAILED, f"op-{lease.dispatch_id}",
            lease.version, "vendor_says_no",
        )  # fmt: skip
        principal = Principal(
            "alice", now - 1_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
        )
        result = ManualResolutionService(api_store, signer=TEST_SIGNER).decide(principal, decision)
        assert result.value == "committed"
        watcher = LateEvidenceWatcher(
            runtime_store,
            registry("test.action", ScriptedProvider(fixed(FindingKind.VERIFIED_SUCCEEDED))),
            LateEvidenceSettings(owner="r1"),
        )
        report = watcher.run_cycle()
        assert [r.contradicts for r in report.records] == [True]
    with role_db.connect("resolver_runtime") as runtime:
        runtime.execute("SET search_path = resolver")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            runtime.execute("UPDATE recovery_late_evidence SET agrees = true")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            runtime.execute("DELETE FROM recovery_late_watches")


# -- the retention role: the prune functions and nothing else -----------------------------------


def test_retention_role_prunes_through_the_command_and_only_settled_dispatches(
    role_db: RoleDatabase,
) -> None:
    with role_db.connect("resolver_executor") as conn:
        (row,) = conn.execute("SELECT resolver_now_ms(NULL) AS now").fetchall()
    old = row["now"] - 40 * DAY_MS
    # 40 days ago on the test clock, which only the schema owner may move.
    with Storage(role_db.urls["resolver_migrator"]) as executor_store:
        settled, still_open = crash(executor_store, 2, old)
        executor = executor_client(executor_store)
        done = Completion(Outcome.SUCCEEDED, "ok", f"m-{settled.dispatch_id}")
        executor.at(old + 100).complete(settled, done)
    dry = resolver_cli(role_db.urls["resolver_retention"], "prune", "--older-than", "30d",
                       "--dry-run")  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    result = resolver_cli(role_db.urls["resolver_retention"], "prune", "--older-than", "30d",
                          "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["dispatches_pruned"] >= 1
    remaining = {
        r["dispatch_id"]
        for r in role_db.admin_rows("SELECT dispatch_id FROM approved_action_dispatches")
    }
    assert settled.dispatch_id not in remaining and still_open.dispatch_id in remaining
    (run,) = role_db.admin_rows(
        "SELECT db_user FROM recovery_prune_runs ORDER BY run_id DESC LIMIT 1"
    )
    assert run["db_user"] == "resolver_retention"
    # The replicas' metrics read the run history.
    with role_db.connect("resolver_runtime") as conn:
        assert conn.execute("SELECT count(*) AS n FROM recovery_prune_runs").fetchone()


RETENTION_REFUSED = {
    "read dispatches": "SELECT * FROM approved_action_dispatches",
    "read resolutions": "SELECT * FROM approved_action_recovery_resolutions",
    "read authorizations": "SELECT * FROM recovery_authorizations",
    "read executions": "SELECT * FROM approved_action_executions",
    "read receipts": "SELECT * FROM action_receipts",
    "delete dispatches": "DELETE FROM approved_action_dispatches",
    "delete executions": "DELETE FROM approved_action_executions",
    "delete resolutions": "DELETE FROM approved_action_recovery_resolutions",
    "delete receipts": "DELETE FROM action_receipts",
    "truncate resolutions": "TRUNCATE approved_action_recovery_resolutions",
    "set the former prune flag and delete": (
        "SET resolver.prune_active = 'on'; DELETE FROM approved_action_recovery_resolutions"
    ),
    "rewrite a prune run": "UPDATE recovery_prune_runs SET export_digest = NULL",
    "invent a prune run": (
        "INSERT INTO recovery_prune_runs (started_at_ms, cutoff_ms, include_audit, db_user)"
        " VALUES (0, 0, false, 'x')"
    ),
    "create function": "CREATE FUNCTION resolver.intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
}


@pytest.mark.parametrize("statement", RETENTION_REFUSED.values(), ids=RETENTION_REFUSED.keys())
def test_retention_role_touches_no_table_directly(role_db: RoleDatabase, statement: str) -> None:
    with role_db.connect("resolver_retention") as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute(statement)  # type: ignore[call-overload]


PRUNE_CALLS = {
    "begin": "SELECT resolver_prune_begin(0, false, NULL, 'x')",
    "batch": "SELECT * FROM resolver_prune_batch(1, 10, NULL)",
    "finish": "SELECT * FROM resolver_prune_finish(1)",
    "candidates": "SELECT * FROM resolver_prune_candidates(0, true, '', 10)",
}


@pytest.mark.parametrize(
    "role", ["resolver_runtime", "resolver_executor", "resolver_evidence_reader"]
)
@pytest.mark.parametrize("call", PRUNE_CALLS.values(), ids=PRUNE_CALLS.keys())
def test_only_the_retention_role_may_call_the_prune_functions(
    role_db: RoleDatabase, role: str, call: str
) -> None:
    with role_db.connect(role) as conn:
        if role == "resolver_evidence_reader":
            conn.execute("SET default_transaction_read_only = off")
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute(call)  # type: ignore[call-overload]


def test_retention_role_cannot_take_audit_facts_without_an_export_digest(
    role_db: RoleDatabase,
) -> None:
    with (
        role_db.connect("resolver_retention") as conn,
        pytest.raises(errors.InvalidParameterValue, match="sha256"),
    ):
        conn.execute("SELECT resolver_prune_begin(0, true, NULL, 'x')")


# -- the outcome feed: the executor reads every project, a reader its own ---------------------------

FEED_READS = {
    "read": "SELECT * FROM resolver_outcomes_after(NULL, 100)",
    "cursor now": "SELECT resolver_outcome_cursor_now()",
    "status": "SELECT * FROM resolver_dispatch_status('x')",
    "history": "SELECT * FROM resolver_dispatch_history('x')",
    "consumer cursor": "SELECT resolver_outcome_consumer_cursor('c')",
    "save a consumer": "SELECT resolver_outcome_consumer_save('c', '')",
    "drop a consumer": "SELECT resolver_outcome_consumer_drop('c')",
}


def _settled_in(role_db: RoleDatabase, project_id: str) -> str:
    """A dispatch of `project_id` the executor role created and completed: one feed record."""
    with Storage(role_db.urls["resolver_executor"]) as executor_store:
        client = executor_client(executor_store)
        spec = client.create_dispatch(new_spec(project_id=project_id))
        lease = client.start(client.lease(spec.dispatch_id))
        done = Completion(Outcome.SUCCEEDED, "ok", f"m-{spec.dispatch_id}")
        assert client.complete(lease, done) is CompletionResult.COMMITTED
    return spec.dispatch_id


def _feed_of(conn: psycopg.Connection[dict[str, Any]], after: str) -> list[str]:
    return [
        row["dispatch_id"]
        for row in conn.execute("SELECT * FROM resolver_outcomes_after(%s, 1000)", (after,))
    ]


def test_the_outcome_feed_reads_are_the_executor_role_s_and_the_reader_s_only(
    role_db: RoleDatabase,
) -> None:
    for role in ("resolver_runtime", "resolver_api", "resolver_evidence_reader",
                 "resolver_retention", "resolver_policy_writer"):  # fmt: skip
        for statement in FEED_READS.values():
            with role_db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)  # type: ignore[call-overload]
    for role in ("resolver_executor", "resolver_outcome_reader"):
        with role_db.connect(role) as conn:
            for statement in FEED_READS.values():
                conn.execute(statement)  # type: ignore[call-overload]


def test_an_outcome_reader_follows_only_the_projects_listed_for_it(
    role_db: RoleDatabase,
) -> None:
    with role_db.connect("resolver_executor") as conn:
        (start,) = conn.execute("SELECT resolver_outcome_cursor_now() AS c").fetchall()
    mine, other = _settled_in(role_db, "proj-mine"), _settled_in(role_db, "proj-other")
    with role_db.connect("resolver_executor") as conn:
        assert wait_for(
            "both records below the horizon",
            lambda: _feed_of(conn, start["c"]) if len(_feed_of(conn, start["c"])) == 2 else None,
            timeout_seconds=60,
        ) == [mine, other]
    with role_db.connect("resolver_outcome_reader") as conn:
        # No project listed for it: nothing at all.
        assert _feed_of(conn, start["c"]) == []
        assert conn.execute("SELECT * FROM resolver_dispatch_status(%s)", (mine,)).fetchall() == []
    with role_db.connect("resolver_policy_writer") as conn:
        conn.execute("INSERT INTO recovery_outcome_reader_scopes VALUES"
                     " ('resolver_outcome_reader', 'proj-mine')")  # fmt: skip
    with role_db.connect("resolver_outcome_reader") as conn:
        assert _feed_of(conn, start["c"]) == [mine]
        (status,) = conn.execute(
            "SELECT state, settled_by FROM resolver_dispatch_status(%s)", (mine,)
        ).fetchall()
        assert status == {"state": "succeeded", "settled_by": "executor"}
        assert conn.execute("SELECT * FROM resolver_dispatch_status(%s)", (other,)).fetchall() == []
        kinds = [r["kind"] for r in conn.execute(
            "SELECT kind FROM resolver_dispatch_history(%s)", (mine,))]  # fmt: skip
        assert kinds == ["created", "started", "settled"]
        assert (
            conn.execute("SELECT * FROM resolver_dispatch_history(%s)", (other,)).fetchall() == []
        )
        # The project filter narrows within the scope, never past it.
        narrowed = conn.execute(
            "SELECT dispatch_id FROM resolver_outcomes_after(%s, 100, 'proj-other')", (start["c"],)
        ).fetchall()
        assert narrowed == []
        # Its consumer cursor is retention's to respect; the tables stay closed to it.
        assert conn.execute(
            "SELECT resolver_outcome_consumer_save('reader-1', %s) AS c", (start["c"],)
        ).fetchone() == {"c": start["c"]}
        # It registers its own LISTEN session through the function, never the table.
        assert conn.execute("SELECT resolver_outcome_listen() > 0 AS ok").fetchone() == {"ok": True}
        assert conn.execute("SELECT resolver_outcome_unlisten() AS d").fetchone() == {"d": True}
        for table in ("recovery_outcomes", "recovery_outcome_consumers",
                      "recovery_outcome_reader_scopes", "recovery_outcome_listeners",
                      "approved_action_dispatches"):  # fmt: skip
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(f"SELECT * FROM {table}")  # type: ignore[call-overload]
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute(PROTOCOL_CALLS["create"])  # type: ignore[call-overload]
        assert conn.execute(
            "SELECT resolver_outcome_consumer_drop('reader-1') AS d"
        ).fetchone() == {"d": True}


OUTCOME_INTERNALS = (
    "resolver_outcomes_append_settled()",
    "resolver_outcomes_append_contradicted()",
    "resolver_outcomes_append_superseded()",
    "resolver_outcomes_notify()",
    "resolver_outcomes_guard()",
    "resolver_outcome_scope()",
    "resolver_outcome_cursor_parse(text)",
    "resolver_effective_state(text, bigint, bigint)",
    "resolver_decision_actors(text)",
)


@pytest.mark.parametrize("role", ROLES)
def test_no_role_but_the_owner_may_call_the_feed_s_appends_and_helpers(
    role_db: RoleDatabase, role: str
) -> None:
    rows = role_db.admin_rows(
        "SELECT f AS fn, has_function_privilege('" + role + "', f, 'EXECUTE') AS may"
        " FROM unnest(ARRAY[" + ", ".join(f"'{f}'" for f in OUTCOME_INTERNALS) + "]) AS f"
    )
    assert {r["fn"]: r["may"] for r in rows} == {
        f: role == "resolver_migrator" for f in OUTCOME_INTERNALS
    }


@pytest.mark.parametrize("role", [role for role in ROLES if role != "resolver_migrator"])
def test_no_pod_role_writes_the_outcome_feed(role_db: RoleDatabase, role: str) -> None:
    refused = (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction)
    with role_db.connect(role) as conn:
        for statement in (
            "INSERT INTO recovery_outcomes (kind, dispatch_id, approval_request_id, project_id,"
            " action_type, state, settled_by, occurred_at_ms)"
            " VALUES ('settled', 'x', 'x', 'x', 'x', 'succeeded', 'executor', 0)",
            "DELETE FROM recovery_outcomes",
            "INSERT INTO recovery_outcome_consumers VALUES ('c', '0', 0, 0, 0)",
            # A listener registration only for the caller's own session, by the function.
            "INSERT INTO recovery_outcome_listeners VALUES (1, 9223372036854775807)",
        ):
            with pytest.raises(refused):
                conn.execute(statement)  # type: ignore[call-overload]


# -- the owner's triggers: neither definer nor pinned, because no role but the owner fires them --

OWNER_TRIGGER_FUNCTIONS = (
    "resolver_execution_born()",
    "resolver_executions_changed()",
    "resolver_outcomes_append_settled()",
)
"""Trigger functions of approved_action_executions that run as the writer, under the writer's
search_path (04_executor_protocol.sql says why): sound only while no other role may write it."""


@pytest.mark.parametrize("role", [role for role in ROLES if role != "resolver_migrator"])
def test_no_role_but_the_owner_may_write_an_execution_or_insert_a_control(
    role_db: RoleDatabase, role: str
) -> None:
    (row,) = role_db.admin_rows(
        "SELECT has_table_privilege('" + role + "', 'approved_action_executions',"
        "   'INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER') AS table_write,"
        " has_any_column_privilege('" + role + "', 'approved_action_executions',"
        "   'INSERT, UPDATE') AS column_write,"
        " has_any_column_privilege('" + role + "', 'approved_action_recovery_controls',"
        "   'INSERT') AS control_insert"
    )
    assert row == {"table_write": False, "column_write": False, "control_insert": False}


def test_the_owner_s_triggers_run_as_the_writer_and_fire_on_no_other_table(
    role_db: RoleDatabase,
) -> None:
    functions = role_db.admin_rows(
        "SELECT p.oid::regprocedure::text AS fn, p.prosecdef, p.proconfig"
        " FROM pg_proc AS p WHERE p.oid = ANY(ARRAY["
        + ", ".join(f"'{f}'::regprocedure" for f in OWNER_TRIGGER_FUNCTIONS)
        + "])"
    )
    assert {(r["fn"], r["prosecdef"], r["proconfig"]) for r in functions} == {
        (f, False, None) for f in OWNER_TRIGGER_FUNCTIONS
    }
    # Immediate triggers only: a deferred one fires at COMMIT, outside the owner's call, under
    # the committing session's own path.
    triggers = role_db.admin_rows(
        "SELECT t.tgrelid::regclass::text AS tbl, t.tgdeferrable AS deferred"
        " FROM pg_trigger AS t WHERE t.tgfoid = ANY(ARRAY["
        + ", ".join(f"'{f}'::regprocedure" for f in OWNER_TRIGGER_FUNCTIONS)
        + "]::oid[])"
    )
    assert {(r["tbl"], r["deferred"]) for r in triggers} == {("approved_action_executions", False)}
    assert len(triggers) == len(OWNER_TRIGGER_FUNCTIONS)
    # The control's birth rule, asked from a WHEN, is unpinned too: only a control's INSERT asks.
    (born,) = role_db.admin_rows(
        "SELECT p.proconfig, array_agg(pg_get_triggerdef(t.oid)) AS defs"
        " FROM pg_proc AS p JOIN pg_trigger AS t"
        "   ON pg_get_triggerdef(t.oid) LIKE '%' || p.proname || '(%'"
        " WHERE p.oid = 'resolver_control_born_broken(record)'::regprocedure"
        " GROUP BY p.proconfig"
    )
    assert born["proconfig"] is None
    assert [d.split(" EXECUTE ")[0].split(" ON ")[0] for d in born["defs"]] == [
        "CREATE TRIGGER approved_action_recovery_controls_born_armed AFTER INSERT"
    ]


# -- two people hold against what a pod holds ---------------------------------------------------

POD_ROLES = (
    "resolver_runtime",
    "resolver_api",
    "resolver_executor",
    "resolver_evidence_reader",
    "resolver_retention",
    "resolver_policy_writer",
    "resolver_outcome_reader",
)
FAKE_SIGNATURE = "ab" * 64


def _forge_two_person_commit(conn: psycopg.Connection[Any], dispatch_id: str, version: int) -> None:
    """What a compromised pod tried: settle the dispatch by hand with a manual resolution, two
    authorization facts (the real alice and a colleague she names), a link and the head."""
    fact = (
        "INSERT INTO recovery_authorizations (mutation_id, user_id, permission, project_id,"
        " project_version, role_binding_version, auth_time_ms, amr, authorized_at_ms, issuer,"
        " token_kid, signing_kid, signature)"
        " VALUES ('forged', %s, 'approval.recover', 'proj-1', 1, 1, 0, '{mfa}', 0, 'i', 'k',"
        " 's', %s)"
    )
    with conn.transaction():
        conn.execute("SET LOCAL search_path = resolver")
        conn.execute(
            "UPDATE approved_action_recovery_controls SET status = 'resolved',"
            " closed_by = 'manual', closed_at_ms = 0 WHERE dispatch_id = %s",
            (dispatch_id,),
        )
        conn.execute(
            "UPDATE approved_action_executions SET state = 'succeeded', version = version + 1,"
            " finished_at_ms = 0 WHERE dispatch_id = %s",
            (dispatch_id,),
        )
        conn.execute(
            "INSERT INTO approved_action_recovery_resolutions (dispatch_id, mutation_id, source,"
            " outcome, expected_execution_version, actor_user_id, reason_code, resolved_at_ms)"
            " VALUES (%s, 'forged', 'manual', 'succeeded', %s, 'alice', 'forged', 0)",
            (dispatch_id, version),
        )
        for user in ("alice", "bob"):
            conn.execute(fact, (user, FAKE_SIGNATURE))
        conn.execute(
            "INSERT INTO recovery_audit_chain (seq, mutation_id, dispatch_id, content, prev_hash,"
            " hash, recorded_at_ms) SELECT seq + 1, 'forged', %s, '{}', hash, repeat('f', 64), 0"
            " FROM recovery_audit_head",
            (dispatch_id,),
        )
        conn.execute("UPDATE recovery_audit_head SET seq = seq + 1, hash = repeat('f', 64)")


def _two_person_world(role_db: RoleDatabase) -> ExecutionLease:
    with psycopg.connect(role_db.urls["resolver_migrator"], autocommit=True) as owner:
        owner.execute("SET search_path = resolver")
        owner.execute("INSERT INTO recovery_projects VALUES ('proj-1', 1) ON CONFLICT DO NOTHING")
        for user in ("alice", "bob"):
            owner.execute(
                "INSERT INTO recovery_role_bindings VALUES ('proj-1', %s, 'approval.recover', 1)"
                " ON CONFLICT DO NOTHING",
                (user,),
            )
        owner.execute("INSERT INTO recovery_two_person_rules VALUES ('*', 'confirm_succeeded')"
                      " ON CONFLICT DO NOTHING")  # fmt: skip
    (lease,), _ = _crashed_a_day_ago(role_db, 1)
    return lease


def _still_unsettled(role_db: RoleDatabase, dispatch_id: str) -> None:
    rows = role_db.admin_rows(
        "SELECT e.state, (SELECT count(*) FROM approved_action_recovery_resolutions AS r"
        f" WHERE r.dispatch_id = '{dispatch_id}') AS resolutions"
        f" FROM approved_action_executions AS e WHERE e.dispatch_id = '{dispatch_id}'"
    )
    assert rows == [{"state": "executing", "resolutions": 0}]


@pytest.mark.parametrize("role", POD_ROLES)
def test_the_forged_two_person_commit_is_refused_for_every_pod_role(
    role_db: RoleDatabase, role: str
) -> None:
    lease = _two_person_world(role_db)
    refused = (errors.InsufficientPrivilege, errors.ReadOnlySqlTransaction)
    with role_db.connect(role) as conn, pytest.raises(refused):
        _forge_two_person_commit(conn, lease.dispatch_id, lease.version)
    _still_unsettled(role_db, lease.dispatch_id)


def test_the_forged_two_person_commit_is_refused_for_the_owner_too(
    role_db: RoleDatabase,
) -> None:
    """The owner passes every privilege check; the write guards refuse its own statements,
    since neither commit function is on their call stack."""
    lease = _two_person_world(role_db)
    with (
        role_db.connect("resolver_migrator") as conn,
        pytest.raises(errors.InsufficientPrivilege, match="only through resolver_commit"),
    ):
        _forge_two_person_commit(conn, lease.dispatch_id, lease.version)
    _still_unsettled(role_db, lease.dispatch_id)


MANUAL_COMMIT = (
    "SELECT * FROM resolver_commit_manual(p_dispatch_id => %(d)s, p_mutation_id => %(m)s,"
    " p_act => %(act)s, p_proposal_id => %(p)s,"
    " p_outcome => 'succeeded', p_evidence_digest => NULL, p_reason_code => 'forged',"
    " p_expected_execution_version => %(v)s, p_user_id => %(u)s, p_project_id => 'proj-1',"
    " p_project_version => 1, p_role_binding_version => 1,"
    " p_auth_time_ms => %(t)s, p_amr => '{mfa}', p_issuer => 'i',"
    " p_token_kid => 'k', p_signing_kid => %(kid)s, p_signature => %(sig)s,"
    " p_verified_at_ms => %(t)s, p_now_ms => %(now)s)"
)


def _fake_signature(n: int) -> str:
    """A well-formed signature nobody made: distinct per call, since a signature counts once."""
    return f"{n:0128x}"


def test_the_runtime_role_cannot_record_a_human_decision(role_db: RoleDatabase) -> None:
    lease = _two_person_world(role_db)
    params = {"d": lease.dispatch_id, "m": "r-1", "v": lease.version, "u": "alice",
              "t": _db_now(role_db), "now": None, "act": "propose", "p": None}  # fmt: skip
    with role_db.connect("resolver_runtime") as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute(MANUAL_COMMIT, {**params, "kid": "k", "sig": FAKE_SIGNATURE})
    _still_unsettled(role_db, lease.dispatch_id)


def test_an_api_role_inventing_a_second_person_is_refused_or_caught_by_verify(
    role_db: RoleDatabase, tmp_path: Path
) -> None:
    """The API's own role calls the manual commit as alice, then as someone else, with facts
    it signed itself. An invented person holds no binding: refused. A real colleague's name
    commits (the database cannot check an Ed25519 signature), and `resolver audit verify`
    names the fact whose signature the API's public key does not verify."""
    lease = _two_person_world(role_db)
    base = {"d": lease.dispatch_id, "v": lease.version, "kid": TEST_SIGNER.kid,
            "t": _db_now(role_db), "now": None}  # fmt: skip
    with role_db.connect("resolver_api") as conn:
        first = conn.execute(
            MANUAL_COMMIT,
            {**base, "m": "f-1", "u": "alice", "sig": _fake_signature(1), "act": "propose",
             "p": None},
        ).fetchall()  # fmt: skip
        assert [r["result"] for r in first] == ["proposed"]
        proposal = first[0]["proposal_id"]
        invented = conn.execute(
            MANUAL_COMMIT,
            {**base, "m": "f-2", "u": "mallory", "sig": _fake_signature(2), "act": "confirm",
             "p": proposal},
        ).fetchall()  # fmt: skip
        assert invented == []  # no binding: nothing written
        colleague = conn.execute(
            MANUAL_COMMIT,
            {**base, "m": "f-3", "u": "bob", "sig": _fake_signature(3), "act": "confirm",
             "p": proposal},
        ).fetchall()  # fmt: skip
        assert [r["result"] for r in colleague] == ["committed"]
    keys = write_public_keys(tmp_path / "audit-keys")
    verify = resolver_cli(
        role_db.urls["resolver_api"], "audit", "verify", "--public-keys", str(keys)
    )
    assert verify.returncode == 1, verify.stdout
    assert "bad_signature" in verify.stderr


# -- the pods decide on the database clock ------------------------------------------------------

PROPOSAL_CLOSE = (
    "SELECT * FROM resolver_proposal_close(p_dispatch_id => %(d)s, p_mutation_id => 'c-1',"
    " p_act => 'withdraw', p_proposal_id => 1, p_reason_code => 'changed_mind',"
    " p_user_id => 'alice', p_project_id => 'proj-1', p_project_version => 1,"
    " p_role_binding_version => 1, p_auth_time_ms => %(t)s, p_amr => '{mfa}', p_issuer => 'i',"
    " p_token_kid => 'k', p_signing_kid => %(kid)s, p_signature => %(sig)s,"
    " p_verified_at_ms => %(t)s, p_now_ms => %(now)s)"
)
AUTOMATIC_COMMIT = "SELECT * FROM resolver_commit_automatic(%(items)s::json, %(now)s)"
LATE_EVIDENCE = "SELECT * FROM resolver_record_late_evidence(%(items)s::json, 'r1', 60000, %(now)s)"
# Every function granted to a pod role that takes the clock override, with the role.
CLOCKED_CALLS = [
    ("resolver_runtime", AUTOMATIC_COMMIT),
    ("resolver_runtime", LATE_EVIDENCE),
    ("resolver_api", MANUAL_COMMIT),
    ("resolver_api", PROPOSAL_CLOSE),
]
WRITTEN = (
    "SELECT (SELECT count(*) FROM approved_action_recovery_resolutions)"
    " + (SELECT count(*) FROM recovery_proposals)"
    " + (SELECT count(*) FROM recovery_authorizations)"
    " + (SELECT count(*) FROM recovery_audit_chain)"
    " + (SELECT count(*) FROM recovery_late_evidence) AS n"
)


def _clocked_params(role_db: RoleDatabase, lease: ExecutionLease, now: int) -> dict[str, Any]:
    """Arguments a call would commit with on the database clock: a due, bound, fresh decision
    on a crashed execution, or an automatic page that verified it."""
    item = {"dispatch_id": lease.dispatch_id, "finding": "verified_succeeded"}
    return {"d": lease.dispatch_id, "m": f"clock-{uuid.uuid4().hex[:8]}", "v": lease.version,
            "u": "alice",
            "t": _db_now(role_db), "kid": TEST_SIGNER.kid, "sig": _fake_signature(now),
            "items": json.dumps([item]), "now": now, "act": "propose", "p": None}  # fmt: skip


def test_the_clocked_calls_are_every_pod_grant_taking_the_clock(role_db: RoleDatabase) -> None:
    """A new pod-callable function taking p_now_ms must join CLOCKED_CALLS (and the rule)."""
    rows = role_db.admin_rows(
        "SELECT DISTINCT r.rolname AS role, p.proname AS fn"
        " FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
        " CROSS JOIN pg_roles AS r"
        " WHERE n.nspname = 'resolver' AND 'p_now_ms' = ANY(p.proargnames)"
        " AND r.rolname IN ('resolver_runtime', 'resolver_api')"
        " AND has_function_privilege(r.oid, p.oid, 'EXECUTE')"
    )
    granted = {(r["role"], r["fn"]) for r in rows}
    listed = {(role, call.split("FROM ")[1].split("(")[0]) for role, call in CLOCKED_CALLS}
    assert granted == listed


@pytest.mark.parametrize(("role", "call"), CLOCKED_CALLS)
def test_a_pod_role_may_not_move_the_clock(role_db: RoleDatabase, role: str, call: str) -> None:
    """A future time would decide on a live lease or make a stale authentication look fresh:
    the override is refused (RS005) and nothing is written."""
    lease = _two_person_world(role_db)
    (before,) = role_db.admin_rows(WRITTEN)
    params = _clocked_params(role_db, lease, lease.lease_expires_at_ms + 2 * DAY_MS)
    with role_db.connect(role) as conn, pytest.raises(psycopg.Error) as refused:
        conn.execute(call, params)
    assert refused.value.sqlstate == "RS005"
    assert "test clock" in str(refused.value)
    assert role_db.admin_rows(WRITTEN) == [before]
    _still_unsettled(role_db, lease.dispatch_id)


def test_the_schema_owner_may_move_the_clock(role_db: RoleDatabase) -> None:
    """The test suites run as the owner: the same manual commit, at a time it names."""
    lease = _two_person_world(role_db)
    now = _db_now(role_db)
    params = {**_clocked_params(role_db, lease, now), "t": now - 1_000}
    with role_db.connect("resolver_migrator") as conn:
        conn.execute("SET search_path = resolver")
        rows = conn.execute(MANUAL_COMMIT, params).fetchall()
    assert [r["result"] for r in rows] == ["proposed"]
    (proposal,) = role_db.admin_rows(
        f"SELECT proposed_at_ms FROM recovery_proposals WHERE dispatch_id = '{lease.dispatch_id}'"
    )
    assert proposal["proposed_at_ms"] == now


# -- upgrading an installation: the old grants go -------------------------------------------------

# What the previous grants.sql gave the replicas' role (which the API pods logged in as too).
LEGACY_GRANTS = """
GRANT SELECT, INSERT ON approved_action_recovery_resolutions, recovery_authorizations,
    recovery_audit_chain, recovery_late_evidence TO resolver_runtime;
GRANT SELECT, UPDATE ON recovery_audit_head, approved_action_executions,
    approved_action_recovery_controls, recovery_late_watches TO resolver_runtime;
GRANT SELECT, INSERT, UPDATE ON recovery_proposals TO resolver_runtime;
GRANT SELECT, UPDATE (version) ON recovery_projects, recovery_role_bindings TO resolver_runtime;
"""
WRITES = [
    ("approved_action_recovery_resolutions", "INSERT"),
    ("recovery_authorizations", "INSERT"),
    ("recovery_audit_chain", "INSERT"),
    ("recovery_audit_head", "UPDATE"),
    ("recovery_proposals", "INSERT"),
    ("recovery_proposals", "UPDATE"),
    ("recovery_late_evidence", "INSERT"),
    ("approved_action_executions", "UPDATE"),
    ("recovery_role_bindings", "UPDATE"),
]


def test_migrate_with_grants_removes_the_old_grants_of_an_existing_installation(
    role_db: RoleDatabase,
) -> None:
    name = f"resolver_upgrade_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(role_db.admin, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    admin_url = with_database(role_db.admin, name)
    migrator = with_database(role_db.urls["resolver_migrator"], name)
    try:
        run_sql_file(admin_url, ROLES_SQL)
        load_release_0_1_0(migrator, schema="resolver")
        with psycopg.connect(migrator, autocommit=True) as conn:
            conn.execute("SET search_path = resolver")
            conn.execute(LEGACY_GRANTS)  # type: ignore[call-overload]
        upgraded = resolver_cli(migrator, "migrate", "--grants")
        assert upgraded.returncode == 0, upgraded.stderr
        with psycopg.connect(migrator, autocommit=True) as conn:
            conn.execute("SET search_path = resolver")
            held = [
                (table, verb)
                for table, verb in WRITES
                for role in ("resolver_runtime", "resolver_api")
                if conn.execute(
                    "SELECT has_table_privilege(%s, %s, %s)"
                    " OR has_any_column_privilege(%s, %s, %s)",
                    (role, table, verb, role, table, verb),
                ).fetchone()[0]  # type: ignore[index]
            ]
        assert held == []
    finally:
        with psycopg.connect(role_db.admin, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


FUNCTION_ACLS = (
    "SELECT p.oid::regprocedure::text,"
    " array_to_string(ARRAY(SELECT a::text FROM unnest(p.proacl) AS a ORDER BY 1), ',')"
    " FROM pg_proc AS p WHERE p.pronamespace = 'resolver'::regnamespace ORDER BY 1"
)


def test_the_policy_writer_lists_a_project_of_the_id_shape_only(role_db: RoleDatabase) -> None:
    """A reader scope's project_id is a resolver_id: its check (resolver_is_id, closed to
    PUBLIC) runs as the policy writer, whom the grants let execute it."""
    with role_db.connect("resolver_policy_writer") as conn:
        conn.execute(
            "INSERT INTO recovery_outcome_reader_scopes VALUES ('resolver_outcome_reader', 'p-1')"
        )
        with pytest.raises(errors.CheckViolation) as refused:
            conn.execute(
                "INSERT INTO recovery_outcome_reader_scopes VALUES ('resolver_outcome_reader', '-p')"
            )
        assert refused.value.diag.constraint_name == "ck_resolver_id"
        conn.execute("DELETE FROM recovery_outcome_reader_scopes WHERE project_id = 'p-1'")
    with role_db.connect("resolver_executor") as conn:
        assert conn.execute(
            "SELECT has_function_privilege('resolver.resolver_is_id(text)', 'EXECUTE') AS x"
        ).fetchone() == {"x": False}


def test_functions_applied_again_keep_every_role_s_grant_without_running_the_grants(
    role_db: RoleDatabase,
) -> None:
    """`resolver migrate` re-creates the functions whenever their files change: each role keeps
    what grants.sql gave it on every function of the same signature, with no window between
    the migration's commit and the next `--grants` in which a replica or executor is refused."""
    migrator = role_db.urls["resolver_migrator"]
    with psycopg.connect(migrator, autocommit=True) as conn:
        before = conn.execute(FUNCTION_ACLS).fetchall()
        assert any("resolver_runtime=X" in (acl or "") for _, acl in before)
        # What a changed definition file looks like to the next migrate.
        conn.execute("UPDATE resolver.resolver_definitions SET checksum = 'changed'")
        oids = conn.execute(
            "SELECT oid FROM pg_proc WHERE proname = 'resolver_execution_start'"
        ).fetchall()
    migrate.upgrade(migrator)
    with psycopg.connect(migrator, autocommit=True) as conn:
        assert conn.execute(FUNCTION_ACLS).fetchall() == before
        assert (
            conn.execute(
                "SELECT oid FROM pg_proc WHERE proname = 'resolver_execution_start'"
            ).fetchall()
            != oids
        ), "the functions were not applied again"
        assert conn.execute(
            "SELECT has_function_privilege('resolver_executor',"
            " 'resolver.resolver_execution_start(text, text, uuid, bigint, bigint, bigint)',"
            " 'EXECUTE')"
        ).fetchone() == (True,)


def test_a_provider_s_own_grants_cover_its_own_table(role_db: RoleDatabase) -> None:
    # The test-support distribution's ledger provider: its grants.sql, applied by the same
    # `resolver migrate --grants` as the resolver's, is all that opens its table to a role.
    privileges = role_db.admin_rows(
        "SELECT grantee, privilege_type FROM information_schema.role_table_grants"
        " WHERE table_name = 'ledger_entries' AND grantee LIKE 'resolver\\_%'"
        " AND grantee <> 'resolver_migrator'"  # the owner: every privilege
        " ORDER BY grantee, privilege_type"
    )
    assert [(p["grantee"], p["privilege_type"]) for p in privileges] == [
        ("resolver_evidence_reader", "SELECT"),
        ("resolver_executor", "INSERT"),
        ("resolver_executor", "SELECT"),
    ]
    with role_db.connect("resolver_evidence_reader") as reader:
        assert reader.execute("SELECT count(*) AS n FROM ledger_entries").fetchone() == {"n": 0}
        # With the session's read-only default lifted, the grant alone still refuses.
        reader.execute("SET default_transaction_read_only = off")
        with pytest.raises(errors.InsufficientPrivilege):
            reader.execute(
                "INSERT INTO ledger_entries (dispatch_id, idempotency_key, action_digest, attempt,"
                " amount_cents, state, entry_digest) VALUES ('x', 'x', 'x', 1, 1, 'booked', 'x')"
            )
    with (
        role_db.connect("resolver_runtime") as runtime,
        pytest.raises(errors.InsufficientPrivilege),
    ):
        runtime.execute("SELECT count(*) FROM ledger_entries")
