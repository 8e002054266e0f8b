"""The whole deployment sequence as a managed PostgreSQL service allows it: the administrator
has CREATEROLE and CREATEDB and is no superuser. It creates the database, runs roles.sql;
`resolver migrate --grants` runs as resolver_migrator; then a replica, the API and prune run
under their own roles (the API as resolver_api, signing its facts)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.human.api import RateLimiter, create_app
from resolver.human.auth import TokenVerifier
from tests.helpers.api import auth, body
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, jwks_file, signing_key, token
from tests.helpers.roles import RoleDatabase, crash, resolver_cli, role_database
from tests.helpers.signing import TEST_SIGNER
from tests.helpers.stores import Storage

__all__ = ["jwks_file", "signing_key"]

DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def managed_db(pg_server: str) -> Iterator[RoleDatabase]:
    """roles.sql as the non-superuser administrator, then `resolver migrate --grants`."""
    with role_database(pg_server, managed=True) as db:
        yield db


def test_the_administrator_is_no_superuser(managed_db: RoleDatabase) -> None:
    (admin,) = managed_db.admin_rows(
        "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = current_user"
    )
    assert admin == {"rolsuper": False, "rolcreaterole": True, "rolcreatedb": True}
    (schema,) = managed_db.admin_rows(
        "SELECT nspowner::regrole::text AS owner FROM pg_namespace WHERE nspname = 'resolver'"
    )
    assert schema["owner"] == "resolver_migrator"


def test_run_api_and_prune_under_their_roles(
    managed_db: RoleDatabase, jwks_file: Path, signing_key: rsa.RSAPrivateKey
) -> None:
    with managed_db.connect("resolver_executor") as conn:
        (row,) = conn.execute("SELECT resolver_now_ms(NULL) AS now").fetchall()
    # An execution that crashed a while ago (only the schema owner may move the clock).
    with Storage(managed_db.urls["resolver_migrator"]) as owner:
        (lease,) = crash(owner, 1, row["now"] - DAY_MS)
    # No provider is configured for its action type: the replica queues it for a person.
    cycle = resolver_cli(managed_db.urls["resolver_runtime"], "run", "--once")
    assert cycle.returncode == 0, cycle.stderr
    with managed_db.connect("resolver_policy_writer") as conn:
        conn.execute("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
        conn.execute(
            "INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)"
        )
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    with (
        Storage(managed_db.urls["resolver_api"]) as store,
        Server(
            create_app(store, verifier, signer=TEST_SIGNER, limiter=RateLimiter(per_minute=5))
        ) as api,
    ):
        queue = api.get("/v1/manual-queue", headers=auth(token(signing_key)))
        assert queue.status_code == 200, queue.text
        (item,) = queue.json()["items"]
        assert item["dispatch_id"] == lease.dispatch_id
        url = f"/v1/dispatches/{lease.dispatch_id}/resolution"
        decided = api.post(url, json=body(lease.version), headers=auth(token(signing_key)))
        assert decided.status_code == 200, decided.text
    pruned = resolver_cli(
        managed_db.urls["resolver_retention"], "prune", "--older-than", "30d", "--json"
    )
    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout)["dispatches_pruned"] == 0  # decided just now: kept
