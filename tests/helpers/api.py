"""The manual-resolution API over loopback HTTP for the tests, requests to it, and the grants
its users need."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from resolver.human.api import RateLimiter, create_app
from resolver.human.auth import TokenVerifier
from tests.helpers.database import SQL
from tests.helpers.oidc import AUDIENCE, ISSUER, Server
from tests.helpers.signing import TEST_SIGNER
from tests.helpers.stores import Storage


def body(version: int, **overrides: Any) -> dict[str, Any]:
    return {
        "decision": "confirm_failed",
        "mutation_id": "op-7",
        "expected_execution_version": version,
        "reason_code": "vendor_says_declined",
        **overrides,
    }


def auth(tok: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tok}"}


def grant_alice(sql: SQL) -> None:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")


@pytest.fixture
def api(store: Storage, jwks_file: Path, sql: SQL) -> Iterator[httpx.Client]:
    """The API on a free loopback port, alice allowed in proj-1, five requests a minute."""
    grant_alice(sql)
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    with Server(
        create_app(store, verifier, limiter=RateLimiter(per_minute=5), signer=TEST_SIGNER)
    ) as client:
        yield client
