"""Property: whatever arrives over HTTP, the API answers no 5xx and only a status the
published OpenAPI document lists for that operation (404/405 off the routes), always
`no-store`, a problem document for every error. Hypothesis drives raw methods, paths,
queries, headers and bodies against the real app on real PostgreSQL; bounded to a few
hundred requests (seconds), the seed printed on failure."""

from __future__ import annotations

import base64
import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from resolver.human.api import MAX_BODY_BYTES, RateLimiter, create_app, openapi_document
from resolver.human.auth import TokenVerifier
from tests.helpers.database import SQL
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.signing import TEST_SIGNER
from tests.helpers.stores import Storage

DOCUMENT = openapi_document()
# Operation templates as regexes on the decoded path the server routes on.
OPERATIONS = {
    (re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"), method.upper()): {
        int(status) for status in op["responses"]
    }
    for path, ops in DOCUMENT["paths"].items()
    for method, op in ops.items()
}
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def documented(method: str, path: str) -> set[int]:
    matched = [(m, statuses) for (rx, m), statuses in OPERATIONS.items() if rx.match(path)]
    for op_method, statuses in matched:
        if op_method == method:
            return statuses
    return {405} if matched else {404}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=10,
)
segment = st.one_of(
    st.sampled_from(["ITEM", "d-1", "x" * 129, "a b", "é", "%00", "\x00"]),
    st.text(
        alphabet=st.characters(blacklist_characters="/", blacklist_categories=["Cs"]),
        min_size=1,
        max_size=12,
    ).filter(lambda s: s not in (".", "..")),
).map(lambda s: quote(s, safe=""))
paths = st.one_of(
    st.just("/v1/manual-queue"),
    st.builds(lambda s: f"/v1/dispatches/{s}/resolution", segment),
    st.builds(
        lambda s, t: f"/v1/dispatches/{s}/{t}",
        segment,
        st.sampled_from(["retry", "reset", "resolution/x"]),
    ),
    st.builds(
        lambda s, t: f"/v1/dispatches/{s}/proposal/{t}",
        segment,
        st.sampled_from(["withdraw", "reject", "confirm"]),
    ),
    st.builds(lambda s: f"/v1/{s}", segment),
)
fields = st.sampled_from(
    [
        "decision",
        "mutation_id",
        "expected_execution_version",
        "reason_code",
        "evidence_digest",
        "extra",
    ]
)
# A stale version: the decision reaches the fenced commit and loses (409), so the item stays
# undecided and every example meets the same, fullest path through the database.
STALE_VERSION = 1_000_000
BASE = {
    "decision": "confirm_failed",
    "mutation_id": "m-1",
    "expected_execution_version": STALE_VERSION,
    "reason_code": "checked",
}
tricky = st.one_of(
    st.sampled_from(["confirm_succeeded", "abandon_unknown", "a" * 64, "m-2", "", "\x00"]),
    st.sampled_from([2**63, 2**63 - 1, -(2**63), 10**30, 1, 0, "7", 7.0, True, None]),
    st.integers(),
    json_values,
)
# Usually one field changed (so the others stay valid and the request gets far), sometimes
# two, sometimes one dropped.
near_valid = st.builds(
    lambda changes, drop: {**{k: v for k, v in BASE.items() if k not in drop}, **dict(changes)},
    st.lists(st.tuples(fields, tricky), min_size=1, max_size=2),
    st.sets(fields, max_size=1).filter(lambda d: not d) | st.sets(fields, max_size=1),
)
# Every field valid but the version, which is any integer: where a number reaches SQL.
versions = st.builds(
    lambda v, changes: {**BASE, "expected_execution_version": v, **dict(changes)},
    st.one_of(st.sampled_from([2**63, 2**63 - 1, -(2**63), 10**30, 1, 0]), st.integers()),
    st.lists(st.tuples(st.sampled_from(["decision", "evidence_digest"]), tricky), max_size=1),
)
# A withdrawal or rejection of the item's proposal: there is none, so a valid one is a 409.
PROPOSAL_BASE = {"mutation_id": "m-9", "reason_code": "checked"}
proposal_bodies = st.builds(
    lambda changes, drop: {
        **{k: v for k, v in PROPOSAL_BASE.items() if k not in drop},
        **dict(changes),
    },
    st.lists(st.tuples(st.sampled_from([*PROPOSAL_BASE, "extra"]), tricky), max_size=2),
    st.sets(st.sampled_from(list(PROPOSAL_BASE)), max_size=1),
)
bodies = st.one_of(
    st.none(),
    st.binary(max_size=64),
    near_valid.map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=1, max_value=5000).map(lambda n: b"[" * n + b"]" * n),
    st.sampled_from([b"\xff\xfe", b'{"a": "\xc3\x28"}', b"{" * 200_000]),
)
cursors = st.one_of(
    st.text(max_size=40),
    st.builds(
        lambda a, b: base64.urlsafe_b64encode(f"{a}:{b}".encode()).decode(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.text(max_size=10),
    ),
)
queries = st.dictionaries(
    st.sampled_from(["limit", "cursor", "access_token", "x"]),
    st.one_of(st.integers(-5, 200).map(str), st.text(max_size=10), cursors),
    max_size=3,
)
# The decisions list's filters, near valid or not: the lookup, the action type and finding
# filters and the time range reach SQL beside the paging.
decision_queries = st.dictionaries(
    st.sampled_from(
        [
            "q",
            "action_type",
            "overridden_finding",
            "project_id",
            "user_id",
            "since_ms",
            "until_ms",
            "limit",
            "cursor",
        ]
    ),
    st.one_of(
        st.sampled_from(
            ["ITEM", "idem-ITEM", "shell.exec", "conflict", "unsupported", "proj-1", "alice"]
        ),
        st.sampled_from(["x" * 129, "a b", "Upper", "", "9223372036854775808", "-1", "1e3"]),
        st.integers(-5, 2**64).map(str),
        st.text(max_size=10),
        cursors,
    ),
    max_size=4,
)
content_types = st.sampled_from(
    [None, "application/json", "application/problem+json", "text/plain", "multipart/form-data"]
)


CONTROL_CLAIMS: list[dict[str, Any]] = [
    {"sub": "al\x00ice"},
    {"sub": "alice\r\n"},
    {"amr": ["mfa", "\x00"]},
    {"iss": ISSUER + "\x00"},
]


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    query: dict[str, str]
    header_index: int  # 0 is a valid, strongly authenticated token of a granted user
    content_type: str | None
    body: bytes | None


anything = st.builds(
    Call,
    st.sampled_from(METHODS),
    paths,
    queries,
    st.integers(0, 5 + len(CONTROL_CLAIMS)),
    content_types,
    bodies,
)
# Half the examples get past authentication and parsing to the decision, the proposal
# routes and the queue read: where a value reaches SQL, a 500 would hide.
aimed = st.one_of(
    st.builds(
        Call,
        st.just("POST"),
        st.just("/v1/dispatches/ITEM/resolution"),
        st.just({}),
        st.just(0),
        st.just("application/json"),
        st.one_of(near_valid, versions).map(lambda d: json.dumps(d).encode()),
    ),
    st.builds(
        Call,
        st.just("POST"),
        st.sampled_from(
            ["/v1/dispatches/ITEM/proposal/withdraw", "/v1/dispatches/ITEM/proposal/reject"]
        ),
        st.just({}),
        st.sampled_from([0, 1]),
        st.just("application/json"),
        proposal_bodies.map(lambda d: json.dumps(d).encode()),
    ),
    st.builds(
        Call,
        st.just("GET"),
        st.just("/v1/manual-queue"),
        queries,
        st.just(0),
        st.none(),
        st.none(),
    ),
    st.builds(
        Call,
        st.just("GET"),
        st.just("/v1/decisions"),
        decision_queries,
        st.just(0),
        st.none(),
        st.none(),
    ),
)


@pytest.fixture
def fuzz_target(
    store: Storage,
    jwks_file: Path,
    sql: SQL,
    manual_item: tuple[str, int],
    signing_key: rsa.RSAPrivateKey,
) -> Iterator[tuple[httpx.Client, str, list[dict[str, str]]]]:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    # Signed once: the test measures the API, not RSA.
    headers = [
        {"Authorization": f"Bearer {token(signing_key)}"},
        {"Authorization": f"Bearer {token(signing_key, amr=['pwd'])}"},
        {"Authorization": f"Bearer {token(signing_key, sub='mallory')}"},
        {"Authorization": "Bearer not.a.jwt"},
        {"Authorization": "Basic YWxpY2U6cHc="},
        {},
        # Verified tokens whose claims carry control characters: 401, never a 500 from the
        # database refusing a NUL.
        *({"Authorization": f"Bearer {token(signing_key, **claims)}"} for claims in CONTROL_CLAIMS),
    ]
    with Server(
        create_app(store, verifier, limiter=RateLimiter(per_minute=100_000), signer=TEST_SIGNER)
    ) as client:
        yield client, manual_item[0], headers


def check(client: httpx.Client, item: str, header_choices: list[dict[str, str]], call: Call) -> int:
    path = call.path.replace("ITEM", item)
    params = {name: value.replace("ITEM", item) for name, value in call.query.items()}
    headers: dict[str, Any] = dict(header_choices[call.header_index])
    if call.content_type is not None:
        headers["Content-Type"] = call.content_type
    response = client.request(call.method, path, params=params, headers=headers, content=call.body)
    status = response.status_code
    assert status < 500, (status, response.text)
    # The body limit holds before routing: on any path, and only there, an oversized body is 413.
    oversized = len(call.body or b"") > MAX_BODY_BYTES
    expected = {413} if oversized else documented(call.method, unquote(path)) - {413}
    assert status in expected, (call.method, path, status)
    assert response.headers["cache-control"] == "no-store"
    if status >= 400:
        assert response.headers["content-type"] == "application/problem+json"
        doc = response.json()
        assert doc["status"] == status and re.fullmatch(r"[a-z_]+", doc["code"])
    return status


BOUNDED = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    print_blob=True,
)


@pytest.mark.parametrize("calls", [anything, aimed], ids=["anything", "aimed"])
def test_no_5xx_and_no_undocumented_status(
    fuzz_target: tuple[httpx.Client, str, list[dict[str, str]]], calls: st.SearchStrategy[Call]
) -> None:
    """`anything`: raw methods, paths, headers and bodies; `aimed`: authenticated, well-framed
    decisions and queue reads whose values are fuzzed, so they reach the database."""
    seen: set[int] = set()

    # Pinned examples: every class of answer is checked on every run, whatever the draw.
    @BOUNDED
    @example(Call("GET", "/v1/manual-queue", {}, 3, None, None))  # 401
    @example(Call("GET", "/v1/nope", {}, 0, None, None))  # 404
    @example(Call("DELETE", "/v1/manual-queue", {}, 0, None, None))  # 405
    @example(Call("GET", "/v1/manual-queue", {"limit": "7.0"}, 0, None, None))  # 422
    @example(Call("GET", "/v1/manual-queue", {}, 0, None, None))  # 200
    @example(Call("GET", "/v1/decisions", {"q": "ITEM", "action_type": "a.b"}, 0, None, None))
    @example(Call("GET", "/v1/decisions", {"overridden_finding": "bogus"}, 0, None, None))
    @example(
        Call(
            "POST",
            "/v1/dispatches/ITEM/resolution",
            {},
            0,
            "application/json",
            json.dumps(BASE).encode(),
        )
    )  # 409
    @example(
        Call(
            "POST",
            "/v1/dispatches/ITEM/proposal/reject",
            {},
            0,
            "application/json",
            json.dumps(PROPOSAL_BASE).encode(),
        )
    )  # 409 no_proposal
    @given(calls)
    def request(call: Call) -> None:
        seen.add(check(*fuzz_target, call))

    request()
    assert {200, 401, 404, 405, 409, 422} <= seen, seen


# Any text in the identity claims, control characters included: signed and verified, so
# the claims reach the checks and (when they pass) the database.
claim_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"]), min_size=0, max_size=12
) | st.sampled_from(["\x00", "a\x00b", "\x7f", "\u0085", "alice", "\u2028"])


@BOUNDED
@given(sub=claim_text, amr=st.lists(claim_text, max_size=3))
def _claims_never_5xx(
    target: tuple[httpx.Client, str, list[dict[str, str]]],
    key: rsa.RSAPrivateKey,
    sub: str,
    amr: list[str],
) -> None:
    client, item, _ = target
    headers = {"Authorization": f"Bearer {token(key, sub=sub, amr=[*amr, 'mfa'])}"}
    for method, path, body in (
        ("GET", "/v1/manual-queue", None),
        ("POST", f"/v1/dispatches/{item}/resolution", json.dumps(BASE).encode()),
    ):
        response = client.request(
            method, path, headers={**headers, "Content-Type": "application/json"}, content=body
        )
        assert response.status_code < 500, (sub, amr, response.text)
        controls = any(unicodedata.category(c) == "Cc" for c in sub + "".join(amr))
        if controls:
            assert response.status_code == 401, (sub, amr, response.status_code)
            assert response.json()["code"] == "invalid_token"


def test_claims_with_any_characters_answer_401_or_a_documented_status(
    fuzz_target: tuple[httpx.Client, str, list[dict[str, str]]],
    signing_key: rsa.RSAPrivateKey,
) -> None:
    _claims_never_5xx(fuzz_target, signing_key)
