"""Identity-provider key rotation under a running API: no restart, no window of rejections.

The issuer's keys come from a real HTTP JWKS endpoint on loopback (the `jwks_uri` mode) or
from a file replaced the way a ConfigMap update replaces it; the API is the real
`resolver api` process, or the app over real HTTP where a controlled clock is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.app.config import Settings
from resolver.core.errors import ConfigError
from resolver.human.api import create_app
from resolver.human.auth import JwksFile, JwksUrl, TokenVerifier
from tests.helpers.clocks import FakeClock
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.signing import TEST_SIGNER, signing_env
from tests.helpers.stores import Storage
from tests.helpers.telemetry import free_port

QUEUE = "/v1/manual-queue"


def jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {**public, "kid": kid, "alg": "RS256", "use": "sig"}


def jwks(*keys: dict[str, Any]) -> dict[str, Any]:
    return {"keys": list(keys)}


class Idp:
    """A JWKS endpoint whose document the test rotates; counts the fetches it answers."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document: dict[str, Any] | None = document
        self.fetches = 0
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                idp.fetches += 1
                if idp.document is None:
                    self.send_error(503)
                    return
                body = json.dumps(idp.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/jwks.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def idp(signing_key: rsa.RSAPrivateKey) -> Iterator[Idp]:
    server = Idp(jwks(jwk(signing_key, "k1")))
    yield server
    server.close()


def status_with(client: httpx.Client, tok: str) -> int:
    return client.get(QUEUE, headers={"Authorization": f"Bearer {tok}"}).status_code


def poll(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


class ResolverApi:
    """The real `resolver api` process, configured by environment as the chart does."""

    def __init__(self, database_url: str, **settings: str) -> None:
        self.port = free_port()
        self._keys = tempfile.TemporaryDirectory()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")},
            "RESOLVER_DATABASE_URL": database_url,
            "RESOLVER_API_HOST": "127.0.0.1",
            "RESOLVER_API_PORT": str(self.port),
            "RESOLVER_OIDC_ISSUER": ISSUER,
            "RESOLVER_OIDC_AUDIENCE": AUDIENCE,
            **signing_env(Path(self._keys.name)),
            **settings,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "resolver", "api"], env=env, stderr=subprocess.PIPE, text=True
        )

    def __enter__(self) -> httpx.Client:
        assert self.proc.stderr is not None
        seen = []
        for line in self.proc.stderr:  # uvicorn says when it listens: no sleeping
            seen.append(line)
            if "Uvicorn running on" in line:
                break
        assert seen and "Uvicorn running on" in seen[-1], "".join(seen)
        # Drain the log so the process never blocks on a full pipe.
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=15)
        self._keys.cleanup()


def test_resolver_api_follows_a_rotation_at_the_jwks_url(
    database_url: str, idp: Idp, signing_key: rsa.RSAPrivateKey, new_key: rsa.RSAPrivateKey
) -> None:
    settings = {
        "RESOLVER_OIDC_JWKS_URL": idp.url,
        "RESOLVER_OIDC_JWKS_CACHE_SECONDS": "1",
        "RESOLVER_OIDC_JWKS_REFETCH_MIN_SECONDS": "0",
    }
    with ResolverApi(database_url, **settings) as client:
        old, new = token(signing_key, kid="k1"), token(new_key, kid="k2")
        assert status_with(client, old) == 200
        assert status_with(client, new) == 401, "k2 is not published yet"
        # The rotation: the issuer publishes k2 and drops k1.
        idp.document = jwks(jwk(new_key, "k2"))
        # A token naming the unknown kid refetches at once: no rejection window.
        assert status_with(client, new) == 200
        # The retired key stops working once the cached set expires (1 s here).
        poll(lambda: status_with(client, old) == 401)
        assert status_with(client, new) == 200


def test_resolver_api_follows_a_rotated_jwks_file(
    database_url: str, tmp_path: Path, signing_key: rsa.RSAPrivateKey, new_key: rsa.RSAPrivateKey
) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks(jwk(signing_key, "k1"))))
    with ResolverApi(database_url, RESOLVER_OIDC_JWKS_FILE=str(path)) as client:
        old, new = token(signing_key, kid="k1"), token(new_key, kid="k2")
        assert status_with(client, old) == 200
        assert status_with(client, new) == 401
        # As the kubelet updates a ConfigMap volume: write aside, then swap atomically.
        staged = tmp_path / "jwks.json.new"
        staged.write_text(json.dumps(jwks(jwk(new_key, "k2"))))
        os.replace(staged, path)
        assert status_with(client, new) == 200
        assert status_with(client, old) == 401


def test_forged_kids_refetch_at_most_once_per_interval_and_an_outage_keeps_the_keys(
    store: Storage, idp: Idp, signing_key: rsa.RSAPrivateKey, new_key: rsa.RSAPrivateKey
) -> None:
    clock = FakeClock()
    source = JwksUrl(idp.url, cache_seconds=300, refetch_min_seconds=30, clock=clock)
    verifier = TokenVerifier.from_jwks_url(source, issuer=ISSUER, audience=AUDIENCE)
    assert idp.fetches == 1  # at start-up
    with Server(create_app(store, verifier, signer=TEST_SIGNER)) as client:
        for n in range(20):
            assert status_with(client, token(new_key, kid=f"forged-{n}")) == 401
        assert idp.fetches == 1, "no refetch within 30 s of the last one"
        clock.now += 31
        for n in range(20):
            assert status_with(client, token(new_key, kid=f"forged-{n}")) == 401
        assert idp.fetches == 2, "only the first unknown kid refetches"
        # A real rotation within the interval waits for it; after it, one refetch finds k2.
        idp.document = jwks(jwk(signing_key, "k1"), jwk(new_key, "k2"))
        assert status_with(client, token(new_key, kid="k2")) == 401
        clock.now += 31
        assert status_with(client, token(new_key, kid="k2")) == 200
        assert idp.fetches == 3
        # The identity provider goes down as the cache expires: the keys held keep working.
        idp.document = None
        clock.now += 301
        assert status_with(client, token(signing_key, kid="k1")) == 200
        assert idp.fetches == 4
        assert status_with(client, token(new_key, kid="k2")) == 200
        assert idp.fetches == 4, "a failed fetch counts against the interval too"


def test_a_broken_rewrite_of_the_file_keeps_the_previous_keys(
    tmp_path: Path, signing_key: rsa.RSAPrivateKey
) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks(jwk(signing_key, "k1"))))
    source = JwksFile(path)
    assert source.key("k1") is not None
    path.write_text('{"keys": [')  # half written
    assert source.key("k1") is not None
    path.write_text(json.dumps(jwks()))  # empty set: refused, previous keys kept
    assert source.key("k1") is not None


def test_an_unreachable_jwks_url_fails_start_up_with_its_reason(idp: Idp) -> None:
    idp.document = None
    with pytest.raises(ConfigError, match="RESOLVER_OIDC_JWKS_URL: cannot load"):
        JwksUrl(idp.url).start()


@pytest.mark.parametrize(
    ("url", "accepted"),
    [
        ("https://idp.example/.well-known/jwks.json", True),
        ("http://127.0.0.1:8080/jwks", True),
        ("http://idp.example/jwks", False),
        ("ftp://idp.example/jwks", False),
    ],
)
def test_the_jwks_url_must_use_tls_off_loopback(url: str, accepted: bool) -> None:
    if accepted:
        assert Settings(oidc_jwks_url=url).oidc_jwks_url == url
    else:
        with pytest.raises(ValueError, match="https"):
            Settings(oidc_jwks_url=url)


def test_file_and_url_together_are_refused(tmp_path: Path) -> None:
    settings = Settings(
        oidc_issuer=ISSUER,
        oidc_audience=AUDIENCE,
        oidc_jwks_file=tmp_path / "jwks.json",
        oidc_jwks_url="https://idp.example/jwks",
    )
    with pytest.raises(ConfigError, match="not both"):
        settings.require_oidc()
