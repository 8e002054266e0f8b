"""`http_receipt` and its GET-only client against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from providers.http_receipt import HttpReceiptProvider, create
from resolver.core.domain import FindingKind, ProviderFailure, canonical_json
from resolver.core.errors import ConfigError
from resolver.evidence.contract import Scenario
from resolver.evidence.readonly_http import HttpUnavailable, MethodNotAllowed, ReadOnlyHttpClient
from resolver.evidence.receipt_server import ReceiptServer, running_receipt_server
from resolver.evidence.receipts import KeyRing
from tests.helpers.harnesses import TOKEN, HttpReceiptHarness, closed_port, new_identity, signed


@pytest.fixture
def harness(receipt_server: ReceiptServer, receipt_keys: KeyRing) -> HttpReceiptHarness:
    return HttpReceiptHarness(receipt_server, receipt_keys)


def client(base_url: str, timeout: float = 2.0, cap: int = 8192) -> ReadOnlyHttpClient:
    return ReadOnlyHttpClient(base_url, timeout_seconds=timeout, max_body_bytes=cap)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "get", "TRACE"])
def test_client_refuses_every_method_but_get_and_head(
    receipt_server: ReceiptServer, method: str
) -> None:
    with pytest.raises(MethodNotAllowed):
        client(receipt_server.base_url).request(method, "/receipts/x")
    assert receipt_server.seen == []  # refused before any I/O


def test_client_has_no_way_to_send_a_body() -> None:
    import inspect

    for name in ("get", "head", "request"):
        assert "body" not in inspect.signature(getattr(ReadOnlyHttpClient, name)).parameters


def test_get_sends_bearer_token_and_w3c_trace_context(
    harness: HttpReceiptHarness, receipt_server: ReceiptServer
) -> None:
    identity = harness.identity()
    harness.plant(Scenario.SUCCEEDED, identity)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("inspect") as span:
        finding = harness.provider().inspect(identity)
    assert finding.kind is FindingKind.VERIFIED_SUCCEEDED
    (request,) = receipt_server.seen
    assert request.method == "GET"
    assert request.path == f"/receipts/{identity.idempotency_key}"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    trace_id = format(span.get_span_context().trace_id, "032x")
    assert request.headers["traceparent"].split("-")[1] == trace_id
    assert trace.get_current_span() is not span


def test_idempotency_key_is_path_quoted(
    harness: HttpReceiptHarness, receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    identity = msgspec.structs.replace(new_identity(None), idempotency_key="pay:2026.11")
    body = canonical_json(signed(identity, receipt_keys, Scenario.SUCCEEDED))
    receipt_server.plant(identity.idempotency_key, 200, body)
    assert harness.provider().inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
    assert receipt_server.seen[0].path == "/receipts/pay%3A2026.11"


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (202, FindingKind.STILL_RUNNING),
        (404, FindingKind.MISSING),
        (500, FindingKind.UNAVAILABLE),
        (503, FindingKind.UNAVAILABLE),
        (401, FindingKind.UNAVAILABLE),
        (403, FindingKind.UNAVAILABLE),
        (301, FindingKind.UNAVAILABLE),
        (204, FindingKind.UNAVAILABLE),
        (429, FindingKind.UNAVAILABLE),
    ],
)
def test_status_mapping(
    harness: HttpReceiptHarness, receipt_server: ReceiptServer, status: int, kind: FindingKind
) -> None:
    identity = harness.identity()
    receipt_server.plant(identity.idempotency_key, status)
    assert harness.provider().inspect(identity).kind is kind


@pytest.mark.parametrize(
    ("status", "failure"),
    [
        (401, ProviderFailure.CONFIGURATION),  # the token is wrong: waiting will not fix it
        (403, ProviderFailure.CONFIGURATION),
        (301, ProviderFailure.CONFIGURATION),  # base_url points at the wrong place
        (204, ProviderFailure.CONFIGURATION),  # outside the contract
        (400, ProviderFailure.CONFIGURATION),
        (429, ProviderFailure.OUTAGE),  # throttled: transient
        (408, ProviderFailure.OUTAGE),
        (500, ProviderFailure.OUTAGE),
        (503, ProviderFailure.OUTAGE),
    ],
)
def test_unexpected_status_is_classified(
    harness: HttpReceiptHarness,
    receipt_server: ReceiptServer,
    status: int,
    failure: ProviderFailure,
) -> None:
    identity = harness.identity()
    receipt_server.plant(identity.idempotency_key, status)
    finding = harness.provider().inspect(identity)
    assert (finding.kind, finding.failure) == (FindingKind.UNAVAILABLE, failure)
    # A refusal names its status for the operator (the runbook's first step).
    expected_cause = f"http_{status}" if failure is ProviderFailure.CONFIGURATION else None
    assert finding.cause == expected_cause


def test_refused_connection_is_unavailable(harness: HttpReceiptHarness) -> None:
    identity = harness.identity()
    finding = harness.unavailable_provider().inspect(identity)
    assert (finding.kind, finding.failure) == (FindingKind.UNAVAILABLE, ProviderFailure.OUTAGE)


def test_slow_service_times_out_as_unavailable(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    identity = new_identity(None)
    receipt_server.plant(
        identity.idempotency_key,
        200,
        canonical_json(signed(identity, receipt_keys, Scenario.SUCCEEDED)),
    )
    receipt_server.hold.set()  # the handler waits on `release`, set only when the server stops
    provider = HttpReceiptProvider(client(receipt_server.base_url, timeout=0.3), receipt_keys, 0.3)
    finding = provider.inspect(identity)
    assert (finding.kind, finding.failure) == (FindingKind.UNAVAILABLE, ProviderFailure.OUTAGE)


def test_body_over_the_cap_is_conflict_and_not_read_past_it(
    harness: HttpReceiptHarness, receipt_server: ReceiptServer
) -> None:
    identity = harness.identity()
    receipt_server.plant(identity.idempotency_key, 200, b"{" + b" " * 5_000_000 + b"}")
    assert harness.provider().inspect(identity).kind is FindingKind.CONFLICT
    reply = client(receipt_server.base_url, cap=100).get(f"/receipts/{identity.idempotency_key}")
    assert reply.truncated and len(reply.body) == 100


def test_garbage_200_is_conflict(
    harness: HttpReceiptHarness, receipt_server: ReceiptServer
) -> None:
    identity = harness.identity()
    receipt_server.plant(identity.idempotency_key, 200, b"<html>ok</html>")
    assert harness.provider().inspect(identity).kind is FindingKind.CONFLICT


def test_receipt_for_another_key_is_conflict(
    harness: HttpReceiptHarness, receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    mine, other = harness.identity(), harness.identity()
    body = canonical_json(signed(other, receipt_keys, Scenario.SUCCEEDED))
    receipt_server.plant(mine.idempotency_key, 200, body)  # a service answering the wrong record
    assert harness.provider().inspect(mine).kind is FindingKind.CONFLICT


def test_dead_server_after_close_is_unavailable(receipt_keys: KeyRing) -> None:
    with running_receipt_server() as server:
        url = server.base_url
    provider = HttpReceiptProvider(client(url), receipt_keys, 2.0)
    assert provider.inspect(new_identity(None)).kind is FindingKind.UNAVAILABLE


def test_client_wraps_transport_errors() -> None:
    with pytest.raises(HttpUnavailable):
        client(f"http://127.0.0.1:{closed_port()}").get("/receipts/x")


FUZZ_HTTP = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
FUZZ_KEYS = KeyRing.ephemeral("fuzz")


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[ReceiptServer]:
    with running_receipt_server() as server:
        yield server


@FUZZ_HTTP
@given(
    name=st.sampled_from(["outcome", "result_code", "attempt", "project_id", "sig", "kid", "v"]),
    value=st.one_of(st.integers(), st.text(max_size=12), st.none(), st.booleans()),
)
def test_mutated_receipts_over_real_http_are_never_accepted(
    fuzz_server: ReceiptServer, name: str, value: object
) -> None:
    identity = new_identity(None)
    genuine = signed(identity, FUZZ_KEYS, Scenario.SUCCEEDED)
    mutated = {**genuine, name: value}
    fuzz_server.plant(identity.idempotency_key, 200, canonical_json(mutated))
    provider = HttpReceiptProvider(client(fuzz_server.base_url), FUZZ_KEYS, 2.0)
    finding = provider.inspect(identity)
    if mutated != genuine:
        assert finding.kind is FindingKind.CONFLICT
    assert fuzz_server.methods() == {"GET"}


# -- configuration --------------------------------------------------------------------------


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOLVER_RECEIPT_KEYS", "k1=" + "ab" * 32)
    monkeypatch.setenv("PAYMENTS_TOKEN", "s3cret-token")


@pytest.mark.usefixtures("key_env")
def test_factory_builds_from_yaml_settings(receipt_server: ReceiptServer) -> None:
    provider = create(
        {"base_url": receipt_server.base_url, "token_env": "PAYMENTS_TOKEN", "timeout_seconds": 2}
    )
    provider.inspect(new_identity(None))
    assert receipt_server.seen[0].headers["Authorization"] == "Bearer s3cret-token"


@pytest.mark.usefixtures("key_env")
def test_token_file(tmp_path: Path, receipt_server: ReceiptServer) -> None:
    (tmp_path / "token").write_text("file-token\n")
    create({"base_url": receipt_server.base_url, "token_file": str(tmp_path / "token")}).inspect(
        new_identity(None)
    )
    assert receipt_server.seen[0].headers["Authorization"] == "Bearer file-token"


@pytest.mark.usefixtures("key_env")
@pytest.mark.parametrize(
    ("settings_", "needle"),
    [
        (
            {"base_url": "http://x", "token_env": "PAYMENTS_TOKEN", "retries": 3},
            "retries: provider http_receipt has no such setting",
        ),
        ({"token_env": "PAYMENTS_TOKEN"}, "base_url: Field required"),
        ({"base_url": "http://x"}, "exactly one of token_env or token_file"),
        (
            {"base_url": "http://x", "token_env": "NOPE_UNSET"},
            "token_env: environment variable NOPE_UNSET",
        ),
        (
            {"base_url": "ftp://x", "token_env": "PAYMENTS_TOKEN"},
            "base_url must be an absolute http",
        ),
        ({"base_url": "http://u:p@x", "token_env": "PAYMENTS_TOKEN"}, "must not hold credentials"),
        (
            {"base_url": "http://x", "token_env": "PAYMENTS_TOKEN", "timeout_seconds": 0},
            "timeout_seconds",
        ),
    ],
)
def test_bad_settings_fail_at_start_naming_key_and_fix(
    settings_: dict[str, object], needle: str
) -> None:
    with pytest.raises(ConfigError, match=needle) as info:
        create(settings_)
    assert "s3cret-token" not in str(info.value)


def test_factory_without_receipt_keys_fails_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RESOLVER_RECEIPT_KEYS", raising=False)
    monkeypatch.delenv("RESOLVER_SECRETS_DIR", raising=False)
    monkeypatch.setenv("PAYMENTS_TOKEN", "t")
    with pytest.raises(ConfigError, match="RESOLVER_RECEIPT_KEYS"):
        create({"base_url": "http://x", "token_env": "PAYMENTS_TOKEN"})
