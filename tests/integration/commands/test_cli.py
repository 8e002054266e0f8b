"""The `resolver` command as an operator meets it: real processes, real PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import structlog

from tests.helpers.cli import RESOLVER, run
from tests.helpers.database import SQL
from tests.helpers.releases import load_release_0_1_0


@pytest.fixture
def env(database_url: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    # No start-up wait: these tests want `run` to answer an unusable database at once.
    return {
        **clean,
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_CADENCE_SECONDS": "0.05",
        "RESOLVER_STARTUP_TIMEOUT_SECONDS": "0",
    }


SEED = """
SELECT set_config('resolver.import_history', 'on', true);
INSERT INTO approved_action_dispatches (dispatch_id, approval_request_id, project_id, action_type,
    action_digest, idempotency_key, schema_version)
VALUES ('crashed-1', 'ar-1', 'p', 'vendor.unknown', repeat('a', 64), 'k-1', 1),
       ('crashed-2', 'ar-2', 'p', 'vendor.unknown', repeat('b', 64), 'k-2', 1),
       ('alive-1',   'ar-3', 'p', 'vendor.unknown', repeat('c', 64), 'k-3', 1);
INSERT INTO approved_action_executions (dispatch_id, state, owner, token, version, attempt,
    lease_expires_at_ms, started_at_ms)
SELECT dispatch_id, 'executing', 'dead-executor', gen_random_uuid(), 2, 1,
       CASE WHEN dispatch_id LIKE 'alive%' THEN resolver_now_ms(NULL) + 3600000
            ELSE resolver_now_ms(NULL) - 1000 END,
       resolver_now_ms(NULL) - 5000
FROM approved_action_dispatches;
INSERT INTO approved_action_recovery_controls (dispatch_id, status, execution_version,
    next_scan_at_ms, armed_at_ms)
SELECT dispatch_id, 'armed', 2, lease_expires_at_ms, started_at_ms FROM approved_action_executions;
"""


def test_plain_sql_seed_then_run_once_moves_unsupported_to_manual(
    env: dict[str, str], sql: SQL
) -> None:
    migrated = run(env, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert "schema at revision" in migrated.stdout
    sql.conn.execute(SEED)
    alive_before = sql.execution("alive-1")
    status = run(env, "status", "--json")
    assert json.loads(status.stdout)["due"] == 2

    once = run(env, "run", "--once")
    assert once.returncode == 0, once.stderr
    assert {sql.control(d)["status"] for d in ("crashed-1", "crashed-2")} == {"manual"}
    assert sql.control("alive-1")["status"] == "armed"
    assert sql.execution("alive-1") == alive_before
    assert {sql.execution(d)["state"] for d in ("crashed-1", "crashed-2")} == {"executing"}

    doc = json.loads(run(env, "status", "--json").stdout)
    assert doc["controls"] == {"armed": 1, "manual": 2}
    assert doc["queues"] == {"due": 0, "waiting": 1, "manual": 2}
    assert doc["due"] == 0 and doc["oldest_manual_age_seconds"] >= 0
    logs = [json.loads(line) for line in once.stderr.splitlines() if line.startswith("{")]
    assert {e["dispatch_id"] for e in logs if e["event"] == "recovery_outcome"} == {
        "crashed-1",
        "crashed-2",
    }


def test_migrate_sql_prints_ddl_without_a_database(env: dict[str, str]) -> None:
    env = {**env, "RESOLVER_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    done = run(env, "migrate", "--sql")
    assert done.returncode == 0
    assert "CREATE TABLE approved_action_executions" in done.stdout


def test_run_refuses_an_unmigrated_database(env: dict[str, str], databases) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    admin = os.environ.get("RESOLVER_TEST_DATABASE_URL")
    url = env["RESOLVER_DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE alembic_version")
    done = run(env, "run", "--once")
    assert done.returncode == 3
    assert "run `resolver migrate` first" in done.stderr
    assert "Traceback" not in done.stderr
    del admin


def test_dead_database_is_one_clear_line_and_exit_3(env: dict[str, str]) -> None:
    env = {
        **env,
        "RESOLVER_DATABASE_URL": "postgresql://resolver:s3cret@127.0.0.1:1/app",
        "RESOLVER_CONNECT_TIMEOUT_SECONDS": "1",
    }
    for args in (("run", "--once"), ("status",), ("migrate",)):
        done = run(env, *args)
        assert done.returncode == 3, (args, done.stderr)
        assert done.stderr.startswith("database error:")
        assert "Traceback" not in done.stderr
        assert "s3cret" not in done.stderr  # the password never reaches the logs


def test_bad_config_is_exit_2_and_names_the_variable(env: dict[str, str]) -> None:
    done = run({**env, "RESOLVER_PAGE_SIZE": "65"}, "run", "--once")
    assert done.returncode == 2
    assert "RESOLVER_PAGE_SIZE: must be between 1 and 64" in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_provider_in_config_file_is_exit_2(env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "providers.yaml"
    config.write_text("action_types:\n  x.y: {provider: nope}\n")
    done = run({**env, "RESOLVER_CONFIG": str(config)}, "run", "--once")
    assert done.returncode == 2
    assert "action_types.x.y.provider: 'nope'" in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_loop_with_exit_0(env: dict[str, str], sig: signal.Signals) -> None:
    assert run(env, "migrate").returncode == 0
    proc = subprocess.Popen(
        [*RESOLVER, "run"],
        env={**env, "RESOLVER_CADENCE_SECONDS": "30"},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # the process tells us when it is up: no sleeping
        if "resolver_started" in line:
            break
    proc.send_signal(sig)
    assert proc.wait(timeout=10) == 0
    rest = proc.stderr.read()
    assert "resolver_stopped" in rest


def test_rolling_upgrade_schema_states(env: dict[str, str], sql: SQL, databases) -> None:  # type: ignore[no-untyped-def]
    # Behind (the previous release's schema): refuse and say how to fix; then migrate.
    old = databases.create_empty()
    load_release_0_1_0(old)
    behind = run({**env, "RESOLVER_DATABASE_URL": old}, "run", "--once")
    assert behind.returncode == 3 and "run `resolver migrate` first" in behind.stderr
    migrated = run({**env, "RESOLVER_DATABASE_URL": old}, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert run({**env, "RESOLVER_DATABASE_URL": old}, "run", "--once").returncode == 0
    databases.drop(old)
    # Ahead (a revision a newer release wrote): keep working, with a warning.
    sql.all("UPDATE alembic_version SET version_num = '9999_from_a_newer_release'")
    ahead = run(env, "run", "--once")
    assert ahead.returncode == 0, ahead.stderr
    assert "schema_ahead" in ahead.stderr


def test_in_process_run_leaves_the_signal_mask_as_it_found_it(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A caller that embeds the command (a test runner, a supervisor) must not be left with
    # SIGTERM blocked: every process it starts afterwards would inherit the mask.
    from click.testing import CliRunner

    from resolver.app.cli import main

    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # The early exit is the path that leaked: the mask was blocked before the settings
    # were read. (A full in-process cycle would also cache the loggers of the modules it
    # touches under the CLI's log configuration, which later tests capture.)
    monkeypatch.setenv("RESOLVER_PAGE_SIZE", "65")
    try:
        assert CliRunner().invoke(main, ["run", "--once"]).exit_code == 2
    finally:
        # The command configured structlog for the process; later tests capture its logs.
        structlog.reset_defaults()
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before
