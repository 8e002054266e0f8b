"""The docs' least-privilege SQL, run as written on a database set up by roles.sql and grants.sql.

An adopter copies these blocks: docs/providers.md's SELECT-only role, docs/executor-protocol.md's
platform login (one login for its own mutation and the protocol, in one transaction), and the
policy writer of docs/schema.md. Each block is read from the doc, run on real PostgreSQL, and
its roles are then used for what the doc promises, and refused what it does not.
"""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest
from psycopg import errors, sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from providers.internal_mutation import InternalMutationProvider
from providers.package_install import PackageInstallProvider
from resolver.core.domain import DispatchIdentity, ExecutionLease, FindingKind, Outcome
from resolver.db.readonly import ReadOnlyDatabase
from resolver.evidence.receipts import KeyRing, sign_receipt
from tests.helpers.harnesses import new_identity, plant_install
from tests.helpers.roles import RoleDatabase, as_role, crash
from tests.helpers.stores import Storage

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def sql_block(doc: str, heading: str, index: int = 0) -> str:
    """The `index`-th ```sql block under `heading` in docs/`doc`."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    blocks = re.findall(r"```sql\n(.*?)```", section, re.S)
    assert len(blocks) > index, f"docs/{doc} lost its SQL under {heading!r}"
    return str(blocks[index])


def database_name(url: str) -> str:
    return url.rsplit("/", 1)[-1].split("?", 1)[0]


@pytest.fixture
def own_role(role_db: RoleDatabase, pg_server: str) -> Iterator[tuple[str, str]]:
    """A cluster-unique role name and password for a doc block's role; dropped afterwards."""
    name = f"doc_{uuid.uuid4().hex[:10]}"
    yield name, secrets.token_urlsafe(16)
    with psycopg.connect(role_db.admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def run_as_admin(role_db: RoleDatabase, statements: str) -> None:
    with psycopg.connect(role_db.admin, autocommit=True) as conn:
        conn.execute(statements)  # type: ignore[arg-type]


# -- docs/providers.md: a SELECT-only role for SQL providers ---------------------------------------


def test_the_documented_evidence_role_reads_the_resolver_schema(
    role_db: RoleDatabase, own_role: tuple[str, str]
) -> None:
    name, password = own_role
    block = sql_block("providers.md", "## A SELECT-only role")
    run_as_admin(
        role_db,
        block.replace("resolver_evidence", name)
        .replace("'change-me'", f"'{password}'")
        .replace("DATABASE app", f'DATABASE "{database_name(role_db.admin)}"'),
    )
    with psycopg.connect(role_db.admin, autocommit=True) as conn:
        conn.execute("SET search_path = resolver")
        identity = new_identity(conn)
        plant_install(conn, identity)
    db = ReadOnlyDatabase(as_role(role_db.admin, name, password), timeout_seconds=2)
    db.open()
    try:
        found = PackageInstallProvider(db, 2).inspect(identity)
        assert found.kind is FindingKind.VERIFIED_SUCCEEDED, found
        missing = InternalMutationProvider(db, KeyRing.ephemeral(), 2).inspect(identity)
        assert missing.kind is FindingKind.MISSING, missing
    finally:
        db.close()
    with psycopg.connect(as_role(role_db.admin, name, password), autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")  # drop the session lock...
        with pytest.raises(errors.InsufficientPrivilege):  # ...the grant still holds
            conn.execute("INSERT INTO action_receipts (dispatch_id, receipt) VALUES ('x', '{}')")
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM approved_action_executions")


# -- docs/executor-protocol.md: the platform's login, its mutation and the receipt -----------------


@pytest.fixture
def platform_login(role_db: RoleDatabase, own_role: tuple[str, str]) -> str:
    """The doc's setup block, for a login of the platform's own with its own table."""
    name, password = own_role
    run_as_admin(
        role_db,
        "CREATE TABLE IF NOT EXISTS public.accounts (id int PRIMARY KEY, balance int NOT NULL);"
        " INSERT INTO public.accounts VALUES (42, 100) ON CONFLICT (id) DO UPDATE SET balance = 100",
    )
    block = sql_block("executor-protocol.md", "## Your executor's login")
    run_as_admin(
        role_db, block.replace("platform_app", name).replace("'change-me'", f"'{password}'")
    )
    return as_role(role_db.admin, name, password)


def the_transaction(
    conn: psycopg.Connection[dict[str, Any]], lease: ExecutionLease, keys: KeyRing
) -> None:
    """The doc's transaction block, its placeholders bound to the lease and a signed receipt."""
    block = sql_block("executor-protocol.md", "## Your executor's login", 1)
    fence = (lease.dispatch_id, lease.owner, lease.token, lease.version)
    statements = [s.split("--")[0].strip() for s in block.splitlines()]
    with conn.transaction():
        for statement in (s for s in statements if s and s not in ("BEGIN;", "COMMIT;")):
            text = re.sub(r"\$\d", "%s", statement.rstrip(";"))
            if "resolver_receipt_identity" in text:
                (identity,) = conn.execute(text, fence).fetchall()  # type: ignore[arg-type]
            elif "resolver_receipt_write" in text:
                row = {k: v for k, v in identity.items() if k != "db_now_ms"}
                receipt = sign_receipt(
                    DispatchIdentity(**row),
                    outcome=Outcome.SUCCEEDED,
                    result_code="applied",
                    finished_at_ms=identity["db_now_ms"],
                    receipt_id=f"m-{lease.dispatch_id}",
                    keys=keys,
                )
                conn.execute(text, (*fence, Jsonb(receipt)))  # type: ignore[arg-type]
            else:
                conn.execute(text)  # type: ignore[arg-type]


def test_the_platform_login_shares_one_transaction_with_the_protocol(
    role_db: RoleDatabase, platform_login: str
) -> None:
    keys = KeyRing.ephemeral("platform")
    with Storage(platform_login) as store:  # unqualified calls: the doc's search path
        (lease,) = crash(store, 1)
    with psycopg.connect(platform_login, row_factory=dict_row) as conn:
        the_transaction(conn, lease, keys)
    (row,) = role_db.admin_rows(
        "SELECT (SELECT balance FROM public.accounts WHERE id = 42) AS balance,"
        f" (SELECT count(*) FROM action_receipts WHERE dispatch_id = '{lease.dispatch_id}') AS n"
    )
    assert (row["balance"], row["n"]) == (90, 1)
    # The receipt verifies as the resolver will read it (with the evidence reader's role).
    reader = ReadOnlyDatabase(role_db.urls["resolver_evidence_reader"], timeout_seconds=2)
    reader.open()
    try:
        identity = DispatchIdentity(
            **{
                k: v
                for k, v in role_db.admin_rows(
                    "SELECT d.schema_version, d.dispatch_id, d.approval_request_id, d.project_id,"
                    " d.action_type, d.action_digest, e.attempt, e.started_at_ms,"
                    " d.idempotency_key FROM approved_action_dispatches d JOIN"
                    f" approved_action_executions e USING (dispatch_id) WHERE d.dispatch_id ="
                    f" '{lease.dispatch_id}'"
                )[0].items()
            }
        )
        found = InternalMutationProvider(reader, keys, 2).inspect(identity)
        assert found.kind is FindingKind.VERIFIED_SUCCEEDED, found
    finally:
        reader.close()


def test_a_refused_receipt_rolls_the_platform_mutation_back(
    role_db: RoleDatabase, platform_login: str
) -> None:
    with Storage(platform_login) as store:
        (lease,) = crash(store, 1)
    stale = msgspec.structs.replace(lease, version=lease.version - 1)
    with (
        psycopg.connect(platform_login, row_factory=dict_row) as conn,
        pytest.raises(psycopg.Error) as refused,
    ):
        the_transaction(conn, stale, KeyRing.ephemeral("platform"))
    assert refused.value.sqlstate == "RS001"
    (row,) = role_db.admin_rows(
        "SELECT (SELECT balance FROM public.accounts WHERE id = 42) AS balance,"
        f" (SELECT count(*) FROM action_receipts WHERE dispatch_id = '{lease.dispatch_id}') AS n"
    )
    assert (row["balance"], row["n"]) == (100, 0)


def test_without_the_search_path_the_login_must_qualify_the_calls(
    role_db: RoleDatabase, platform_login: str
) -> None:
    """What the doc warns about: a role's settings are not inherited through GRANT."""
    with psycopg.connect(platform_login, autocommit=True) as conn:
        conn.execute("SET search_path = public")
        with pytest.raises(errors.UndefinedFunction):
            conn.execute("SELECT * FROM resolver_now_ms(NULL)")
        assert conn.execute("SELECT resolver.resolver_now_ms(NULL)").fetchone()


# -- docs/schema.md: the policy writer -------------------------------------------------------------


def test_the_policy_writer_keeps_the_mirror_and_nothing_else(role_db: RoleDatabase) -> None:
    block = sql_block("schema.md", "## `recovery_projects` and `recovery_role_bindings`")
    with role_db.connect("resolver_policy_writer") as conn:
        conn.execute(block)  # type: ignore[call-overload]
        conn.execute(block)  # type: ignore[call-overload]  # a second change bumps versions
    rows = role_db.admin_rows(
        "SELECT p.version AS project, b.user_id, b.version AS binding FROM recovery_projects p"
        " JOIN recovery_role_bindings b USING (project_id) WHERE project_id = 'proj-docs'"
    )
    assert [(r["project"], r["user_id"], r["binding"]) for r in rows] == [(2, "alice", 2)]
    with role_db.connect("resolver_policy_writer") as conn:
        for statement in (
            "SELECT * FROM approved_action_executions",
            "UPDATE approved_action_recovery_controls SET status = 'manual'",
            "INSERT INTO recovery_authorizations (mutation_id) VALUES ('x')",
            "SELECT resolver_now_ms(NULL)",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                conn.execute(statement)  # type: ignore[call-overload]


def test_the_policy_writer_sets_the_bounds_of_an_act_and_the_api_only_reads_them(
    role_db: RoleDatabase,
) -> None:
    block = sql_block("manual-resolution.md", "## The bounds of a person's act")
    with role_db.connect("resolver_policy_writer") as conn:
        conn.execute(block)  # type: ignore[call-overload]
    (policy,) = role_db.admin_rows("SELECT * FROM recovery_decision_policy")
    assert (policy["max_auth_age_ms"], policy["proposal_ttl_ms"]) == (300_000, 1_800_000)
    with role_db.connect("resolver_api") as conn:
        assert conn.execute("SELECT proposal_ttl_ms FROM recovery_decision_policy").fetchone()
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute(block)  # type: ignore[call-overload]
    with role_db.connect("resolver_policy_writer") as conn:
        conn.execute("UPDATE recovery_decision_policy SET proposal_ttl_ms = 3600000")
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("DELETE FROM recovery_decision_policy")


def test_the_policy_writer_keeps_the_two_person_rules_and_the_runtime_only_reads_them(
    role_db: RoleDatabase,
) -> None:
    block = sql_block("manual-resolution.md", "## Two people where it matters")
    with role_db.connect("resolver_policy_writer") as conn:
        conn.execute(block)  # type: ignore[call-overload]
        conn.execute(block)  # type: ignore[call-overload]  # idempotent
    rows = role_db.admin_rows("SELECT action_type_pattern, decision FROM recovery_two_person_rules")
    assert [(r["action_type_pattern"], r["decision"]) for r in rows] == [
        ("payments.*", "confirm_succeeded")
    ]
    with role_db.connect("resolver_runtime") as conn:
        assert conn.execute("SELECT count(*) FROM recovery_two_person_rules").fetchone()
        with pytest.raises(errors.InsufficientPrivilege):
            conn.execute("DELETE FROM recovery_two_person_rules")
