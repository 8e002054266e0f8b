"""Bad input at the API edge, as an attacker or a clumsy client sends it: every answer is a
typed, masked problem document, `no-store`, and writes nothing. Real HTTP, real PostgreSQL."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.human.api import BIGINT_MAX, RateLimiter, create_app, openapi_document
from resolver.human.auth import TokenVerifier
from tests.helpers.api import auth, body
from tests.helpers.database import SQL
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.signing import TEST_SIGNER, signing_env
from tests.helpers.stores import Storage
from tests.helpers.telemetry import free_port

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def edge(store: Storage, jwks_file: Path, sql: SQL) -> Iterator[httpx.Client]:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    with Server(
        create_app(store, verifier, limiter=RateLimiter(per_minute=1000), signer=TEST_SIGNER)
    ) as client:
        yield client


def cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode()


@dataclass(frozen=True)
class Case:
    """One bad request; `path` and `content` may use {id} and {v} (the item's version)."""

    name: str
    method: str
    path: str
    status: int
    code: str
    json_body: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    title_has: str = ""


DECIDE = "/v1/dispatches/{id}/resolution"
JSON = {"Content-Type": "application/json"}
CASES = [
    Case(
        "version as string",
        "POST",
        DECIDE,
        422,
        "invalid_request",
        {"v": "7"},
        title_has="expected_execution_version",
    ),
    Case(
        "version as float",
        "POST",
        DECIDE,
        422,
        "invalid_request",
        {"v": 7.0},
        title_has="expected_execution_version",
    ),
    Case(
        "version as bool",
        "POST",
        DECIDE,
        422,
        "invalid_request",
        {"v": True},
        title_has="expected_execution_version",
    ),
    Case(
        "version above bigint",
        "POST",
        DECIDE,
        422,
        "invalid_request",
        {"v": BIGINT_MAX + 1},
        title_has="expected_execution_version",
    ),
    Case(
        "version 10**30",
        "POST",
        DECIDE,
        422,
        "invalid_request",
        {"v": 10**30},
        title_has="expected_execution_version",
    ),
    Case(
        "version zero",
        "POST",
        DECIDE,
        422,
        "invalid_request",
        {"v": 0},
        title_has="expected_execution_version",
    ),
    Case("unknown field", "POST", DECIDE, 422, "invalid_request", {"extra": 1}, title_has="extra"),
    Case(
        "mutation id as number",
        "POST",
        DECIDE,
        422,
        "invalid_request",
        {"mutation_id": 7},
        title_has="mutation_id",
    ),
    Case(
        "reason code with NUL",
        "POST",
        DECIDE,
        422,
        "invalid_request",
        {"reason_code": "a\x00b"},
        title_has="reason_code",
    ),
    Case("body is an array", "POST", DECIDE, 422, "invalid_request", [], title_has="body"),
    Case("body is null", "POST", DECIDE, 422, "invalid_request", content=b"null", headers=JSON),
    Case(
        "truncated JSON",
        "POST",
        DECIDE,
        400,
        "malformed_body",
        content=b'{"decision":',
        headers=JSON,
    ),
    Case(
        "invalid UTF-8",
        "POST",
        DECIDE,
        400,
        "malformed_body",
        content=b'{"decision": "\xff\xfe"}',
        headers=JSON,
    ),
    Case(
        "deep nesting", "POST", DECIDE, 400, "malformed_body", content=b"[" * 60_000, headers=JSON
    ),
    Case(
        "body over 64 KiB",
        "POST",
        DECIDE,
        413,
        "too_large",
        content=b" " * (64 * 1024 + 1),
        headers=JSON,
    ),
    Case(
        "text/plain body",
        "POST",
        DECIDE,
        415,
        "unsupported_media_type",
        content=b"{}",
        headers={"Content-Type": "text/plain"},
    ),
    Case("no body at all", "POST", DECIDE, 415, "unsupported_media_type"),
    Case(
        "bad dispatch id",
        "POST",
        "/v1/dispatches/a%20b/resolution",
        422,
        "invalid_request",
        {},
        title_has="dispatch_id",
    ),
    Case(
        "dispatch id too long",
        "POST",
        "/v1/dispatches/" + "a" * 129 + "/resolution",
        422,
        "invalid_request",
        {},
        title_has="dispatch_id",
    ),
    Case("unknown route", "GET", "/v1/nope", 404, "not_found"),
    Case("retry endpoint", "POST", "/v1/dispatches/{id}/retry", 404, "not_found"),
    Case("wrong method on decide", "GET", DECIDE, 405, "method_not_allowed"),
    Case("wrong method on queue", "DELETE", "/v1/manual-queue", 405, "method_not_allowed"),
    Case("openapi not served", "GET", "/openapi.json", 404, "not_found"),
    Case(
        "limit as float",
        "GET",
        "/v1/manual-queue?limit=7.0",
        422,
        "invalid_request",
        title_has="limit",
    ),
    Case(
        "limit with sign",
        "GET",
        "/v1/manual-queue?limit=%2B7",
        422,
        "invalid_request",
        title_has="limit",
    ),
    Case(
        "limit with underscore",
        "GET",
        "/v1/manual-queue?limit=1_0",
        422,
        "invalid_request",
        title_has="limit",
    ),
    Case(
        "limit above 100",
        "GET",
        "/v1/manual-queue?limit=101",
        422,
        "invalid_request",
        title_has="limit",
    ),
    Case(
        "limit huge",
        "GET",
        "/v1/manual-queue?limit=99999999999999999999999",
        422,
        "invalid_request",
        title_has="limit",
    ),
    Case(
        "cursor not base64",
        "GET",
        "/v1/manual-queue?cursor=%25%25%25",
        422,
        "invalid_request",
        title_has="cursor",
    ),
    Case(
        "cursor above bigint",
        "GET",
        f"/v1/manual-queue?cursor={cursor('99999999999999999999:d-1')}",
        422,
        "invalid_request",
        title_has="cursor",
    ),
    Case(
        "cursor with NUL id",
        "GET",
        f"/v1/manual-queue?cursor={cursor('1:a' + chr(0))}",
        422,
        "invalid_request",
        title_has="cursor",
    ),
    Case(
        "cursor negative",
        "GET",
        f"/v1/manual-queue?cursor={cursor('-1:d-1')}",
        422,
        "invalid_request",
        title_has="cursor",
    ),
]


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["content-type"] == "application/problem+json"
    doc = response.json()
    # A 409 also says where the dispatch stands now (state, version, control status).
    extra = {"current": doc["current"]} if status == 409 else {}
    assert doc == {
        "type": f"urn:resolver:problem:{code}",
        "title": doc["title"],
        "status": status,
        "code": code,
        **extra,
    }
    return dict(doc)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_request_gets_a_typed_masked_problem_and_writes_nothing(
    edge: httpx.Client,
    manual_item: tuple[str, int],
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
    case: Case,
) -> None:
    dispatch_id, version = manual_item
    kwargs: dict[str, Any] = {"headers": {**auth(token(signing_key)), **case.headers}}
    if isinstance(case.json_body, dict):
        overrides = dict(case.json_body)
        if "v" in overrides:
            overrides["expected_execution_version"] = overrides.pop("v")
        kwargs["json"] = body(version, **overrides)
    elif case.json_body is not None:
        kwargs["json"] = case.json_body
    if case.content is not None:
        kwargs["content"] = case.content
    response = edge.request(case.method, case.path.format(id=dispatch_id), **kwargs)
    doc = assert_problem(response, case.status, case.code)
    assert case.title_has in doc["title"]
    if case.status == 405:
        assert response.headers["allow"]
    assert sql.execution(dispatch_id)["state"] == "executing"
    assert sql.resolutions(dispatch_id) == []


def test_the_exact_bounds_are_accepted(
    edge: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey
) -> None:
    """The refusals above are the bounds, not a broken parser: the extremes still work."""
    dispatch_id, version = manual_item
    at_max = edge.post(
        DECIDE.format(id=dispatch_id),
        json=body(version, expected_execution_version=BIGINT_MAX),
        headers=auth(token(signing_key)),
    )
    assert_problem(at_max, 409, "conflict")  # reached the fence: a stale version, no 500
    page = edge.get(
        f"/v1/manual-queue?limit=100&cursor={cursor(f'{BIGINT_MAX}:zzz')}",
        headers=auth(token(signing_key)),
    )
    # `total` counts what matches the filter, whatever the page: the one manual item.
    assert page.status_code == 200
    assert page.json() == {"items": [], "next_cursor": None, "total": 1, "total_cap": 1000}
    ok = edge.get("/v1/manual-queue?limit=1", headers=auth(token(signing_key)))
    assert ok.status_code == 200 and ok.json()["items"][0]["dispatch_id"] == dispatch_id


class Exploding:
    """A store whose queue read fails with a bug, not a storage error."""

    def __init__(self, store: Storage) -> None:
        self._store = store

    def list_cases(self, *_args: Any) -> list[Any]:
        raise RuntimeError("bug with a secret: hunter2")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_unexpected_error_is_a_masked_500_and_the_connection_survives(
    store: Storage, jwks_file: Path, signing_key: rsa.RSAPrivateKey
) -> None:
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    with Server(create_app(Exploding(store), verifier, signer=TEST_SIGNER)) as client:  # type: ignore[arg-type]
        boom = client.get("/v1/manual-queue", headers=auth(token(signing_key)))
        after = client.get("/healthz")
        # The same TCP connection carried both: the 500 did not make the server hang up.
        ports = [
            r.extensions["network_stream"].get_extra_info("client_addr")[1] for r in (boom, after)
        ]
    assert ports[0] == ports[1]
    doc = assert_problem(boom, 500, "internal")
    assert doc["title"] == "internal error" and "hunter2" not in boom.text
    assert boom.headers.get("connection") != "close"
    assert after.status_code == 200 and after.headers["cache-control"] == "no-store"


def test_a_chunked_body_over_the_limit_is_413(
    edge: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey
) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must count as it reads
        for _ in range(64):
            yield b" " * 8192

    response = edge.post(
        DECIDE.format(id=manual_item[0]),
        content=chunks(),
        headers={**auth(token(signing_key)), **JSON},
    )
    assert "content-length" not in response.request.headers
    assert_problem(response, 413, "too_large")


def test_every_answer_is_no_store_including_probes_and_console(edge: httpx.Client) -> None:
    for path in ("/healthz", "/console", "/console/app.js", "/console/nope", "/nope"):
        assert edge.get(path).headers["cache-control"] == "no-store", path


def test_published_openapi_is_current_and_documents_every_problem() -> None:
    published = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert published == json.loads(json.dumps(openapi_document()))
    decide = published["paths"]["/v1/dispatches/{dispatch_id}/resolution"]["post"]
    assert set(decide["responses"]) == {
        "200",
        "202",  # a two-person case: recorded as a proposal
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "415",
        "422",
        "429",
        "500",
        "503",
    }
    for fenced in ("DecisionRequest", "BulkItem"):
        version = published["components"]["schemas"][fenced]["properties"][
            "expected_execution_version"
        ]
        assert (version["type"], version["minimum"], version["maximum"]) == (
            "integer",
            1,
            2**63 - 1,
        )
    for action in ("withdraw", "reject"):
        close = published["paths"][f"/v1/dispatches/{{dispatch_id}}/proposal/{action}"]["post"]
        assert {"200", "401", "403", "404", "409", "422", "429"} <= set(close["responses"])
    bulk = published["paths"]["/v1/resolutions/bulk"]["post"]
    assert set(bulk["responses"]) == {"200", "400", "401", "413", "415", "422", "429", "500", "503"}
    assert published["components"]["schemas"]["DecisionRequest"]["additionalProperties"] is False


def test_resolver_api_logs_json_only_and_never_the_query_string(
    database_url: str, jwks_file: Path, signing_key: rsa.RSAPrivateKey
) -> None:
    """The real `resolver api` process: uvicorn's lines, the access line and a rejected
    request's line are all JSON, and a token put in the query string is not logged."""
    api_port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")},
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_API_HOST": "127.0.0.1",
        "RESOLVER_API_PORT": str(api_port),
        "RESOLVER_OIDC_ISSUER": ISSUER,
        "RESOLVER_OIDC_AUDIENCE": AUDIENCE,
        "RESOLVER_OIDC_JWKS_FILE": str(jwks_file),
        **signing_env(jwks_file.parent),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "resolver", "api"], env=env, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    secret = token(signing_key)
    try:
        seen = []
        for line in proc.stderr:  # uvicorn says when it listens: no sleeping
            seen.append(line)
            if "Uvicorn running on" in line:
                break
        assert "Uvicorn running on" in seen[-1], "".join(seen)
        with httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=10) as client:
            assert client.get("/healthz").status_code == 200  # probes: counted, not logged
            leaked = client.get(f"/v1/manual-queue?access_token={secret}&limit=1")
            assert leaked.status_code == 401
            assert client.get("/v1/nope?token=x").status_code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    lines = [*seen, *proc.stderr.read().splitlines()]
    events = [json.loads(line) for line in lines if line.strip()]  # every line is JSON
    access = [e for e in events if e["event"] == "http_request"]
    assert [(e["path"], e["status"]) for e in access] == [
        ("/v1/manual-queue", 401),
        ("/v1/nope", 404),
    ]
    assert all(e["level"] for e in events)
    text = "\n".join(lines)
    assert secret not in text and "access_token" not in text and "Traceback" not in text


def test_the_docs_name_every_parameter_the_lists_take() -> None:
    """docs/manual-resolution.md describes the open lists' and the decisions' parameters in
    prose: each one the API takes is named there, as it is spelled."""
    published = openapi_document()
    prose = (ROOT / "docs" / "manual-resolution.md").read_text()
    lists = ("/v1/manual-queue", "/v1/waiting", "/v1/decisions", "/v1/find")
    taken = {
        parameter["name"]
        for path in lists
        for parameter in published["paths"][path]["get"]["parameters"]
        if parameter["in"] == "query"
    }
    assert {"sort", "cursor", "overridden_finding", "words"} <= taken
    assert sorted(name for name in taken if f"`{name}`" not in prose) == []
