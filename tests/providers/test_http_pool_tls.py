"""`http_receipt`'s client is fast and polite: keep-alive, TLS settings, in-flight and rate caps.

Against a real HTTP(S) receipt server on 127.0.0.1; the TLS material is a throwaway CA made
here with `cryptography`.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from providers.http_receipt import HttpReceiptProvider, create
from resolver.core.domain import DispatchIdentity, FindingKind, canonical_json
from resolver.core.errors import ConfigError
from resolver.evidence.contract import Scenario
from resolver.evidence.readonly_http import (
    HttpUnavailable,
    ReadOnlyHttpClient,
    RequestPacer,
    TlsSettings,
)
from resolver.evidence.receipt_server import ReceiptServer, running_receipt_server
from resolver.evidence.receipts import KeyRing
from tests.helpers.clocks import FakeClock
from tests.helpers.harnesses import new_identity, signed

# -- a throwaway PKI ---------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def _write_cert(cert: x509.Certificate, path: Path) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    common_name: str,
    *,
    server: bool,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    return key, builder.sign(ca_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca_key, ca_cert = _ca("receipt test CA")
    server_key, server_cert = _leaf(ca_key, ca_cert, "127.0.0.1", server=True)
    client_key, client_cert = _leaf(ca_key, ca_cert, "resolver", server=False)
    _, other_cert = _ca("someone else's CA")
    return Pki(
        ca=_write_cert(ca_cert, d / "ca.pem"),
        server_cert=_write_cert(server_cert, d / "server.pem"),
        server_key=_write_key(server_key, d / "server.key"),
        client_cert=_write_cert(client_cert, d / "client.pem"),
        client_key=_write_key(client_key, d / "client.key"),
        other_ca=_write_cert(other_cert, d / "other-ca.pem"),
    )


def _server_context(pki: Pki, *, require_client_cert: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki.ca)
    return context


@pytest.fixture
def mtls_server(pki: Pki) -> Iterator[ReceiptServer]:
    with running_receipt_server(_server_context(pki, require_client_cert=True)) as server:
        yield server


def _plant(server: ReceiptServer, keys: KeyRing) -> DispatchIdentity:
    identity = new_identity(None)
    body = canonical_json(signed(identity, keys, Scenario.SUCCEEDED))
    server.plant(identity.idempotency_key, 200, body)
    return identity


def _provider(
    url: str, keys: KeyRing, tls: TlsSettings | None, timeout: float = 2.0
) -> HttpReceiptProvider:
    client = ReadOnlyHttpClient(url, timeout_seconds=timeout, max_body_bytes=8192, tls=tls)
    return HttpReceiptProvider(client, keys, timeout)


# -- TLS ---------------------------------------------------------------------------------


def test_mutual_tls_with_the_configured_ca_and_client_certificate(
    mtls_server: ReceiptServer, pki: Pki, receipt_keys: KeyRing
) -> None:
    identities = [_plant(mtls_server, receipt_keys) for _ in range(3)]
    tls = TlsSettings(ca_bundle=pki.ca, client_cert=pki.client_cert, client_key=pki.client_key)
    provider = _provider(mtls_server.base_url, receipt_keys, tls)
    try:
        assert provider.inspect(identities[0]).kind is FindingKind.VERIFIED_SUCCEEDED
        page = provider.inspect_page(identities)
        assert provider.inspect(identities[1]).kind is FindingKind.VERIFIED_SUCCEEDED
    finally:
        provider.close()
    assert {f.kind for f in page.values()} == {FindingKind.VERIFIED_SUCCEEDED}
    assert mtls_server.base_url.startswith("https://")
    # The first connection and its handshake served the next probes (TLS 1.3's session
    # tickets, read after the handshake, do not make a pooled connection look dropped).
    assert len(mtls_server.seen) == 5
    assert mtls_server.connections == 3  # 1, then the page's 3 at once (1 reused), then 1 reused


@pytest.mark.parametrize("case", ["system CAs only", "another CA", "no client certificate"])
def test_tls_that_does_not_verify_is_unavailable_and_sends_nothing(
    mtls_server: ReceiptServer, pki: Pki, receipt_keys: KeyRing, case: str
) -> None:
    identity = _plant(mtls_server, receipt_keys)
    tls = {
        "system CAs only": TlsSettings(client_cert=pki.client_cert, client_key=pki.client_key),
        "another CA": TlsSettings(
            ca_bundle=pki.other_ca, client_cert=pki.client_cert, client_key=pki.client_key
        ),
        "no client certificate": TlsSettings(ca_bundle=pki.ca),
    }[case]
    provider = _provider(mtls_server.base_url, receipt_keys, tls)
    try:
        assert provider.inspect(identity).kind is FindingKind.UNAVAILABLE
    finally:
        provider.close()
    assert mtls_server.seen == []  # no request (and no token) crossed an unverified channel


def test_tls_settings_through_the_provider_config(
    mtls_server: ReceiptServer,
    pki: Pki,
    receipt_keys: KeyRing,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RECEIPT_TOKEN", "t0ken")
    monkeypatch.setenv(
        "RESOLVER_RECEIPT_KEYS", ",".join(f"{k}={v.hex()}" for k, v in receipt_keys.keys.items())
    )
    identity = _plant(mtls_server, receipt_keys)
    provider = create(
        {
            "base_url": mtls_server.base_url,
            "token_env": "RECEIPT_TOKEN",
            "ca_bundle": str(pki.ca),
            "client_cert": str(pki.client_cert),
            "client_key": str(pki.client_key),
        }
    )
    try:
        assert provider.inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
    finally:
        provider.close()
    assert mtls_server.seen[0].headers["Authorization"] == "Bearer t0ken"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"ca_bundle": "/nonexistent/ca.pem"}, "ca_bundle"),
        ({"client_cert": "/nonexistent/client.pem"}, "client_cert"),
        ({"client_key": "/nonexistent/client.key"}, "client_key"),
    ],
)
def test_bad_tls_files_fail_start_up_naming_the_setting(
    receipt_keys: KeyRing, settings: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        ReadOnlyHttpClient(
            "https://127.0.0.1:1",
            timeout_seconds=1,
            max_body_bytes=10,
            tls=TlsSettings(**{k: Path(v) for k, v in settings.items()}),
        )


def test_tls_settings_need_https(pki: Pki) -> None:
    with pytest.raises(ConfigError, match="https"):
        ReadOnlyHttpClient(
            "http://127.0.0.1:1", timeout_seconds=1, max_body_bytes=10, tls=TlsSettings(pki.ca)
        )


# -- keep-alive and caps -------------------------------------------------------------------


def test_probes_reuse_one_keep_alive_connection(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    identities = [_plant(receipt_server, receipt_keys) for _ in range(20)]
    provider = _provider(receipt_server.base_url, receipt_keys, None)
    try:
        kinds = {provider.inspect(i).kind for i in identities}
    finally:
        provider.close()
    assert kinds == {FindingKind.VERIFIED_SUCCEEDED}
    assert len(receipt_server.seen) == 20
    assert receipt_server.connections == 1


def test_in_flight_cap_bounds_concurrent_requests(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    receipt_server.latency_seconds = 0.05  # the service's latency: requests overlap
    client = ReadOnlyHttpClient(
        receipt_server.base_url, timeout_seconds=5, max_body_bytes=8192, max_in_flight=2
    )
    start = threading.Barrier(8)
    statuses: list[int] = []

    def probe(n: int) -> None:
        start.wait()
        statuses.append(client.get(f"/receipts/k{n}").status)

    threads = [threading.Thread(target=probe, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    client.close()
    assert statuses == [404] * 8
    assert receipt_server.max_concurrent == 2
    assert receipt_server.connections <= 2  # the pool never holds more than the cap


def test_rate_cap_refuses_what_it_cannot_start_in_time_and_sends_nothing(
    receipt_server: ReceiptServer,
) -> None:
    client = ReadOnlyHttpClient(
        receipt_server.base_url,
        timeout_seconds=0.2,
        max_body_bytes=8192,
        max_requests_per_second=1,
    )
    try:
        assert client.get("/receipts/first").status == 404
        with pytest.raises(HttpUnavailable, match="rate cap"):
            client.get("/receipts/second")  # the next slot is a second away: past the timeout
    finally:
        client.close()
    assert [r.path for r in receipt_server.seen] == ["/receipts/first"]


def test_pacer_spaces_requests_at_the_rate_with_a_small_burst() -> None:
    clock = FakeClock(100.0)
    pacer = RequestPacer(500, clock=clock)  # burst: 4% of 500 = 20
    started = []
    for _ in range(1_000):
        start = pacer.reserve(deadline=clock.now + 10)
        assert start is not None
        clock.now = max(clock.now, start)  # the caller waits for its start
        started.append(clock.now)
    # Over any one-second window at most rate + burst requests start: within 5 % of it.
    window = [t for t in started if started[0] <= t < started[0] + 1]
    assert len(window) <= 500 + 20 <= 1.05 * 500
    assert started[:20] == [started[0]] * 20  # the burst goes at once, then the pace holds
    assert started[-1] - started[0] == pytest.approx((1_000 - 20) / 500)


def test_pacer_refusal_does_not_use_a_slot() -> None:
    clock = FakeClock(100.0)
    pacer = RequestPacer(10, clock=clock)  # burst 1: one per 100 ms
    assert pacer.reserve(deadline=clock.now) == clock.now
    assert pacer.reserve(deadline=clock.now + 0.05) is None  # next slot at +0.1
    assert pacer.reserve(deadline=clock.now + 0.1) == pytest.approx(clock.now + 0.1)
    assert pacer.reserve(deadline=clock.now + 0.15) is None  # +0.2 now: the refusal booked none


def test_caps_are_validated_in_the_provider_config(
    receipt_server: ReceiptServer, monkeypatch: pytest.MonkeyPatch, receipt_keys: KeyRing
) -> None:
    monkeypatch.setenv("RECEIPT_TOKEN", "t0ken")
    monkeypatch.setenv(
        "RESOLVER_RECEIPT_KEYS", ",".join(f"{k}={v.hex()}" for k, v in receipt_keys.keys.items())
    )
    base = {"base_url": receipt_server.base_url, "token_env": "RECEIPT_TOKEN"}
    with pytest.raises(ConfigError, match="max_in_flight"):
        create({**base, "max_in_flight": 0})
    with pytest.raises(ConfigError, match="max_requests_per_second"):
        create({**base, "max_requests_per_second": 0})


def test_an_oversized_reply_closes_its_connection_and_the_next_probe_gets_a_fresh_one(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    identity = _plant(receipt_server, receipt_keys)
    receipt_server.plant("huge", 200, b"{" + b" " * 100_000 + b"}")
    client = ReadOnlyHttpClient(receipt_server.base_url, timeout_seconds=2, max_body_bytes=8192)
    provider = HttpReceiptProvider(client, receipt_keys, 2)
    try:
        assert client.get("/receipts/huge").truncated
        # Not the rest of the huge body read as the next answer: a new, clean connection.
        assert provider.inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
        assert provider.inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
    finally:
        provider.close()
    assert receipt_server.connections == 2  # the second connection served both probes
