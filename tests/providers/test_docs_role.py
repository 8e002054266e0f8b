"""The SELECT-only role in docs/providers.md works for every SQL provider and writes nothing."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from providers.internal_mutation import InternalMutationProvider
from providers.package_install import PackageInstallProvider
from providers.run_create import RunCreateProvider
from resolver.core.domain import FindingKind
from resolver.db.readonly import ReadOnlyDatabase
from resolver.evidence.receipts import KeyRing
from tests.providers.harnesses import new_identity, plant_install

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def role_sql() -> str:
    text = DOC.read_text()
    section = text[text.index("## A SELECT-only role") :]
    match = re.search(r"```sql\n(.*?)```", section, re.S)
    assert match, "docs/providers.md lost its GRANT block"
    return match.group(1)


@pytest.fixture
def reader_url(database_url: str, pg_server: str) -> Iterator[str]:
    role = f"resolver_evidence_{uuid.uuid4().hex[:8]}"  # roles are cluster-wide: unique name
    password = uuid.uuid4().hex
    database = urlsplit(database_url).path.lstrip("/")
    statements = (
        role_sql()
        .replace("resolver_evidence", role)
        .replace("'change-me'", f"'{password}'")
        .replace("DATABASE app", f'DATABASE "{database}"')
    )
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(statements)  # type: ignore[arg-type]
    parts = urlsplit(database_url)
    netloc = f"{role}:{password}@{parts.hostname}:{parts.port}"
    yield urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "{role}"')  # type: ignore[arg-type]
        conn.execute(f'REVOKE ALL ON SCHEMA public FROM "{role}"')  # type: ignore[arg-type]
        conn.execute(f'REVOKE ALL ON DATABASE "{database}" FROM "{role}"')  # type: ignore[arg-type]
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')  # type: ignore[arg-type]


def test_providers_read_under_the_documented_role(reader_url: str, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        identity = new_identity(conn)
        plant_install(conn, identity)
    db = ReadOnlyDatabase(reader_url, timeout_seconds=2)
    db.open()
    try:
        assert (
            PackageInstallProvider(db, 2).inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
        )
        assert RunCreateProvider(db, 2).inspect(identity).kind is FindingKind.MISSING
        keys = KeyRing.ephemeral()
        assert InternalMutationProvider(db, keys, 2).inspect(identity).kind is FindingKind.MISSING
    finally:
        db.close()


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO action_receipts (dispatch_id, receipt) VALUES ('x', '{}')",
        "UPDATE approved_action_executions SET state = 'failed'",
        "DELETE FROM run_origin_facts",
    ],
)
def test_the_role_cannot_write_even_outside_read_only(reader_url: str, statement: str) -> None:
    with psycopg.connect(reader_url, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")  # drop the session lock...
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # ...the grant still holds
            conn.execute(statement)  # type: ignore[arg-type]
