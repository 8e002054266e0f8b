"""A real OCI registry for tests: Debian's `docker-registry` (the CNCF distribution registry)
with token authentication, and the token service it trusts.

The registry verifies every request's bearer token (signed by the token service's key, which
its `rootcertbundle` holds) and grants exactly the actions the token lists: the token service
gives the `writer` login `pull,push` and the `reader` login `pull` only. So the resolver's
credential can only read, by the registry's own access rule, and the registry's access log (its
stderr, one line per request with its method) shows what each request did.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

REGISTRY = shutil.which("docker-registry") or "/usr/bin/docker-registry"
SERVICE = "test-registry"
ISSUER = "test-token-service"
USERS = {"reader": ("reader-pw", ["pull"]), "writer": ("writer-pw", ["pull", "push"])}
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"


def available() -> bool:
    return Path(REGISTRY).exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _key_and_cert(folder: Path) -> tuple[Any, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (folder / "token.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert.public_bytes(serialization.Encoding.DER)


class TokenService:
    """The token endpoint: Basic auth in, a JWT granting the login's actions out."""

    def __init__(self, key: Any, cert_der: bytes) -> None:
        self.key = key
        self.x5c = [base64.b64encode(cert_der).decode()]
        self.issued: list[tuple[str, str]] = []

    def token(self, user: str, scope: str) -> str:
        actions: list[str] = []
        access = []
        if scope:
            kind, name, wanted = scope.split(":", 2)
            granted = USERS[user][1]
            actions = [a for a in wanted.split(",") if a in granted]
            access = [{"type": kind, "name": name, "actions": actions}]
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "sub": user,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        self.issued.append((user, ",".join(actions)))
        return jwt.encode(claims, self.key, algorithm="ES256", headers={"x5c": self.x5c})


def _handler(service: TokenService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            auth = self.headers.get("Authorization", "")
            user = None
            if auth.startswith("Basic "):
                name, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                if name in USERS and USERS[name][0] == password:
                    user = name
            if user is None:
                self.send_response(401)
                self.end_headers()
                return
            token = service.token(user, query.get("scope", [""])[0])
            body = json.dumps({"token": token, "access_token": token, "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@dataclass
class Registry:
    url: str
    realm: str
    log: Path
    tokens: TokenService

    def settings(self, **more: Any) -> dict[str, Any]:
        """The provider's settings for this registry, reading as `reader`."""
        return {
            "registry_url": self.url,
            "token_realm": self.realm,
            "service": SERVICE,
            "username": "reader",
            "password_env": "REGISTRY_READER_PASSWORD",
            **more,
        }

    def token(self, user: str, repository: str, actions: str) -> str:
        reply = httpx.get(
            self.realm,
            params={"service": SERVICE, "scope": f"repository:{repository}:{actions}"},
            auth=(user, USERS[user][0]),
        )
        reply.raise_for_status()
        return str(reply.json()["token"])

    def push_blob(self, repository: str, data: bytes, user: str = "writer") -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        headers = {"Authorization": f"Bearer {self.token(user, repository, 'pull,push')}"}
        started = httpx.post(f"{self.url}/v2/{repository}/blobs/uploads/", headers=headers)
        started.raise_for_status()
        location = started.headers["Location"]
        if location.startswith("/"):
            location = self.url + location
        sep = "&" if "?" in location else "?"
        done = httpx.put(
            f"{location}{sep}digest={digest}",
            content=data,
            headers={**headers, "Content-Type": "application/octet-stream"},
        )
        done.raise_for_status()
        return digest

    def push_manifest(
        self, repository: str, tag: str, manifest: dict[str, Any], user: str = "writer"
    ) -> tuple[int, str]:
        """PUT a manifest at `tag`: (status, the registry's digest of it)."""
        body = json.dumps(manifest).encode()
        headers = {
            "Authorization": f"Bearer {self.token(user, repository, 'pull,push')}",
            "Content-Type": OCI_MANIFEST,
        }
        reply = httpx.put(
            f"{self.url}/v2/{repository}/manifests/{tag}", content=body, headers=headers
        )
        return reply.status_code, "sha256:" + hashlib.sha256(body).hexdigest()

    def methods(self) -> list[tuple[str, str]]:
        """(method, path) of every request the registry answered, from its access log."""
        found = []
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            method = entry.get("http.request.method")
            if method and entry.get("msg") == "response completed":
                found.append((method, str(entry.get("http.request.uri"))))
        return found


def image(
    registry: Registry, repository: str, annotations: dict[str, str], layer: bytes
) -> dict[str, Any]:
    """An OCI manifest of one layer, its blobs pushed as the writer."""
    config = json.dumps({"architecture": "amd64", "os": "linux"}).encode()
    config_digest = registry.push_blob(repository, config)
    layer_digest = registry.push_blob(repository, layer)
    return {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": len(layer)}],
        "annotations": annotations,
    }


def layer_digests(config: bytes, layer: bytes) -> tuple[str, str]:
    return (
        "sha256:" + hashlib.sha256(config).hexdigest(),
        "sha256:" + hashlib.sha256(layer).hexdigest(),
    )


@contextmanager
def running_registry() -> Iterator[Registry]:
    root = Path(tempfile.mkdtemp(prefix="resolver-registry-"))
    key, cert_der = _key_and_cert(root)
    tokens = TokenService(key, cert_der)
    token_server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(tokens))
    threading.Thread(target=token_server.serve_forever, daemon=True).start()
    realm = f"http://127.0.0.1:{token_server.server_address[1]}/token"
    port = _free_port()
    config = root / "config.yml"
    config.write_text(
        json.dumps(
            {
                "version": 0.1,
                "log": {"level": "info", "formatter": "json", "accesslog": {"disabled": True}},
                "storage": {"filesystem": {"rootdirectory": str(root / "data")}},
                "http": {"addr": f"127.0.0.1:{port}"},
                "auth": {
                    "token": {
                        "realm": realm,
                        "service": SERVICE,
                        "issuer": ISSUER,
                        "rootcertbundle": str(root / "token.crt"),
                    }
                },
            }
        )
    )
    log = root / "registry.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [REGISTRY, "serve", str(config)], stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/v2/").status_code == 401:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("docker-registry did not start: " + log.read_text()[-2000:])
            time.sleep(0.05)
        yield Registry(url, realm, log, tokens)
    finally:
        server.terminate()
        server.wait(timeout=30)
        token_server.shutdown()
        shutil.rmtree(root, ignore_errors=True)
