"""Migrations under a lock_timeout, on real PostgreSQL: DDL gives up instead of queueing.

A transaction holds the lock an executor's INSERT holds on approved_action_dispatches; the
upgrade from release 0.1.0 replaces that table's triggers and adds a column to it, and so needs
a conflicting lock. Each attempt must give up after lock_timeout (letting the transactions
queued behind it through), roll back, retry, and succeed once the lock is released.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
import structlog
from click.testing import CliRunner

from resolver.app.cli import main
from resolver.core.errors import MigrationFailed, MigrationLockTimeout, StorageUnavailable
from resolver.db import migrate
from tests.helpers.postgres import DatabaseFactory
from tests.helpers.releases import RELEASE_0_1_0_STAMP, load_release_0_1_0

FAST = migrate.MigrationPolicy(
    connect_timeout_seconds=5,
    lock_timeout_ms=200,
    attempts=1_000,
    retry_delay_seconds=0.05,
    retry_delay_max_seconds=0.05,
)


@contextmanager
def executor_insert_lock(url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An open transaction holding what an executor's INSERT into dispatches holds."""
    with psycopg.connect(url) as conn:
        conn.execute("LOCK TABLE approved_action_dispatches IN ROW EXCLUSIVE MODE")
        yield conn
        conn.rollback()


def waiting_migration_pids(url: str) -> set[int]:
    """Backends waiting for a lock on dispatches that this test did not start itself."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE NOT l.granted AND l.relation = 'approved_action_dispatches'::regclass"
            " AND a.query NOT ILIKE '%%LOCK TABLE%%'"
        ).fetchall()
    return {int(pid) for (pid,) in rows}


@pytest.fixture
def release_url(databases: DatabaseFactory) -> Iterator[str]:
    """A database as release 0.1.0 left it: the upgrade has every table to change."""
    url = databases.create_empty()
    load_release_0_1_0(url)
    yield url
    databases.drop(url)


def wait_until(condition: object, seconds: float = 30.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_a_held_lock_times_out_each_attempt_and_the_migration_succeeds_once_released(
    release_url: str,
) -> None:
    database_url = release_url
    failure: list[BaseException] = []

    def run() -> None:
        try:
            migrate.upgrade(database_url, policy=FAST)
        except BaseException as exc:
            failure.append(exc)

    with executor_insert_lock(database_url):
        migration = threading.Thread(target=run)
        migration.start()
        seen: set[int] = set()

        def retried() -> bool:
            seen.update(waiting_migration_pids(database_url))
            # NullPool: every attempt is a new backend, so two pids mean a retry.
            return len(seen) >= 2

        wait_until(retried)
        assert migrate.current_revision(database_url) == RELEASE_0_1_0_STAMP, (
            "nothing committed yet"
        )
        assert migration.is_alive()
    migration.join(30)
    assert not migration.is_alive() and not failure, failure
    assert migrate.current_revision(database_url) == migrate.head_revision()


def test_transactions_queued_behind_waiting_ddl_get_through_within_the_lock_timeout(
    release_url: str,
) -> None:
    """Without lock_timeout the second executor would wait behind the DDL, which waits behind
    the first: it fails here on its own 3 s lock_timeout while the first still holds."""
    database_url = release_url
    migration = threading.Thread(
        target=migrate.upgrade, args=(database_url,), kwargs={"policy": FAST}
    )
    with executor_insert_lock(database_url):
        migration.start()
        wait_until(lambda: bool(waiting_migration_pids(database_url)))
        with psycopg.connect(database_url) as second:
            second.execute("SET lock_timeout = '3s'")
            second.execute("LOCK TABLE approved_action_dispatches IN ROW EXCLUSIVE MODE")
            second.rollback()
    migration.join(30)
    assert migrate.current_revision(database_url) == migrate.head_revision()


def test_a_lock_held_through_every_attempt_fails_typed_and_changes_nothing(
    release_url: str,
) -> None:
    database_url = release_url
    policy = migrate.MigrationPolicy(lock_timeout_ms=100, attempts=3, retry_delay_seconds=0.01)
    with executor_insert_lock(database_url), pytest.raises(MigrationLockTimeout) as failed:
        migrate.upgrade(database_url, policy=policy)
    assert "3 attempts of 100 ms" in str(failed.value)
    assert migrate.current_revision(database_url) == RELEASE_0_1_0_STAMP


def test_a_server_that_never_answers_fails_within_the_connect_timeout() -> None:
    """A loopback socket that accepts TCP and never speaks: libpq would wait forever for its
    reply to the startup packet without connect_timeout."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        policy = migrate.MigrationPolicy(connect_timeout_seconds=1, attempts=1)
        failure: list[BaseException] = []

        def run() -> None:
            try:
                migrate.upgrade(f"postgresql://u@127.0.0.1:{port}/db", policy=policy)
            except BaseException as exc:
                failure.append(exc)

        attempt = threading.Thread(target=run, daemon=True)
        attempt.start()
        attempt.join(20)
        assert not attempt.is_alive(), "connect_timeout was not applied"
    assert len(failure) == 1 and isinstance(failure[0], StorageUnavailable), failure
    assert "timeout" in str(failure[0]).lower()


# -- `resolver migrate --grants` ------------------------------------------------------------


@pytest.fixture
def cli() -> Iterator[CliRunner]:
    """The command in process; it configures structlog (cached loggers) for the whole
    process, so put the defaults back for the tests that capture logs later."""
    try:
        yield CliRunner()
    finally:
        structlog.reset_defaults()


def test_grants_that_postgresql_refuses_fail_typed_and_change_nothing(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "grants.sql"
    script.write_text(
        "CREATE TABLE grants_probe (x int);\n"
        "GRANT SELECT ON grants_probe TO resolver_no_such_role_7f3a;\n"
    )
    monkeypatch.setattr(migrate, "GRANTS_FILE", script)
    with pytest.raises(MigrationFailed, match='role "resolver_no_such_role_7f3a" does not exist'):
        migrate.apply_grants(database_url)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT to_regclass('grants_probe')").fetchone() == (None,)


def test_migrate_grants_command_reports_a_refusal_in_one_line(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: CliRunner
) -> None:
    script = tmp_path / "grants.sql"
    script.write_text("GRANT SELECT ON alembic_version TO resolver_no_such_role_7f3a;\n")
    monkeypatch.setattr(migrate, "GRANTS_FILE", script)
    monkeypatch.setenv("RESOLVER_DATABASE_URL", database_url)
    result = cli.invoke(main, ["migrate", "--grants"])
    assert result.exit_code == 1, result.output
    assert f"schema at revision {migrate.head_revision()}" in result.stdout
    assert "error: grants: PostgreSQL refused it" in result.stderr
    assert "Traceback" not in result.output


def test_migrate_sql_grants_prints_the_packaged_grants_without_a_database(cli: CliRunner) -> None:
    result = cli.invoke(main, ["migrate", "--sql", "--grants"])
    assert result.exit_code == 0, result.output
    assert migrate.grants_sql() in result.stdout
    assert "GRANT SELECT ON alembic_version TO resolver_runtime" in result.stdout


def test_migrate_sql_from_prints_the_upgrade_the_docs_show(cli: CliRunner) -> None:
    # docs/deployment.md and the CHANGELOG's Upgrading section: a 0.2.0 database's script.
    result = cli.invoke(main, ["migrate", "--sql", "--from", "0002_schema_0_2_0", "--grants"])
    assert result.exit_code == 0, result.output
    script = migrate.upgrade_sql(from_revision="0002_schema_0_2_0")
    assert result.stdout == f"{script}\n{migrate.grants_sql()}\n"
    assert "version_num = ANY (ARRAY['0002_schema_0_2_0'])" in script  # the guard


def test_grants_do_not_combine_with_a_downgrade(cli: CliRunner) -> None:
    result = cli.invoke(main, ["migrate", "--grants", "--downgrade", "base"])
    assert result.exit_code == 2
    assert "--grants applies to an upgraded schema" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "0002_schema_0_2_0"], "--from says where a printed script starts"),
        (["--sql", "--downgrade", "base"], "--sql prints an upgrade; drop it with --downgrade"),
    ],
)
def test_a_printed_script_s_options_go_with_it_only(
    cli: CliRunner, args: list[str], message: str
) -> None:
    result = cli.invoke(main, ["migrate", *args])
    assert result.exit_code == 2
    assert message in result.output
