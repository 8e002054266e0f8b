"""Database roles for the deploy tests: a database set up by deploy/sql/roles.sql and
`resolver migrate --grants`, a URL per role, and executions crashed through the protocol."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from resolver.core.domain import ExecutionLease
from resolver.db import migrate
from resolver.executor.client import ExecutionClient
from tests.helpers.database import EXEC_LEASE_MS, T0, new_spec
from tests.helpers.postgres import with_database
from tests.helpers.stores import Storage

ROOT = Path(__file__).resolve().parents[2]
ROLES_SQL = ROOT / "deploy" / "sql" / "roles.sql"
GRANTS_SQL = migrate.GRANTS_FILE
ROLES = (
    "resolver_migrator",
    "resolver_runtime",
    "resolver_executor",
    "resolver_evidence_reader",
    "resolver_retention",
    "resolver_policy_writer",
    "resolver_api",
    "resolver_outcome_reader",
)
AFTER = T0 + EXEC_LEASE_MS
# Roles are cluster-wide: concurrent runs of this module on one server take turns.
LOCK_KEY = 0x7265736F6C766572


@dataclass(frozen=True)
class RoleDatabase:
    """A fresh database set up by the two SQL files, and a URL per role."""

    admin: str
    urls: dict[str, str]

    def connect(self, role: str) -> psycopg.Connection[dict[str, Any]]:
        return psycopg.connect(self.urls[role], autocommit=True, row_factory=dict_row)

    def admin_rows(self, query: str) -> list[dict[str, Any]]:
        with psycopg.connect(self.admin, autocommit=True, row_factory=dict_row) as conn:
            conn.execute("SET search_path = resolver")
            return conn.execute(query).fetchall()  # type: ignore[arg-type]


def as_role(url: str, role: str, password: str | None) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    user = f"{role}:{quote(password, safe='')}" if password else role
    return urlunsplit((parts.scheme, f"{user}@{host}", parts.path, parts.query, parts.fragment))


def run_sql_file(url: str, path: Path) -> None:
    """The whole file in one simple-query round trip, as `psql -f` with ON_ERROR_STOP would."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(path.read_text(encoding="utf-8"))  # type: ignore[call-overload]


def _set_up(admin: str, existing: set[str]) -> RoleDatabase:
    run_sql_file(admin, ROLES_SQL)
    passwords: dict[str, str | None] = {}
    with psycopg.connect(admin, autocommit=True) as conn:
        for role in ROLES:
            # Only roles this test created get a password: never touch a pre-existing role's.
            passwords[role] = None if role in existing else secrets.token_urlsafe(16)
            if passwords[role]:
                conn.execute(
                    sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                        sql.Identifier(role), sql.Literal(passwords[role])
                    )
                )
    urls = {role: as_role(admin, role, passwords[role]) for role in ROLES}
    # What the chart's migration hook runs: the schema, then grants.sql, in one command.
    migrated = resolver_cli(urls["resolver_migrator"], "migrate", "--grants")
    assert migrated.returncode == 0, migrated.stderr
    assert "grants applied" in migrated.stdout
    return RoleDatabase(admin, urls)


def resolver_cli(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The `resolver` command in its own process, as the pod runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    env["RESOLVER_DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "-m", "resolver", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def executor_client(store: Storage) -> ExecutionClient:
    return ExecutionClient(store, owner="executor-1", lease_seconds=EXEC_LEASE_MS / 1000)


def crash(store: Storage, count: int, now_ms: int | None = None) -> list[ExecutionLease]:
    """Executions that crossed the start barrier (just now unless `now_ms` is given), written
    through the protocol functions. Only the schema owner may move the clock: the executor
    role writes at the database's own time."""
    client = executor_client(store)
    if now_ms is not None:
        client = client.at(now_ms)
    leases = []
    for _ in range(count):
        spec = client.create_dispatch(new_spec())
        leases.append(client.start(client.lease(spec.dispatch_id)))
    return leases


@contextmanager
def role_database(pg_server: str, *, managed: bool = False) -> Iterator[RoleDatabase]:
    """A fresh database with every role; the roles this run created are dropped after.

    `managed`: as on a managed service, an administrator with CREATEROLE and CREATEDB only
    (no superuser) creates the database and runs roles.sql; `admin` is then its URL.
    """
    with psycopg.connect(pg_server, autocommit=True) as lock:
        lock.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        existing = {
            r[0]
            for r in lock.execute(
                "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", (list(ROLES),)
            )
        }
        name = f"resolver_roles_{uuid.uuid4().hex[:8]}"
        admin_role = f"{name}_admin" if managed else None
        creator = pg_server
        if admin_role is not None:
            password = secrets.token_urlsafe(16)
            lock.execute(
                sql.SQL("CREATE ROLE {} LOGIN CREATEROLE CREATEDB PASSWORD {}").format(
                    sql.Identifier(admin_role), sql.Literal(password)
                )
            )
            creator = as_role(pg_server, admin_role, password)
        try:
            with psycopg.connect(creator, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            yield _set_up(with_database(creator, name), existing)
        finally:
            lock.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            for role in [*(set(ROLES) - existing), *([admin_role] if admin_role else [])]:
                lock.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
            lock.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
