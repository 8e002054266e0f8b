"""Test identity provider: RSA signing keys, a JWKS file, tokens, and a loopback uvicorn server."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER, AUDIENCE = "https://idp.test", "resolver-api"


@pytest.fixture(scope="session")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def jwks_file(tmp_path: Path, signing_key: rsa.RSAPrivateKey) -> Path:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{**public, "kid": "k1", "alg": "RS256", "use": "sig"}]}))
    return path


def token(key: Any, *, alg: str = "RS256", kid: str = "k1", **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "iat": now,
        "exp": now + 300,
        "auth_time": now - 30,
        "amr": ["pwd", "mfa"],
        **claims,
    }
    return jwt.encode(body, key, algorithm=alg, headers={"kid": kid})


class Server:
    def __init__(self, app: Any, port: int = 0) -> None:
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None)
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> httpx.Client:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:  # uvicorn's own readiness flag
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self._server.should_exit = True
        self._thread.join(10)
