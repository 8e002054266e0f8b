"""A payments API for tests, served over TLS by uvicorn: refunds created with an idempotency key,
looked up by it; the resolver's token may only look up.

`POST /v1/refunds` (the writer's token, `Idempotency-Key`, `Resolver-Binding`) records the
refund, keeping the binding in its metadata, the way such APIs keep a caller's metadata;
`X-Test-Hold: 1` leaves it `processing`. `GET /v1/refunds?idempotency_key=K` answers the
refund (200) or 404. The reader's token is refused every write (403): the API's own access
rule. Every request is logged with its method, path and whose token it carried.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse

TOKENS = {"reader-token-1": "reader", "writer-token-1": "writer"}


@dataclass
class PaymentsState:
    refunds: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[tuple[str, str, str]] = field(default_factory=list)


def _app(state: PaymentsState) -> FastAPI:
    app = FastAPI()

    @app.middleware("http")
    async def access_log(request: Request, call_next: Any) -> Any:
        auth = request.headers.get("authorization", "")
        who = TOKENS.get(auth.removeprefix("Bearer "), "anonymous")
        state.log.append((request.method, request.url.path, who))
        if who == "anonymous":
            return JSONResponse({"error": "unauthenticated"}, status_code=401)
        if who == "reader" and request.method not in ("GET", "HEAD"):
            return JSONResponse({"error": "this token may only read"}, status_code=403)
        return await call_next(request)

    @app.post("/v1/refunds")
    async def create(
        request: Request,
        idempotency_key: str = Header(alias="Idempotency-Key"),
        binding: str = Header(default="", alias="Resolver-Binding"),
        hold: str = Header(default="", alias="X-Test-Hold"),
    ) -> JSONResponse:
        body = await request.json()
        refund = state.refunds.get(idempotency_key)
        if refund is None:
            refund = {
                "id": f"re_{len(state.refunds) + 1}",
                "amount": body.get("amount"),
                "status": "processing" if hold else "succeeded",
                "code": None if hold else "refunded",
                "metadata": {"resolver_binding": binding} if binding else {},
            }
            state.refunds[idempotency_key] = refund
        return JSONResponse({"data": refund}, status_code=200)

    @app.get("/v1/refunds")
    async def lookup(idempotency_key: str) -> JSONResponse:
        refund = state.refunds.get(idempotency_key)
        if refund is None:
            return JSONResponse({"error": "no such refund"}, status_code=404)
        return JSONResponse({"data": refund})

    return app


def _pki(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1: (ca.pem, server.pem, server.key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "payments test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@dataclass
class PaymentsApi:
    url: str
    ca_bundle: Path
    state: PaymentsState

    def settings(self, **more: Any) -> dict[str, Any]:
        """The provider's settings: TLS against the test CA, the reader's token."""
        return {
            "base_url": self.url,
            "ca_bundle": str(self.ca_bundle),
            "token_env": "PAYMENTS_READER_TOKEN",
            "path": "/v1/refunds?idempotency_key={idempotency_key}",
            "status_pointer": "/data/status",
            "binding_pointer": "/data/metadata/resolver_binding",
            "result_code_pointer": "/data/code",
            "statuses": {
                "succeeded": ["succeeded"],
                "failed": ["failed", "canceled"],
                "still_running": ["processing"],
            },
            **more,
        }


@contextmanager
def running_payments_api(folder: Path) -> Iterator[PaymentsApi]:
    ca, cert, key = _pki(folder)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = PaymentsState()
    config = uvicorn.Config(
        _app(state),
        host="127.0.0.1",
        port=port,
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the payments API did not start")
        time.sleep(0.02)
    try:
        yield PaymentsApi(f"https://127.0.0.1:{port}", ca, state)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
