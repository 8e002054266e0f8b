"""deploy/sql/roles.sql and resolver/db/grants.sql on real PostgreSQL: what each role can and cannot do.

The SQL files are executed exactly as docs/deployment.md tells an operator to run them; the
runtime role then drives real resolver cycles (in process and as `resolver run --once`), and
every write it must not make is attempted and refused by PostgreSQL's privilege checks.
"""

from __future__ import annotations

import json
import random

import psycopg
import pytest
from psycopg import errors
from psycopg.types.json import Jsonb

from resolver.core.domain import (
    Completion,
    DispatchIdentity,
    Finding,
    FindingKind,
    Outcome,
)
from resolver.core.errors import InvalidDispatch
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.db import migrate
from resolver.db.repository import PostgresStore
from resolver.executor.client import CompletionResult, ExecutionClient
from tests.helpers.database import T0, new_spec
from tests.helpers.providers import ScriptedProvider, fixed, registry
from tests.helpers.roles import (
    AFTER,
    GRANTS_SQL,
    ROLES_SQL,
    RoleDatabase,
    crash,
    executor_client,
    resolver_cli,
    run_sql_file,
)

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


def test_runtime_role_runs_full_resolver_cycles(role_db: RoleDatabase) -> None:
    assert migrate.current_revision(role_db.urls["resolver_runtime"]) == migrate.head_revision()
    kinds = [
        FindingKind.VERIFIED_SUCCEEDED,
        FindingKind.VERIFIED_FAILED,
        FindingKind.MISSING,
        FindingKind.CONFLICT,
        FindingKind.UNSUPPORTED,
    ]
    with (
        PostgresStore(role_db.urls["resolver_executor"]) as executor_store,
        PostgresStore(role_db.urls["resolver_runtime"]) as runtime_store,
    ):
        leases = crash(executor_store, len(kinds))
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
            report = reconciler.run_cycle(now_ms=AFTER)
            assert report.claimed == len(ids) and report.accepted == set(ids)
            assert not report.rejected
            # A stopping replica hands its page back: the release path, as the runtime role.
            later = AFTER + 10 * 60_000
            stopping = reconciler.run_cycle(now_ms=later, should_stop=lambda: True)
            assert (stopping.claimed, stopping.released) == (1, 1)
            snapshot = runtime_store.backlog_snapshot(100, now_ms=later)
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
    with PostgresStore(role_db.urls["resolver_executor"]) as executor_store:
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
    with PostgresStore(role_db.urls["resolver_executor"]) as executor_store:
        client = executor_client(executor_store)
        spec = client.create_dispatch(new_spec())
        with pytest.raises(InvalidDispatch, match="test clock"):
            client.lease(spec.dispatch_id, now_ms=T0)
        assert client.lease(spec.dispatch_id).attempt == 1


PROTOCOL_CALLS = {
    "create": "SELECT * FROM resolver_dispatch_create('x', 'x', 'x', 'x', repeat('a', 64), 'x')",
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
    "role", ["resolver_executor", "resolver_evidence_reader", "resolver_retention"]
)
def test_only_the_runtime_role_executes_the_page_commit(role_db: RoleDatabase, role: str) -> None:
    # SECURITY INVOKER writes with the caller's own privileges, which these roles lack too;
    # EXECUTE is refused first, before any table is touched.
    with role_db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute("SELECT * FROM resolver_commit_page('[]'::json, NULL)")


@pytest.mark.parametrize(
    "helper", ["resolver_commit_wait_executions", "resolver_commit_wait_controls"]
)
def test_only_the_runtime_role_executes_the_commits_second_try(
    role_db: RoleDatabase, helper: str
) -> None:
    # The automatic commit (SECURITY INVOKER) calls these when a SKIP LOCKED pass skipped a
    # row: without EXECUTE, the runtime role's commit would fail on exactly those pages.
    statement = f"SELECT {helper}(ARRAY['nobody'])"
    with role_db.connect("resolver_runtime") as conn:
        row = conn.execute(statement).fetchone()  # type: ignore[call-overload]
        assert row == {helper: []}  # nothing to lock, nothing locked
    with role_db.connect("resolver_executor") as conn, pytest.raises(errors.InsufficientPrivilege):
        conn.execute(statement)  # type: ignore[call-overload]


def test_executor_role_writes_a_receipt_only_through_the_fenced_function(
    role_db: RoleDatabase,
) -> None:
    with PostgresStore(role_db.urls["resolver_executor"]) as executor_store:
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


def test_runtime_role_commits_a_manual_decision_but_cannot_grant_itself(
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
    now = AFTER + 60_000
    with (
        PostgresStore(role_db.urls["resolver_executor"]) as executor_store,
        PostgresStore(role_db.urls["resolver_runtime"]) as runtime_store,
    ):
        (lease,) = crash(executor_store, 1)
        decision = ManualDecision(
            lease.dispatch_id,
            Decision.ABANDON_UNKNOWN,
            f"op-{lease.dispatch_id}",
            lease.version,
            "operator_unsure",
        )
        principal = Principal("alice", now - 1_000, ("mfa",))
        result = ManualResolutionService(runtime_store).decide(principal, decision, now_ms=now)
        assert result.value == "committed"
    with role_db.connect("resolver_runtime") as runtime:
        runtime.execute("SET search_path = resolver")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            runtime.execute(
                "INSERT INTO recovery_role_bindings VALUES ('proj-1', 'mallory', 'approval.recover', 1)"
            )


def test_audit_verify_runs_as_the_runtime_role_and_needs_no_other(
    role_db: RoleDatabase,
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
    now = AFTER + 60_000
    with (
        PostgresStore(role_db.urls["resolver_executor"]) as executor_store,
        PostgresStore(role_db.urls["resolver_runtime"]) as runtime_store,
    ):
        (lease,) = crash(executor_store, 1)
        decision = ManualDecision(
            lease.dispatch_id,
            Decision.ABANDON_UNKNOWN,
            f"op-v-{lease.dispatch_id}",
            lease.version,
            "operator_unsure",
        )
        principal = Principal("alice", now - 1_000, ("mfa",))
        assert ManualResolutionService(runtime_store).decide(principal, decision, now_ms=now)
    verified = resolver_cli(role_db.urls["resolver_runtime"], "audit", "verify")
    assert verified.returncode == 0, verified.stderr
    assert "audit chain verified" in verified.stdout
    refused = resolver_cli(role_db.urls["resolver_evidence_reader"], "audit", "verify")
    assert refused.returncode != 0


def test_runtime_role_opens_watches_and_records_late_evidence(role_db: RoleDatabase) -> None:
    """A decision as the runtime role opens its watch (the trigger runs as the owner); the
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
    now = AFTER + 60_000
    with (
        PostgresStore(role_db.urls["resolver_executor"]) as executor_store,
        PostgresStore(role_db.urls["resolver_runtime"]) as runtime_store,
    ):
        (lease,) = crash(executor_store, 1)
        decision = ManualDecision(
            lease.dispatch_id, Decision.CONFIRM_FAILED, f"op-{lease.dispatch_id}",
            lease.version, "vendor_says_no",
        )  # fmt: skip
        principal = Principal("alice", now - 1_000, ("mfa",))
        result = ManualResolutionService(runtime_store).decide(principal, decision, now_ms=now)
        assert result.value == "committed"
        watcher = LateEvidenceWatcher(
            runtime_store,
            registry("test.action", ScriptedProvider(fixed(FindingKind.VERIFIED_SUCCEEDED))),
            LateEvidenceSettings(owner="r1"),
        )
        report = watcher.run_cycle(now_ms=now + 1)
        assert [r.contradicts for r in report.records] == [True]
    with role_db.connect("resolver_runtime") as runtime:
        runtime.execute("SET search_path = resolver")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            runtime.execute("UPDATE recovery_late_evidence SET agrees = true")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            runtime.execute("DELETE FROM recovery_late_watches")


# -- the retention role: the prune functions and nothing else -----------------------------------

DAY_MS = 86_400_000


def test_retention_role_prunes_through_the_command_and_only_settled_dispatches(
    role_db: RoleDatabase,
) -> None:
    with role_db.connect("resolver_executor") as conn:
        (row,) = conn.execute("SELECT resolver_now_ms(NULL) AS now").fetchall()
    old = row["now"] - 40 * DAY_MS
    # 40 days ago on the test clock, which only the schema owner may move.
    with PostgresStore(role_db.urls["resolver_migrator"]) as executor_store:
        settled, still_open = crash(executor_store, 2, old)
        executor = executor_client(executor_store)
        done = Completion(Outcome.SUCCEEDED, "ok", f"m-{settled.dispatch_id}")
        executor.complete(settled, done, now_ms=old + 100)
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
    "forge the prune flag and delete": (
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
