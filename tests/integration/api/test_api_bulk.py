"""`POST /v1/resolutions/bulk` over real HTTP, real tokens, real PostgreSQL: each item its own
fenced decision, every item's result in the answer, the rate limit counting the request fairly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.core.domain import FindingKind
from resolver.human.api import RateLimiter, create_app
from resolver.human.api.bulk import ITEMS_PER_TOKEN, MAX_BULK_ITEMS, bulk_cost
from resolver.human.auth import TokenVerifier
from tests.helpers.database import SQL, World, new_spec
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.providers import ScriptedProvider, fixed, reconciler
from tests.helpers.signing import TEST_SIGNER
from tests.helpers.stores import Storage

PER_MINUTE = 5


@pytest.fixture
def api(store: Storage, jwks_file: Path, sql: SQL) -> Iterator[httpx.Client]:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1), ('proj-2', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    limiter = RateLimiter(per_minute=PER_MINUTE)
    with Server(create_app(store, verifier, limiter=limiter, signer=TEST_SIGNER)) as client:
        yield client


@pytest.fixture
def manual_items(world: World, store: Storage) -> list[tuple[str, int]]:
    """Three manual items in proj-1 and one in proj-2 (where alice holds no permission)."""
    leases = [world.started(now_ms=1_000_000) for _ in range(3)]
    spec = world.executor.create_dispatch(new_spec(project_id="proj-2"))
    lease = world.executor.at(1_000_000).lease(spec.dispatch_id)
    leases.append(world.executor.at(1_000_000).start(lease))
    reconciler(store, ScriptedProvider(fixed(FindingKind.UNSUPPORTED))).run_cycle()
    return [(x.dispatch_id, x.version) for x in leases]


def bulk(items: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    return {
        "decision": "abandon_unknown",
        "reason_code": "node_pool_lost",
        "items": items,
        **overrides,
    }


def item(dispatch_id: str, version: int, mutation_id: str) -> dict[str, Any]:
    return {
        "dispatch_id": dispatch_id,
        "expected_execution_version": version,
        "mutation_id": mutation_id,
    }


def auth(tok: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tok}"}


def test_each_item_is_its_own_decision_and_every_result_is_listed(
    api: httpx.Client,
    manual_items: list[tuple[str, int]],
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
) -> None:
    (a, va), (b, vb), (c, vc), (other, vo) = manual_items
    request = bulk(
        [
            item(a, va, "bulk-a"),
            item(b, vb + 1, "bulk-b"),  # a stale view of b: its fence holds
            item("no-such-dispatch", 1, "bulk-x"),
            item(other, vo, "bulk-o"),  # a project alice may not decide in
            item(a, va, "bulk-a"),  # the same item again: an exact replay
            item(c, vc, "bulk-a"),  # a mutation id already used for a
        ]
    )
    answer = api.post("/v1/resolutions/bulk", json=request, headers=auth(token(signing_key)))
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    assert answer.json()["results"] == [
        {"dispatch_id": a, "result": "committed", "code": None},
        {"dispatch_id": b, "result": "conflict", "code": "conflict"},
        {"dispatch_id": "no-such-dispatch", "result": "not_found", "code": "not_found"},
        # A project alice may not decide in answers like an unknown id.
        {"dispatch_id": other, "result": "not_found", "code": "not_found"},
        {"dispatch_id": a, "result": "replayed", "code": None},
        {"dispatch_id": c, "result": "conflict", "code": "conflict"},
    ]
    assert sql.execution(a)["state"] == "blocked"
    assert [r["reason_code"] for r in sql.resolutions(a)] == ["node_pool_lost"]
    for untouched in (b, c, other):
        assert sql.execution(untouched)["state"] == "executing"
        assert sql.resolutions(untouched) == []


def test_a_weak_sign_in_is_asked_to_step_up_before_anything_is_written(
    api: httpx.Client,
    manual_items: list[tuple[str, int]],
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
) -> None:
    (a, va), (b, vb), *_ = manual_items
    request = bulk([item(a, va, "m-a"), item(b, vb, "m-b")])
    answer = api.post(
        "/v1/resolutions/bulk", json=request, headers=auth(token(signing_key, amr=["pwd"]))
    )
    assert answer.status_code == 401
    assert answer.json()["code"] == "step_up_required"
    assert "insufficient_user_authentication" in answer.headers["www-authenticate"]
    assert sql.execution(a)["state"] == sql.execution(b)["state"] == "executing"


def test_the_rate_limit_counts_a_bulk_request_by_its_size(
    api: httpx.Client, signing_key: rsa.RSAPrivateKey
) -> None:
    """30 items cost 3 of the 5 tokens: a second such request is refused, a single decision
    still fits, and the refused request decided nothing (a 429 takes no token)."""
    assert bulk_cost(30, PER_MINUTE) == 30 // ITEMS_PER_TOKEN == 3
    items = [item(f"gone-{n}", 1, f"m-{n}") for n in range(30)]
    first = api.post("/v1/resolutions/bulk", json=bulk(items), headers=auth(token(signing_key)))
    assert first.status_code == 200
    assert {r["result"] for r in first.json()["results"]} == {"not_found"}
    second = api.post("/v1/resolutions/bulk", json=bulk(items), headers=auth(token(signing_key)))
    assert (second.status_code, second.json()["code"]) == (429, "rate_limited")
    assert second.headers["retry-after"] == "60"
    single = api.post(
        "/v1/dispatches/gone-1/resolution",
        json={
            "decision": "confirm_failed",
            "mutation_id": "single-1",
            "expected_execution_version": 1,
            "reason_code": "x",
        },
        headers=auth(token(signing_key)),
    )
    assert single.status_code == 404


def test_a_full_bulk_never_costs_more_than_the_bucket_holds() -> None:
    assert bulk_cost(MAX_BULK_ITEMS, 5) == 5
    assert bulk_cost(1, 30) == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"items": []}, "items"),
        ({"items": [item(f"d-{n}", 1, f"m-{n}") for n in range(MAX_BULK_ITEMS + 1)]}, "items"),
        ({"items": [{**item("d-1", 1, "m-1"), "extra": 1}]}, "items.0.extra"),
        ({"items": [item("d-1", "1", "m-1")]}, "items.0.expected_execution_version"),  # type: ignore[arg-type]
        ({"reason_code": "Not A Code"}, "reason_code"),
        ({"evidence_digest": "ABC"}, "evidence_digest"),
        ({"decision": "retry"}, "decision"),
    ],
)
def test_malformed_bulk_requests_are_422_naming_the_field(
    api: httpx.Client, signing_key: rsa.RSAPrivateKey, change: dict[str, Any], field: str
) -> None:
    request = {**bulk([item("d-1", 1, "m-1")]), **change}
    answer = api.post("/v1/resolutions/bulk", json=request, headers=auth(token(signing_key)))
    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] == "invalid_request"
    assert field in answer.json()["title"]
