"""What was approved, for people: the optional action summary a dispatch is created with.

Shape- and size-checked by the database (resolver_action_summary_problem, in the creation
function and a CHECK constraint), refused with RS005 naming the rule and never the content;
taken by the Python SDK (checked first in the executor's process) and shown by the case read.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from resolver.core.domain import ActionSummary, CaseFilter, CaseList, SummaryFact
from resolver.core.errors import InvalidDispatch
from resolver.db.protocol import INVALID_INPUT
from resolver.executor import ExecutionClient
from tests.helpers.database import SQL, new_spec
from tests.helpers.protocol import call, refused
from tests.helpers.stores import Storage

CHARGE = ActionSummary.of("Charge 2,490.00 EUR", {"Amount": "2,490.00 EUR", "Order": "ord-7781"})


def _create(sql: SQL, summary: Any) -> dict[str, Any]:
    spec = new_spec("pay.charge")
    return call(
        sql,
        "resolver_dispatch_create_v2",
        dispatch_id=spec.dispatch_id,
        approval_request_id=spec.approval_request_id,
        project_id=spec.project_id,
        action_type=spec.action_type,
        action_digest=spec.action_digest,
        idempotency_key=spec.idempotency_key,
        action_summary=Jsonb(summary),
    )


def test_a_summary_is_stored_with_the_dispatch_and_read_back_by_the_case(
    store: Storage, sql: SQL
) -> None:
    client = ExecutionClient(store, owner="executor-1")
    spec = client.create_dispatch(new_spec("pay.charge", action_summary=CHARGE))
    assert store.create_dispatch(spec) is False  # the exact re-create is the same fact
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    case = store.get_case("alice", spec.dispatch_id)
    assert case is not None and case.identity.action_summary == CHARGE
    # A re-create with another summary is another action under the same ids: refused.
    other = ActionSummary.of("Charge 18.50 EUR", {"Amount": "18.50 EUR"})
    with pytest.raises(InvalidDispatch, match="already recorded with a different identity"):
        store.create_dispatch(new_spec("pay.charge", **_ids(spec), action_summary=other))
    # Executors that pass no summary keep working: it is optional.
    plain = client.create_dispatch(new_spec("pay.charge"))
    assert store.get_case("alice", plain.dispatch_id).identity.action_summary is None  # type: ignore[union-attr]
    assert store.list_cases("alice", CaseList.MANUAL, 10, None, CaseFilter(summary="2,490")) == []


def _ids(spec: Any) -> dict[str, str]:
    return {
        "dispatch_id": spec.dispatch_id,
        "approval_request_id": spec.approval_request_id,
        "action_digest": spec.action_digest,
        "idempotency_key": spec.idempotency_key,
    }


BAD = [
    ("not an object", ["a"], "must be a JSON object"),
    ("no title", {"facts": []}, "title must be a string of 1-120 characters"),
    ("a long title", {"title": "x" * 121}, "title must be a string of 1-120 characters"),
    ("an unknown key", {"title": "t", "args": "--force"}, "takes the keys title and facts only"),
    ("nine facts", {"title": "t", "facts": [{"label": "a", "value": "b"}] * 9}, "at most 8"),
    ("a fact of another shape", {"title": "t", "facts": [{"label": "a"}]}, "each fact must be"),
    ("a long value", {"title": "t", "facts": [{"label": "a", "value": "v" * 201}]}, "1-200"),
    ("oversize", {"title": "t", "facts": [{"label": "é" * 40, "value": "é" * 200}] * 8}, "2048"),
    ("a control character", {"title": "line\nbreak"}, "no control"),
    ("a direction override", {"title": "pay \u202eRUE 0942"}, "direction-override"),
    ("a secret's label", {"title": "t", "facts": [{"label": "Password", "value": "x"}]}, "secret"),
    (
        "a bearer token",
        {"title": "t", "facts": [{"label": "Auth", "value": "Bearer abc"}]},
        "secret",
    ),
    ("a JWT", {"title": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.sig"}, "looks like a secret"),
    (
        "credentials in a URL",
        {"title": "t", "facts": [{"label": "Target", "value": "https://u:pw@host/"}]},
        "looks like a secret",
    ),
    (
        "a key-shaped run",
        {"title": "t", "facts": [{"label": "Ref", "value": "ghp_" + "A1b2" * 9}]},
        "looks like a secret",
    ),
    (
        "a PEM block",
        {"title": "t", "facts": [{"label": "Cert", "value": "-----BEGIN PRIVATE"}]},
        "looks like a secret",
    ),
]


@pytest.mark.parametrize(
    ("summary", "rule"), [(s, r) for _, s, r in BAD], ids=[n for n, _, _ in BAD]
)
def test_the_database_refuses_a_summary_that_breaks_a_rule_naming_the_rule_not_the_content(
    sql: SQL, summary: Any, rule: str
) -> None:
    message = refused(sql, INVALID_INPUT, "resolver_dispatch_create_v2", **_args(summary))
    assert rule in message
    assert "--force" not in message and "pw@" not in message and "Bearer abc" not in message
    # The constraint holds for the table owner too, whatever function it bypasses.
    spec = new_spec("pay.charge")
    with pytest.raises(psycopg.errors.CheckViolation):
        sql.all(
            "INSERT INTO approved_action_dispatches (dispatch_id, approval_request_id,"
            " project_id, action_type, action_digest, idempotency_key, schema_version,"
            " action_summary) VALUES (%s, %s, %s, %s, %s, %s, 1, %s)",
            spec.dispatch_id,
            spec.approval_request_id,
            spec.project_id,
            spec.action_type,
            spec.action_digest,
            spec.idempotency_key,
            Jsonb(summary),
        )
    # The SDK refuses the same summaries in the executor's own process, before any SQL.
    if _sdk_can_build(summary):
        with pytest.raises(InvalidDispatch):
            ActionSummary(
                summary["title"], tuple(SummaryFact(**f) for f in summary.get("facts", []))
            )


def _sdk_can_build(summary: Any) -> bool:
    """Whether the SDK's types can even hold it (the database's shape rules aside)."""
    return (
        isinstance(summary, dict)
        and set(summary) <= {"title", "facts"}
        and "title" in summary
        and all(
            isinstance(f, dict) and set(f) == {"label", "value"} for f in summary.get("facts", [])
        )
    )


def _args(summary: Any) -> dict[str, Any]:
    spec = new_spec("pay.charge")
    return {
        "dispatch_id": spec.dispatch_id,
        "approval_request_id": spec.approval_request_id,
        "project_id": spec.project_id,
        "action_type": spec.action_type,
        "action_digest": spec.action_digest,
        "idempotency_key": spec.idempotency_key,
        "action_summary": Jsonb(summary),
    }


def test_a_summary_within_every_bound_is_accepted(sql: SQL) -> None:
    full = {
        "title": "Install pkg-ledger 4.2.1 on prod-eu (2 hosts)",
        "facts": [{"label": f"Fact {i}", "value": f"value {i}: {'word ' * 30}"} for i in range(8)],
    }
    assert len(json.dumps(full)) < 2048
    assert _create(sql, full)["created"] is True
    assert _create(sql, {"title": "Restart ledger-worker on host-7"})["created"] is True
