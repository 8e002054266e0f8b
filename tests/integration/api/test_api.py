"""The manual-resolution API over real HTTP (uvicorn on loopback), real tokens, real PostgreSQL."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from resolver.core.domain import Finding, FindingKind
from resolver.core.provider import installed_reasons
from resolver.human.api import RateLimiter, create_app
from resolver.human.auth import TokenVerifier
from tests.helpers.api import auth, body
from tests.helpers.database import SQL, World
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.providers import ScriptedProvider, reconciler
from tests.helpers.signing import TEST_SIGNER
from tests.helpers.stores import Storage


def test_queue_then_decide_then_replay(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey, sql: SQL
) -> None:
    dispatch_id, version = manual_item
    queue = api.get("/v1/manual-queue", headers=auth(token(signing_key)))
    assert queue.status_code == 200
    assert [i["dispatch_id"] for i in queue.json()["items"]] == [dispatch_id]
    assert queue.headers["cache-control"] == "no-store"

    url = f"/v1/dispatches/{dispatch_id}/resolution"
    first = api.post(url, json=body(version), headers=auth(token(signing_key)))
    assert first.status_code == 200, first.text
    assert first.json() == {"dispatch_id": dispatch_id, "outcome": "failed", "result": "committed"}
    assert sql.execution(dispatch_id)["state"] == "failed"
    again = api.post(url, json=body(version), headers=auth(token(signing_key)))
    assert again.json()["result"] == "replayed"
    drift = api.post(url, json=body(version, reason_code="other"), headers=auth(token(signing_key)))
    assert drift.status_code == 409 and drift.headers["content-type"] == "application/problem+json"
    assert api.get("/v1/manual-queue", headers=auth(token(signing_key))).json()["items"] == []


def conflict_case(world: World, store: Storage, reason: str | None) -> tuple[str, int]:
    """A lost execution whose evidence conflicts for `reason`: in the manual queue."""
    lease = world.started(now_ms=1_000_000)
    finding = Finding(FindingKind.CONFLICT, cause=reason)
    reconciler(store, ScriptedProvider(lambda _identity: finding)).run_cycle()
    return lease.dispatch_id, lease.version


@pytest.mark.parametrize("reason", ["bad_signature", "overwritten"])
def test_confirm_succeeded_on_possibly_forged_evidence_needs_the_acknowledgement(
    api: httpx.Client,
    world: World,
    store: Storage,
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
    reason: str,
) -> None:
    dispatch_id, version = conflict_case(world, store, reason)
    assert sql.control(dispatch_id)["last_reason"] == reason
    url = f"/v1/dispatches/{dispatch_id}/resolution"
    succeeded = body(version, decision="confirm_succeeded", mutation_id="op-ok")
    refused = api.post(url, json=succeeded, headers=auth(token(signing_key)))
    assert refused.status_code == 409, refused.text
    assert refused.json()["code"] == "tamper_acknowledgement_required"
    assert reason in refused.json()["title"]
    assert refused.json()["current"]["state"] == "executing"
    assert sql.execution(dispatch_id)["state"] == "executing"
    assert sql.resolutions(dispatch_id) == []
    # Said in the decision itself, the same request goes through.
    acknowledged = {**succeeded, "tamper_acknowledged": True}
    answer = api.post(url, json=acknowledged, headers=auth(token(signing_key)))
    assert answer.status_code == 200, answer.text
    assert sql.execution(dispatch_id)["state"] == "succeeded"


@pytest.mark.parametrize(
    ("reason", "decision"),
    [
        ("bad_signature", "confirm_failed"),
        ("too_large", "confirm_succeeded"),
        (None, "confirm_succeeded"),
    ],
)
def test_the_acknowledgement_is_asked_only_of_a_success_on_possibly_forged_evidence(
    api: httpx.Client,
    world: World,
    store: Storage,
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
    reason: str | None,
    decision: str,
) -> None:
    assert reason not in installed_reasons().tampering or decision != "confirm_succeeded"
    dispatch_id, version = conflict_case(world, store, reason)
    # A conflict without a provider's reason still carries one.
    assert sql.control(dispatch_id)["last_reason"] == (reason or "unexplained")
    answer = api.post(
        f"/v1/dispatches/{dispatch_id}/resolution",
        json=body(version, decision=decision),
        headers=auth(token(signing_key)),
    )
    assert answer.status_code == 200, answer.text


def test_a_bulk_decision_never_confirms_possibly_forged_evidence(
    api: httpx.Client, world: World, store: Storage, signing_key: rsa.RSAPrivateKey, sql: SQL
) -> None:
    dispatch_id, version = conflict_case(world, store, "unknown_kid")
    item = {"dispatch_id": dispatch_id, "mutation_id": "b-1", "expected_execution_version": version}
    answer = api.post(
        "/v1/resolutions/bulk",
        json={"decision": "confirm_succeeded", "reason_code": "checked", "items": [item]},
        headers=auth(token(signing_key)),
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["results"] == [
        {
            "dispatch_id": dispatch_id,
            "result": "conflict",
            "code": "tamper_acknowledgement_required",
        }
    ]
    assert sql.execution(dispatch_id)["state"] == "executing"


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "garbage",
        "forged",
        "none_alg",
        "hs256",
        "expired",
        "wrong_audience",
        "wrong_issuer",
        "unknown_kid",
        "no_auth_time",
    ],
)
def test_bad_tokens_are_401_and_write_nothing(
    api: httpx.Client,
    manual_item: tuple[str, int],
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
    case: str,
) -> None:
    dispatch_id, version = manual_item
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    tokens: dict[str, str | None] = {
        "missing": None,
        "garbage": "not.a.jwt",
        "forged": token(other),
        "none_alg": jwt.encode(
            {
                "iss": ISSUER,
                "aud": AUDIENCE,
                "sub": "alice",
                "iat": now,
                "exp": now + 60,
                "auth_time": now,
                "amr": ["mfa"],
            },
            None,
            algorithm="none",
            headers={"kid": "k1"},
        ),
        "hs256": token("k1-shared-secret-of-32-bytes-long!!", alg="HS256"),
        "expired": token(signing_key, exp=now - 3600, iat=now - 7200),
        "wrong_audience": token(signing_key, aud="someone-else"),
        "wrong_issuer": token(signing_key, iss="https://evil.test"),
        "unknown_kid": token(signing_key, kid="k9"),
        "no_auth_time": jwt.encode(
            {
                "iss": ISSUER,
                "aud": AUDIENCE,
                "sub": "alice",
                "iat": now,
                "exp": now + 60,
                "amr": ["mfa"],
            },
            signing_key,
            algorithm="RS256",
            headers={"kid": "k1"},
        ),
    }
    tok = tokens[case]
    headers = auth(tok) if tok else {}
    response = api.post(
        f"/v1/dispatches/{dispatch_id}/resolution", json=body(version), headers=headers
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert sql.execution(dispatch_id)["state"] == "executing"
    assert sql.resolutions(dispatch_id) == []


def test_es256_tokens_verify_too(tmp_path: Path, store: Storage, sql: SQL) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{**public, "kid": "e1"}]}))
    verifier = TokenVerifier.from_jwks_file(path, issuer=ISSUER, audience=AUDIENCE)
    assert verifier.verify(token(key, alg="ES256", kid="e1")).user_id == "alice"


@pytest.mark.parametrize(
    ("claims", "status", "code"),
    [
        ({"amr": ["pwd"]}, 401, "step_up_required"),
        ({"auth_time": int(time.time()) - 600}, 401, "step_up_required"),
        ({"sub": "mallory"}, 404, "not_found"),
    ],
)
def test_step_up_and_permission(
    api: httpx.Client,
    manual_item: tuple[str, int],
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
    claims: dict[str, Any],
    status: int,
    code: str,
) -> None:
    dispatch_id, version = manual_item
    response = api.post(
        f"/v1/dispatches/{dispatch_id}/resolution",
        json=body(version),
        headers=auth(token(signing_key, **claims)),
    )
    assert (response.status_code, response.json()["code"]) == (status, code)
    if status == 401:
        assert 'error="insufficient_user_authentication"' in response.headers["www-authenticate"]
    assert sql.resolutions(dispatch_id) == []


def test_invalid_body_is_422_naming_fields(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey
) -> None:
    dispatch_id, version = manual_item
    bad = body(version, decision="retry", reason_code="Has Spaces", extra="x")
    response = api.post(
        f"/v1/dispatches/{dispatch_id}/resolution", json=bad, headers=auth(token(signing_key))
    )
    assert response.status_code == 422
    assert response.json()["title"] == "invalid fields: decision, extra, reason_code"


def test_no_retry_or_reset_endpoints(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey
) -> None:
    dispatch_id, _ = manual_item
    for path in ("retry", "reset", "reset-to-pending", "clear-start-barrier"):
        response = api.post(
            f"/v1/dispatches/{dispatch_id}/{path}", headers=auth(token(signing_key))
        )
        assert response.status_code == 404


def test_rate_limit_per_user(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey
) -> None:
    dispatch_id, version = manual_item
    codes = [
        api.post(
            f"/v1/dispatches/{dispatch_id}/resolution",
            json=body(version, mutation_id=f"op-{n}"),
            headers=auth(token(signing_key)),
        ).status_code
        for n in range(7)
    ]
    assert codes[0] == 200 and codes[1:5] == [409] * 4 and codes[5:] == [429, 429]


def test_storage_failure_is_masked(jwks_file: Path, signing_key: rsa.RSAPrivateKey) -> None:
    dead = Storage("postgresql://resolver:hunter2@127.0.0.1:1/app", connect_timeout_seconds=0.5)
    dead.open()
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    try:
        with Server(create_app(dead, verifier, signer=TEST_SIGNER)) as client:
            response = client.get("/v1/manual-queue", headers=auth(token(signing_key)))
    finally:
        dead.close()
    assert response.status_code == 503
    assert response.json() == {
        "type": "urn:resolver:problem:unavailable",
        "status": 503,
        "title": "storage is unavailable; try again",
        "code": "unavailable",
    }
    assert "hunter2" not in response.text and "127.0.0.1" not in response.text


WRITE_ROUTES = {
    "resolution": lambda d, v: (f"/v1/dispatches/{d}/resolution", body(v)),
    "withdraw": lambda d, v: (
        f"/v1/dispatches/{d}/proposal/withdraw",
        {"mutation_id": "w-1", "reason_code": "changed_mind"},
    ),
    "reject": lambda d, v: (
        f"/v1/dispatches/{d}/proposal/reject",
        {"mutation_id": "r-1", "reason_code": "disagree"},
    ),
}


@pytest.mark.parametrize("route", WRITE_ROUTES.values(), ids=WRITE_ROUTES.keys())
def test_every_write_route_answers_a_forbidden_dispatch_like_an_unknown_one(
    store: Storage,
    jwks_file: Path,
    manual_item: tuple[str, int],
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
    route: Any,
) -> None:
    """mallory holds no permission in the dispatch's project: what she gets for its id is
    what she gets for an id that does not exist, to the byte."""
    dispatch_id, version = manual_item
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    app = create_app(store, verifier, limiter=RateLimiter(per_minute=100), signer=TEST_SIGNER)
    mallory = auth(token(signing_key, sub="mallory"))
    with Server(app) as client:
        answers = []
        for target in (dispatch_id, "no-such-dispatch"):
            url, payload = route(target, version)
            answers.append(client.post(url, json=payload, headers=mallory))
        forbidden, unknown = answers
        assert forbidden.status_code == unknown.status_code == 404
        assert forbidden.content == unknown.content
        assert forbidden.json()["code"] == "not_found"
        bulk = client.post(
            "/v1/resolutions/bulk",
            json={
                "decision": "confirm_failed",
                "reason_code": "checked",
                "items": [
                    {
                        "dispatch_id": target,
                        "mutation_id": f"b-{n}",
                        "expected_execution_version": version,
                    }
                    for n, target in enumerate((dispatch_id, "no-such-dispatch"))
                ],
            },
            headers=mallory,
        )
        assert bulk.status_code == 200, bulk.text
        results = [
            {k: v for k, v in r.items() if k != "dispatch_id"} for r in bulk.json()["results"]
        ]
        assert results[0] == results[1] == {"result": "not_found", "code": "not_found"}
    assert sql.execution(dispatch_id)["state"] == "executing"


@pytest.mark.parametrize(
    "claims",
    [
        {"sub": "al\x00ice"},
        {"sub": "alice\n"},
        {"iss": ISSUER + "\x00"},
        {"amr": ["mfa\x00"]},
        {"sub": "al\u0085ice"},
    ],
    ids=["nul-sub", "newline-sub", "nul-iss", "nul-amr", "c1-sub"],
)
def test_claims_with_control_characters_are_invalid_tokens(
    api: httpx.Client,
    manual_item: tuple[str, int],
    signing_key: rsa.RSAPrivateKey,
    claims: dict[str, Any],
) -> None:
    dispatch_id, version = manual_item
    headers = auth(token(signing_key, **claims))
    for answer in (
        api.get("/v1/manual-queue", headers=headers),
        api.get(f"/v1/dispatches/{dispatch_id}", headers=headers),
        api.post(f"/v1/dispatches/{dispatch_id}/resolution", json=body(version), headers=headers),
    ):
        assert answer.status_code == 401, answer.text
        assert answer.json()["code"] == "invalid_token"
