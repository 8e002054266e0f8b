"""The migrations produce exactly the declared schema, downgrade cleanly, and guard facts."""

from __future__ import annotations

import psycopg
import pytest

from resolver.db import migrate
from tests.helpers.catalog import catalog, catalog_diff
from tests.helpers.database import SQL, new_spec
from tests.helpers.postgres import DatabaseFactory

# The facts: rows written once and never changed or deleted but by retention's prune.
IMMUTABLE_TABLES: tuple[str, ...] = (
    "approved_action_dispatches",
    "approved_action_recovery_resolutions",
    "recovery_authorizations",
    "action_receipts",
    "package_install_records",
    "package_install_targets",
    "package_commit_markers",
    "recovery_audit_chain",
    "recovery_late_evidence",
    # The test-support distribution's ledger provider: its own migration, its own trigger.
    "ledger_entries",
    "recovery_outcomes",
)


def test_upgrade_is_idempotent_and_downgrade_round_trips(databases: DatabaseFactory) -> None:
    url = databases.create()
    assert migrate.current_revision(url) == migrate.head_revision()
    before = catalog(url)
    migrate.upgrade(url)  # again: a no-op
    migrate.downgrade(url, "base")
    assert migrate.current_revision(url) is None
    with psycopg.connect(url) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
        ).fetchone()
    assert left == (0,)
    migrate.upgrade(url)
    diff = catalog_diff(before, catalog(url), ("upgraded", "downgraded and upgraded again"))
    assert diff == "", diff
    databases.drop(url)


def test_offline_sql_prints_the_ddl() -> None:
    ddl = migrate.upgrade_sql()
    assert "CREATE TABLE approved_action_recovery_controls" in ddl
    assert "CREATE INDEX ix_recovery_controls_due" in ddl
    assert "WHERE (status = 'armed'::text)" in ddl
    # The functions before the table migrations, the triggers after them, in one transaction.
    assert ddl.index("FUNCTION resolver_execution_start(") < ddl.index("CREATE TABLE approved_")
    assert ddl.index("CREATE TABLE approved_") < ddl.index("CREATE TRIGGER approved_action_")
    assert ddl.startswith("BEGIN;") and ddl.rstrip().endswith("COMMIT;")


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE approved_action_dispatches SET project_id = 'other'",
        "DELETE FROM approved_action_dispatches",
    ],
)
def test_dispatches_are_immutable(sql: SQL, world, statement: str) -> None:  # type: ignore[no-untyped-def]
    world.started()
    with pytest.raises(psycopg.errors.RestrictViolation, match="insert-only"):
        sql.all(statement)


def test_automatic_resolution_without_verified_evidence_is_refused_by_the_schema(
    sql: SQL, world
) -> None:  # type: ignore[no-untyped-def]
    lease = world.started()
    with pytest.raises(psycopg.errors.CheckViolation, match="automatic_is_verified"):
        sql.all(
            "INSERT INTO approved_action_recovery_resolutions (dispatch_id, mutation_id, source,"
            " outcome, finding, expected_execution_version, resolved_at_ms)"
            " VALUES (%s, 'm-1', 'automatic', 'succeeded', 'missing', 2, 0)",
            lease.dispatch_id,
        )


def test_digest_shape_is_enforced(sql: SQL) -> None:
    spec = new_spec()
    with pytest.raises(psycopg.errors.CheckViolation):
        sql.all(
            "INSERT INTO approved_action_dispatches (dispatch_id, approval_request_id, project_id,"
            " action_type, action_digest, idempotency_key, schema_version)"
            " VALUES (%s, 'a', 'p', 't', 'NOT-HEX', %s, 1)",
            spec.dispatch_id,
            spec.idempotency_key,
        )


@pytest.mark.parametrize("table", IMMUTABLE_TABLES)
def test_every_fact_table_has_its_insert_only_trigger(sql: SQL, table: str) -> None:
    rows = sql.all(
        "SELECT t.tgname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid"
        " WHERE t.tgrelid = %s::regclass AND p.proname = 'resolver_reject_mutation'"
        " AND NOT t.tgisinternal",
        table,
    )
    assert rows, f"{table} accepts UPDATE/DELETE"


def test_the_insert_only_tables_are_the_facts_listed_here(sql: SQL) -> None:
    rows = sql.all(
        "SELECT DISTINCT t.tgrelid::regclass::text AS name FROM pg_trigger t"
        " JOIN pg_proc p ON p.oid = t.tgfoid"
        " WHERE p.proname = 'resolver_reject_mutation' AND NOT t.tgisinternal"
    )
    assert {row["name"] for row in rows} == set(IMMUTABLE_TABLES)


def test_revision_graph_read_from_the_files_is_alembics() -> None:
    from resolver.db import migrate

    assert migrate.revision_graph() == migrate._alembic_graph()
    assert migrate.head_revision() == migrate._scripts().get_current_head()


def test_resolver_run_start_up_imports_no_alembic_sqlalchemy_or_web_stack() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, resolver.app.cli, resolver.db.migrate as m; m.head_revision(); "
        "print(sorted({n.split('.')[0] for n in sys.modules} & "
        "{'alembic', 'sqlalchemy', 'fastapi', 'starlette', 'uvicorn', 'jwt'}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
