"""Requests to the manual-resolution API, and the grants its users need."""

from __future__ import annotations

from typing import Any

from tests.helpers.database import SQL


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
