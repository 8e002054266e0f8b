"""Bad input at the command line, as a newcomer or a broken deployment gives it: real
`resolver` processes, each failure one line with its documented exit code, no traceback,
no password. Plus start-up while the database is away: `resolver run` waits, not crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql as pgsql

from resolver.db import migrate
from tests.helpers.cli import RESOLVER
from tests.helpers.signing import TEST_KEY_PEM, signing_env
from tests.helpers.telemetry import free_port, wait_for

PASSWORD = "hunter2-pw"
DEAD = "127.0.0.1:1"  # nothing listens on port 1: connection refused at once


def run(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RESOLVER, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}


@dataclass(frozen=True)
class Case:
    name: str
    env: dict[str, str]
    args: tuple[str, ...]
    exit_code: int
    message: str  # the one line on stderr starts with this...
    contains: str = ""  # ...and holds this
    migrated: bool = True  # RESOLVER_DATABASE_URL points at a migrated database unless set in env
    files: dict[str, str] = field(default_factory=dict)  # written under tmp_path, {tmp} in env


DEAD_URL = f"postgresql://resolver:{PASSWORD}@{DEAD}/app"
QUICK = {"RESOLVER_CONNECT_TIMEOUT_SECONDS": "1", "RESOLVER_STARTUP_TIMEOUT_SECONDS": "0"}
CASES = [
    Case(
        "garbage url / run",
        {"RESOLVER_DATABASE_URL": "garbage"},
        ("run", "--once"),
        2,
        "configuration error: invalid configuration: RESOLVER_DATABASE_URL: not a PostgreSQL URL or key=value connection string",
    ),
    Case(
        "garbage url / migrate",
        {"RESOLVER_DATABASE_URL": "garbage"},
        ("migrate",),
        2,
        "configuration error: invalid configuration: RESOLVER_DATABASE_URL: not a PostgreSQL",
    ),
    Case(
        "garbage url / status",
        {"RESOLVER_DATABASE_URL": "garbage"},
        ("status",),
        2,
        "configuration error: invalid configuration: RESOLVER_DATABASE_URL: not a PostgreSQL",
    ),
    Case(
        "mysql url",
        {"RESOLVER_DATABASE_URL": f"mysql://app:{PASSWORD}@db/app"},
        ("run", "--once"),
        2,
        "configuration error: invalid configuration: RESOLVER_DATABASE_URL: mysql:// is not a PostgreSQL connection string",
        "use postgresql://",
    ),
    Case(
        "sqlite url",
        {"RESOLVER_DATABASE_URL": "sqlite:///x.db"},
        ("migrate",),
        2,
        "configuration error: invalid configuration: RESOLVER_DATABASE_URL: sqlite:// is not a PostgreSQL",
    ),
    Case(
        "bad port",
        {"RESOLVER_DATABASE_URL": f"postgresql://u:{PASSWORD}@h:99999/d"},
        ("status",),
        2,
        "configuration error: invalid configuration: RESOLVER_DATABASE_URL: port '99999' is not a TCP port",
    ),
    Case(
        "unknown key=value option",
        {"RESOLVER_DATABASE_URL": f"host=h passwrd={PASSWORD}"},
        ("status",),
        2,
        "configuration error: invalid configuration: RESOLVER_DATABASE_URL: not a PostgreSQL",
    ),
    Case(
        "unset url",
        {"RESOLVER_DATABASE_URL": ""},
        ("status",),
        2,
        "configuration error: RESOLVER_DATABASE_URL is not set",
    ),
    Case(
        "dead db url form / status",
        {"RESOLVER_DATABASE_URL": DEAD_URL, **QUICK},
        ("status",),
        3,
        "database error: cannot reach",
        "password=***",
    ),
    Case(
        "dead db key=value / migrate",
        {
            "RESOLVER_DATABASE_URL": f"host=127.0.0.1 port=1 user=u password={PASSWORD} dbname=app",
            **QUICK,
        },
        ("migrate",),
        3,
        "database error: cannot reach",
        "password=***",
    ),
    Case(
        "dead db ?password= / run",
        {"RESOLVER_DATABASE_URL": f"postgresql://u@{DEAD}/app?password={PASSWORD}", **QUICK},
        ("run", "--once"),
        3,
        "database error: cannot reach",
        "password=***",
    ),
    Case(
        "log level LOUD",
        {"RESOLVER_LOG_LEVEL": "LOUD"},
        ("status",),
        2,
        "configuration error: RESOLVER_LOG_LEVEL='LOUD' is not a log level; use one of DEBUG, INFO",
    ),
    Case(
        "status before migrate",
        {},
        ("status",),
        3,
        "database error: schema is at revision none",
        "run `resolver migrate` first",
        migrated=False,
    ),
    Case(
        "run before migrate",
        {"RESOLVER_STARTUP_TIMEOUT_SECONDS": "0"},
        ("run", "--once"),
        3,
        "database error: schema is at revision none",
        "run `resolver migrate` first",
        migrated=False,
    ),
    Case(
        "api before migrate",
        {
            "RESOLVER_OIDC_ISSUER": "i",
            "RESOLVER_OIDC_AUDIENCE": "a",
            "RESOLVER_OIDC_JWKS_FILE": "{tmp}/jwks.json",
            "RESOLVER_AUDIT_SIGNING_KEY_FILE": "{tmp}/signing.pem",
            "RESOLVER_AUDIT_SIGNING_KID": "audit-1",
            "RESOLVER_STARTUP_TIMEOUT_SECONDS": "0",
            "RESOLVER_API_HOST": "127.0.0.1",
            "RESOLVER_API_PORT": str(free_port()),
        },
        ("api",),
        3,
        "database error: schema is at revision none",
        migrated=False,
        files={
            "jwks.json": '{"keys": [{"kty": "oct", "kid": "k", "k": "AA"}]}',
            "signing.pem": TEST_KEY_PEM,
        },
    ),
    Case(
        "api without its fact-signing key",
        {
            "RESOLVER_OIDC_ISSUER": "i",
            "RESOLVER_OIDC_AUDIENCE": "a",
            "RESOLVER_OIDC_JWKS_FILE": "{tmp}/jwks.json",
        },
        ("api",),
        2,
        "configuration error: the manual-resolution API signs each authorization fact and needs"
        " RESOLVER_AUDIT_SIGNING_KEY_FILE",
        files={"jwks.json": '{"keys": [{"kty": "oct", "kid": "k", "k": "AA"}]}'},
    ),
    Case(
        "api with a signing key that is not Ed25519",
        {
            "RESOLVER_OIDC_ISSUER": "i",
            "RESOLVER_OIDC_AUDIENCE": "a",
            "RESOLVER_OIDC_JWKS_FILE": "{tmp}/jwks.json",
            "RESOLVER_AUDIT_SIGNING_KEY_FILE": "{tmp}/signing.pem",
            "RESOLVER_AUDIT_SIGNING_KID": "audit-1",
        },
        ("api",),
        2,
        "configuration error: RESOLVER_AUDIT_SIGNING_KEY_FILE:",
        files={
            "jwks.json": '{"keys": [{"kty": "oct", "kid": "k", "k": "AA"}]}',
            "signing.pem": "not a key",
        },
    ),
    Case(
        "api without oidc",
        {},
        ("api",),
        2,
        "configuration error: the manual-resolution API verifies OIDC tokens and needs RESOLVER_OIDC_ISSUER",
    ),
    Case(
        "api with a broken jwks",
        {
            "RESOLVER_OIDC_ISSUER": "i",
            "RESOLVER_OIDC_AUDIENCE": "a",
            "RESOLVER_OIDC_JWKS_FILE": "{tmp}/jwks.json",
        },
        ("api",),
        2,
        "configuration error: RESOLVER_OIDC_JWKS_FILE:",
        files={"jwks.json": "{not json"},
    ),
    Case(
        "unknown revision",
        {},
        ("migrate", "--revision", "bogus"),
        2,
        "configuration error: unknown revision 'bogus'",
        "this release knows 0001_schema_0_1_0",
    ),
    Case(
        "unknown downgrade revision",
        {},
        ("migrate", "--downgrade", "bogus"),
        2,
        "configuration error: unknown revision 'bogus'",
    ),
    Case(
        "unknown revision offline",
        {},
        ("migrate", "--sql", "--revision", "bogus"),
        2,
        "configuration error: unknown revision 'bogus'",
    ),
    Case(
        "unknown start of a printed upgrade",
        {},
        ("migrate", "--sql", "--from", "bogus"),
        2,
        "configuration error: unknown revision 'bogus'",
    ),
    Case(
        "a printed upgrade from above its end",
        {},
        ("migrate", "--sql", "--from", "0002_schema_0_2_0", "--revision", "0001_schema_0_1_0"),
        2,
        "configuration error: 0002_schema_0_2_0 is not below 0001_schema_0_1_0",
    ),
    Case(
        "api port out of range",
        {"RESOLVER_API_PORT": "99999"},
        ("api",),
        2,
        "configuration error: invalid configuration: RESOLVER_API_PORT:",
    ),
    Case(
        "page size not a number",
        {"RESOLVER_PAGE_SIZE": "lots"},
        ("run", "--once"),
        2,
        "configuration error: invalid configuration: RESOLVER_PAGE_SIZE:",
        "(got 'lots')",
    ),
    Case(
        "negative start-up limit",
        {"RESOLVER_STARTUP_TIMEOUT_SECONDS": "-1"},
        ("run", "--once"),
        2,
        "configuration error: invalid configuration: RESOLVER_STARTUP_TIMEOUT_SECONDS:",
    ),
    Case(
        "config file missing",
        {"RESOLVER_CONFIG": "{tmp}/nope.yaml"},
        ("run", "--once"),
        2,
        "configuration error: RESOLVER_CONFIG: cannot read",
    ),
    Case(
        "config file not YAML",
        {"RESOLVER_CONFIG": "{tmp}/bad.yaml"},
        ("run", "--once"),
        2,
        "configuration error: RESOLVER_CONFIG:",
        "is not valid YAML",
        files={"bad.yaml": "action_types: [unclosed\n"},
    ),
    Case(
        "config file wrong shape",
        {"RESOLVER_CONFIG": "{tmp}/shape.yaml"},
        ("run", "--once"),
        2,
        "configuration error: RESOLVER_CONFIG:",
        "must hold one top-level key, action_types",
        files={"shape.yaml": "providers: {}\n"},
    ),
    Case(
        "config file unknown provider",
        {"RESOLVER_CONFIG": "{tmp}/p.yaml"},
        ("run", "--once"),
        2,
        "configuration error:",
        "'nope'",
        files={"p.yaml": "action_types:\n  x.y: {provider: nope}\n"},
    ),
    Case(
        "provider dsn with a password in key=value",
        {"RESOLVER_CONFIG": "{tmp}/p.yaml"},
        ("run", "--once"),
        2,
        "configuration error:",
        "holds a password",
        files={
            "p.yaml": f"action_types:\n  x.y: {{provider: package_install, database_url: 'host=db password={PASSWORD}'}}\n"
        },
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line_and_its_exit_code(case: Case, databases, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for name, text in case.files.items():
        (tmp_path / name).write_text(text)
    url = databases.create()
    try:
        if not case.migrated:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        env = {**base_env(), "RESOLVER_DATABASE_URL": url}
        env.update({k: v.format(tmp=tmp_path) for k, v in case.env.items()})
        if not env["RESOLVER_DATABASE_URL"]:
            del env["RESOLVER_DATABASE_URL"]
        done = run(env, *case.args)
    finally:
        databases.drop(url)
    assert done.returncode == case.exit_code, done.stderr
    # JSON log lines may precede it; the human answer is exactly one other line.
    human = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("{")]
    assert len(human) == 1, done.stderr
    assert human[0].startswith(case.message), human[0]
    assert case.contains in human[0]
    assert (
        "Traceback" not in done.stderr
        and PASSWORD not in done.stderr
        and PASSWORD not in done.stdout
    )


def test_unknown_variables_are_warned_with_the_closest_name(database_url: str) -> None:
    env = {
        **base_env(),
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_PAGESIZE": "8",
        "RESOLVER_DATABSE_URL": "x",
        "RESOLVER_ZZZ": "1",
        "RESOLVER_TEST_ANYTHING": "1",
    }
    done = run(env, "status", "--json")
    assert done.returncode == 0, done.stderr
    warnings = {
        e["name"]: e
        for e in map(json.loads, done.stderr.splitlines())
        if e["event"] == "unknown_environment_variable"
    }
    assert set(warnings) == {
        "RESOLVER_PAGESIZE",
        "RESOLVER_DATABSE_URL",
        "RESOLVER_ZZZ",
    }  # not RESOLVER_TEST_*
    assert warnings["RESOLVER_PAGESIZE"]["did_you_mean"] == "RESOLVER_PAGE_SIZE"
    assert warnings["RESOLVER_DATABSE_URL"]["did_you_mean"] == "RESOLVER_DATABASE_URL"
    assert warnings["RESOLVER_ZZZ"]["did_you_mean"] is None
    assert json.loads(done.stdout)["due"] == 0  # a warning, not a refusal


def test_usage_errors_are_exit_2() -> None:
    done = run(base_env(), "frobnicate")
    assert done.returncode == 2 and "No such command 'frobnicate'" in done.stderr


class Output:
    """Collects a process's stderr lines on a thread; waits on them with a bound."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._proc = proc
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self.lines.append(line)

    def events(self, name: str) -> list[dict[str, object]]:
        return [
            e
            for e in (json.loads(x) for x in list(self.lines) if x.startswith("{"))
            if e.get("event") == name
        ]

    def text(self) -> str:
        self._thread.join(10)
        return "".join(self.lines)


def probe(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code


def test_run_waits_for_the_database_then_starts(database_url: str, pg_server: str) -> None:
    """A pod that starts before its database: endpoints up, not ready, alive; then the
    database appears and is migrated, and the same process starts working."""
    name = urlsplit(database_url).path.lstrip("/")
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP DATABASE {} WITH (FORCE)").format(pgsql.Identifier(name)))
    port = free_port()
    env = {
        **base_env(),
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_HTTP_HOST": "127.0.0.1",
        "RESOLVER_HTTP_PORT": str(port),
        "RESOLVER_CADENCE_SECONDS": "0.05",
        "RESOLVER_STORAGE_RETRY_MAX_SECONDS": "0.5",
        "RESOLVER_STARTUP_TIMEOUT_SECONDS": "60",
        "RESOLVER_CONNECT_TIMEOUT_SECONDS": "1",
    }
    proc = subprocess.Popen([*RESOLVER, "run"], env=env, stderr=subprocess.PIPE, text=True)
    out = Output(proc)
    try:
        wait_for(
            "a database_not_ready retry",
            lambda: out.events("database_not_ready") or None,
            timeout_seconds=30,
        )
        assert probe(port, "/readyz") == 503
        assert probe(port, "/healthz") == 200
        assert proc.poll() is None  # waiting, not exited
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))
        migrate.upgrade(database_url)
        wait_for(
            "resolver_started", lambda: out.events("resolver_started") or None, timeout_seconds=30
        )
        wait_for("ready", lambda: probe(port, "/readyz") == 200 or None, timeout_seconds=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0, out.text()
    assert "Traceback" not in out.text()


def test_run_gives_up_after_the_start_up_limit_with_exit_3() -> None:
    env = {
        **base_env(),
        "RESOLVER_DATABASE_URL": DEAD_URL,
        "RESOLVER_STARTUP_TIMEOUT_SECONDS": "1.5",
        "RESOLVER_STORAGE_RETRY_MAX_SECONDS": "0.5",
    }
    done = run(env, "run")
    assert done.returncode == 3, done.stderr
    retries = [
        json.loads(x)
        for x in done.stderr.splitlines()
        if x.startswith("{") and "database_not_ready" in x
    ]
    assert len(retries) >= 2 and all(r["error"] == "StorageUnavailable" for r in retries)
    assert done.stderr.splitlines()[-1].startswith("database error: cannot reach")
    assert PASSWORD not in done.stderr


def test_a_stop_signal_ends_the_wait_cleanly() -> None:
    env = {
        **base_env(),
        "RESOLVER_DATABASE_URL": DEAD_URL,
        "RESOLVER_STARTUP_TIMEOUT_SECONDS": "600",
    }
    proc = subprocess.Popen([*RESOLVER, "run"], env=env, stderr=subprocess.PIPE, text=True)
    out = Output(proc)
    try:
        wait_for(
            "a database_not_ready retry",
            lambda: out.events("database_not_ready") or None,
            timeout_seconds=30,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=15)
    assert code == 0, out.text()
    assert "Traceback" not in out.text()


JWKS = '{"keys": [{"kty": "oct", "kid": "k", "k": "AA"}]}'


def api_env(tmp_path: Path, database_url: str, port: int, limit: str) -> dict[str, str]:
    (tmp_path / "jwks.json").write_text(JWKS, encoding="utf-8")
    return {
        **base_env(),
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_API_HOST": "127.0.0.1",
        "RESOLVER_API_PORT": str(port),
        "RESOLVER_OIDC_ISSUER": "i",
        "RESOLVER_OIDC_AUDIENCE": "a",
        "RESOLVER_OIDC_JWKS_FILE": str(tmp_path / "jwks.json"),
        **signing_env(tmp_path),
        "RESOLVER_STORAGE_RETRY_MAX_SECONDS": "0.5",
        "RESOLVER_STARTUP_TIMEOUT_SECONDS": limit,
        "RESOLVER_CONNECT_TIMEOUT_SECONDS": "1",
    }


def test_api_serves_while_its_database_is_away_then_becomes_ready(
    database_url: str, pg_server: str, tmp_path: Path
) -> None:
    """As `resolver run`: an API pod that starts before its database answers its liveness
    probe and says not ready (no restart loop), then is ready once the schema is there."""
    name = urlsplit(database_url).path.lstrip("/")
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP DATABASE {} WITH (FORCE)").format(pgsql.Identifier(name)))
    port = free_port()
    proc = subprocess.Popen(
        [*RESOLVER, "api"],
        env=api_env(tmp_path, database_url, port, "60"),
        stderr=subprocess.PIPE,
        text=True,
    )
    out = Output(proc)
    try:
        wait_for(
            "a database_not_ready retry",
            lambda: out.events("database_not_ready") or None,
            timeout_seconds=30,
        )
        wait_for("the API port", lambda: probe_or_none(port, "/healthz"), timeout_seconds=30)
        assert probe(port, "/healthz") == 200
        assert probe(port, "/readyz") == 503
        assert proc.poll() is None  # serving and waiting, not exited
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))
        migrate.upgrade(database_url)
        wait_for("ready", lambda: probe(port, "/readyz") == 200 or None, timeout_seconds=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the stop signal it caught.
    assert code == -signal.SIGTERM, out.text()
    assert out.events("Application shutdown complete.")
    assert "Traceback" not in out.text()


def test_api_gives_up_after_the_start_up_limit_with_exit_3(tmp_path: Path) -> None:
    done = run(api_env(tmp_path, DEAD_URL, free_port(), "1.5"), "api")
    assert done.returncode == 3, done.stderr
    retries = [
        json.loads(x)
        for x in done.stderr.splitlines()
        if x.startswith("{") and "database_not_ready" in x
    ]
    assert len(retries) >= 2 and all(r["error"] == "StorageUnavailable" for r in retries)
    assert done.stderr.splitlines()[-1].startswith("database error: cannot reach")
    assert PASSWORD not in done.stderr


def probe_or_none(port: int, path: str) -> int | None:
    """The status, or None while nothing listens on the port yet."""
    try:
        return probe(port, path)
    except urllib.error.URLError:
        return None
