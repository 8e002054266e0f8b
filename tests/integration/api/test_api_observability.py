"""`resolver api` probes and metrics over real HTTP (uvicorn on loopback), real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from prometheus_client import CollectorRegistry

from resolver.app.composition import ApiProcess, build_api, readiness_check
from resolver.app.config import load_settings
from resolver.db import migrate
from resolver.human.api import create_app
from resolver.human.auth import TokenVerifier
from resolver.telemetry.api_metrics import TOKEN_REJECTION_REASONS, ApiMetrics
from tests.helpers.api import auth, body, grant_alice
from tests.helpers.database import SECRET, SQL, with_password
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.signing import TEST_SIGNER, signing_env, signing_settings
from tests.helpers.stores import Storage
from tests.helpers.telemetry import free_port

DECIDE = "/v1/dispatches/{dispatch_id}/resolution"


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in an exposition text, or None when absent."""
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    prefix = f"{name}{{{wanted}}} " if labels else f"{name} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return None


@pytest.fixture
def api_process(database_url: str, jwks_file: Path, sql: SQL) -> Iterator[ApiProcess]:
    grant_alice(sql)
    settings = load_settings(
        database_url=with_password(database_url),
        http_host="127.0.0.1",
        http_port=free_port(),
        api_decisions_per_minute=100,
        **signing_settings(jwks_file.parent),
    )
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    process = build_api(settings, verifier)
    try:
        yield process
    finally:
        process.close()


def test_composed_api_serves_probes_and_counts_on_its_metrics_port(
    api_process: ApiProcess,
    manual_item: tuple[str, int],
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
) -> None:
    dispatch_id, version = manual_item
    assert api_process.endpoints is not None
    metrics_port = api_process.endpoints.port
    url = DECIDE.format(dispatch_id=dispatch_id)
    expired = token(signing_key, exp=int(time.time()) - 3600, iat=int(time.time()) - 7200)
    with Server(api_process.app) as client:
        health, ready = client.get("/healthz"), client.get("/readyz")
        step_up = client.post(url, json=body(version), headers=auth(token(signing_key, amr=[])))
        first = client.post(url, json=body(version), headers=auth(token(signing_key)))
        again = client.post(url, json=body(version), headers=auth(token(signing_key)))
        missing = client.get("/v1/manual-queue")
        rejected = client.get("/v1/manual-queue", headers=auth(expired))
        unknown = client.post(f"/v1/dispatches/{dispatch_id}/retry")

    # Unauthenticated, a status word only: the API port may face users.
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert step_up.json()["code"] == "step_up_required"
    assert [first.json()["result"], again.json()["result"]] == ["committed", "replayed"]
    assert [missing.status_code, rejected.status_code, unknown.status_code] == [401, 401, 404]
    assert sql.execution(dispatch_id)["state"] == "failed"

    status, text = scrape(metrics_port)
    assert status == 200
    route = "/v1/dispatches/{dispatch_id}/resolution"
    expected = {
        ("resolver_resolutions_total", (("outcome", "failed"), ("source", "manual"))): 1.0,
        ("resolver_resolutions_total", (("outcome", "succeeded"), ("source", "manual"))): 0.0,
        ("resolver_manual_decision_replays_total", (("outcome", "failed"),)): 1.0,
        ("resolver_api_step_up_required_total", ()): 1.0,
        ("resolver_api_token_rejections_total", (("reason", "missing"),)): 1.0,
        ("resolver_api_token_rejections_total", (("reason", "expired"),)): 1.0,
        ("resolver_api_token_rejections_total", (("reason", "signature"),)): 0.0,
        ("resolver_api_requests_total", (("route", route), ("status_class", "2xx"))): 2.0,
        ("resolver_api_requests_total", (("route", route), ("status_class", "4xx"))): 1.0,
        ("resolver_api_requests_total", (("route", "/healthz"), ("status_class", "2xx"))): 1.0,
        ("resolver_api_requests_total", (("route", "/readyz"), ("status_class", "2xx"))): 1.0,
        (
            "resolver_api_requests_total",
            (("route", "/v1/manual-queue"), ("status_class", "4xx")),
        ): 2.0,
        ("resolver_api_requests_total", (("route", "unmatched"), ("status_class", "4xx"))): 1.0,
    }
    for (name, labels), value in expected.items():
        assert sample(text, name, **dict(labels)) == value, (name, labels)
    assert sample(text, "resolver_api_request_duration_seconds_count", route=route) == 3.0
    assert 'resolver_api_build_info{python_version="' in text
    # Never a worker's liveness signal: the worker alerts read these as "a replica is up".
    for worker_only in ("resolver_build_info", "resolver_last_cycle", "resolver_cycles_total"):
        assert worker_only not in text
    for leak in (dispatch_id, "alice", SECRET, expired):
        assert leak not in text

    status, detail = scrape(metrics_port, "/readyz")
    assert status == 200
    assert json.loads(detail) == {"status": "ready", "schema_revision": migrate.head_revision()}
    assert scrape(metrics_port, "/healthz")[0] == 200


def test_api_without_http_port_serves_no_metrics_port(database_url: str, jwks_file: Path) -> None:
    settings = load_settings(
        database_url=database_url, http_port=0, **signing_settings(jwks_file.parent)
    )
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    process = build_api(settings, verifier)
    try:
        assert process.endpoints is None
    finally:
        process.close()


def test_readyz_is_503_with_a_status_word_when_the_schema_is_behind(
    database_url: str, store: Storage, jwks_file: Path
) -> None:
    migrate.downgrade(database_url, "base")
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    app = create_app(
        store, verifier, readiness=readiness_check(store, database_url), signer=TEST_SIGNER
    )
    with Server(app) as client:
        ready, health = client.get("/readyz"), client.get("/healthz")
    assert (ready.status_code, ready.json()) == (503, {"status": "not_ready"})
    assert health.status_code == 200  # alive: restarting would not migrate the database


def test_worker_and_api_stay_ready_on_a_newer_releases_schema(
    database_url: str, store: Storage, jwks_file: Path, sql: SQL
) -> None:
    # What the pre-upgrade migration of a newer release leaves behind for the old pods.
    sql.all("UPDATE alembic_version SET version_num = '9999_from_a_newer_release'")
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    readiness = readiness_check(store, database_url)
    with Server(create_app(store, verifier, readiness=readiness, signer=TEST_SIGNER)) as client:
        ready = client.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert readiness().detail == {
        "status": "ready",
        "schema_revision": "9999_from_a_newer_release",
        "expected_revision": migrate.head_revision(),
    }
    # A known older revision is never usable: the new code needs its migration.
    sql.all("UPDATE alembic_version SET version_num = '0001_schema_0_1_0'")
    behind = readiness_check(store, database_url)()
    assert (behind.ok, behind.detail["reason"]) == (False, "schema_mismatch")


def test_readyz_hides_an_unreachable_database(jwks_file: Path) -> None:
    url = f"postgresql://resolver:{SECRET}@127.0.0.1:1/app"
    dead = Storage(url, connect_timeout_seconds=0.5)
    dead.open()
    registry = CollectorRegistry()
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    app = create_app(
        dead,
        verifier,
        observer=ApiMetrics(registry),
        readiness=readiness_check(dead, url),
        signer=TEST_SIGNER,
    )
    try:
        with Server(app) as client:
            ready = client.get("/readyz")
            queue = client.get("/v1/manual-queue", headers=auth(token_for_unused_key()))
    finally:
        dead.close()
    assert (ready.status_code, ready.json()) == (503, {"status": "not_ready"})
    assert SECRET not in ready.text and "127.0.0.1" not in ready.text
    assert queue.status_code == 401
    labels = {"route": "/readyz", "status_class": "5xx"}
    assert registry.get_sample_value("resolver_api_requests_total", labels) == 1.0


def token_for_unused_key() -> str:
    return token(rsa.generate_private_key(public_exponent=65537, key_size=2048))


def test_storage_failure_counts_as_a_5xx(jwks_file: Path, signing_key: rsa.RSAPrivateKey) -> None:
    dead = Storage("postgresql://resolver@127.0.0.1:1/app", connect_timeout_seconds=0.5)
    dead.open()
    registry = CollectorRegistry()
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    try:
        with Server(
            create_app(dead, verifier, observer=ApiMetrics(registry), signer=TEST_SIGNER)
        ) as client:
            response = client.get("/v1/manual-queue", headers=auth(token(signing_key)))
    finally:
        dead.close()
    assert response.status_code == 503
    labels = {"route": "/v1/manual-queue", "status_class": "5xx"}
    assert registry.get_sample_value("resolver_api_requests_total", labels) == 1.0


def _now() -> int:
    return int(time.time())


def bad_tokens(key: rsa.RSAPrivateKey) -> dict[str, tuple[str, str]]:
    """case -> (token, the reason class the metrics must count it under)."""
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "iat": _now(),
        "exp": _now() + 60,
        "auth_time": _now(),
        "amr": ["mfa"],
    }
    return {
        "garbage": ("not.a.jwt", "malformed"),
        "forged": (token(other), "signature"),
        "none_alg": (
            jwt.encode(claims, None, algorithm="none", headers={"kid": "k1"}),
            "algorithm",
        ),
        "hs256": (token("k1-shared-secret-of-32-bytes-long!!", alg="HS256"), "algorithm"),
        "expired": (token(key, exp=_now() - 3600, iat=_now() - 7200), "expired"),
        "wrong_audience": (token(key, aud="someone-else"), "audience"),
        "wrong_issuer": (token(key, iss="https://evil.test"), "issuer"),
        "unknown_kid": (token(key, kid="k9"), "unknown_key"),
        "no_auth_time": (
            jwt.encode(
                {k: v for k, v in claims.items() if k != "auth_time"},
                key,
                algorithm="RS256",
                headers={"kid": "k1"},
            ),
            "claims",
        ),
        "string_auth_time": (token(key, auth_time="yesterday"), "claims"),
    }


@pytest.fixture
def observed(store: Storage, jwks_file: Path) -> Iterator[tuple[httpx.Client, Any]]:
    registry = CollectorRegistry()
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    with Server(
        create_app(store, verifier, observer=ApiMetrics(registry), signer=TEST_SIGNER)
    ) as client:
        yield client, registry


@pytest.mark.parametrize(
    "case",
    [
        "garbage",
        "forged",
        "none_alg",
        "hs256",
        "expired",
        "wrong_audience",
        "wrong_issuer",
        "unknown_kid",
        "no_auth_time",
        "string_auth_time",
    ],
)
def test_each_rejected_token_is_counted_under_its_reason_class(
    observed: tuple[httpx.Client, Any], signing_key: rsa.RSAPrivateKey, case: str
) -> None:
    client, registry = observed
    tok, reason = bad_tokens(signing_key)[case]
    response = client.get("/v1/manual-queue", headers=auth(tok))
    assert response.status_code == 401
    counts = {
        r: registry.get_sample_value("resolver_api_token_rejections_total", {"reason": r})
        for r in TOKEN_REJECTION_REASONS
    }
    assert {r: c for r, c in counts.items() if c} == {reason: 1.0}


def test_resolver_api_command_serves_probes_and_metrics(database_url: str, jwks_file: Path) -> None:
    """The real `resolver api` process, configured the way the chart configures it."""
    api_port, metrics_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")},
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_API_HOST": "127.0.0.1",
        "RESOLVER_API_PORT": str(api_port),
        "RESOLVER_HTTP_HOST": "127.0.0.1",
        "RESOLVER_HTTP_PORT": str(metrics_port),
        "RESOLVER_OIDC_ISSUER": ISSUER,
        "RESOLVER_OIDC_AUDIENCE": AUDIENCE,
        "RESOLVER_OIDC_JWKS_FILE": str(jwks_file),
        **signing_env(jwks_file.parent),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "resolver", "api"], env=env, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    try:
        seen = []
        for line in proc.stderr:  # uvicorn says when it listens: no sleeping
            seen.append(line)
            if "Uvicorn running on" in line:
                break
        assert "Uvicorn running on" in seen[-1], "".join(seen)
        with httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=10) as client:
            assert client.get("/healthz").json() == {"status": "ok"}
            assert client.get("/readyz").json() == {"status": "ready"}
            assert client.get("/v1/manual-queue").status_code == 401
        status, text = scrape(metrics_port)
        assert status == 200
        assert sample(text, "resolver_api_token_rejections_total", reason="missing") == 1.0
        assert sample(text, "resolver_resolutions_total", outcome="blocked", source="manual") == 0
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert "Traceback" not in proc.stderr.read()
