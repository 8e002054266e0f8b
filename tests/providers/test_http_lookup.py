"""`http_lookup` against a real API over TLS (tests/helpers/payments_api.py, uvicorn): the
contract kit, the response mapping, and a token the API lets only read."""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from providers.http_lookup import HttpLookupProvider, create, pointer
from resolver.core.domain import DispatchIdentity, FindingKind, ProviderFailure, action_digest
from resolver.core.errors import ConfigError
from resolver.evidence.contract import NotApplicable, ProviderContract, ProviderHarness, Scenario
from resolver.evidence.readonly_http import MethodNotAllowed, ReadOnlyHttpClient
from resolver.evidence.receipts import KeyRing
from resolver.executor import idempotency_binding
from tests.helpers.payments_api import PaymentsApi, running_payments_api

KEYS = KeyRing({"pay-k1": bytes.fromhex("7a" * 32)}, signing_kid="pay-k1")


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PaymentsApi]:
    with running_payments_api(tmp_path_factory.mktemp("payments")) as running:
        yield running


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOLVER_RECEIPT_KEYS", f"pay-k1={'7a' * 32}")
    monkeypatch.setenv("PAYMENTS_READER_TOKEN", "reader-token-1")


def new_identity() -> DispatchIdentity:
    dispatch_id = f"p-{uuid.uuid4().hex[:16]}"
    return DispatchIdentity(
        schema_version=1,
        dispatch_id=dispatch_id,
        approval_request_id=f"ar-{dispatch_id}",
        project_id="proj-pay",
        action_type="refunds.create",
        action_digest=action_digest({"refund": dispatch_id}),
        attempt=1,
        started_at_ms=1_800_000_000_000,
        idempotency_key=f"idem:{dispatch_id}",  # a key with a character the path must quote
    )


def refund(api: PaymentsApi, key: str, status: str, token: str | None, code: str | None) -> None:
    """What the API holds after the executor's request (as its own store would)."""
    metadata = {"resolver_binding": token} if token is not None else {}
    api.state.refunds[key] = {"id": "re_x", "status": status, "code": code, "metadata": metadata}


class ApiHarness:
    entry_point = "http_lookup"

    def __init__(self, api: PaymentsApi) -> None:
        self.api = api
        self._providers: list[HttpLookupProvider] = []

    def _provider(self, **more: Any) -> HttpLookupProvider:
        provider = create(self.api.settings(**more))
        self._providers.append(provider)
        return provider

    def provider(self) -> HttpLookupProvider:
        return self._provider()

    def unavailable_provider(self) -> HttpLookupProvider:
        return self._provider(base_url="https://127.0.0.1:1")

    def identity(self) -> DispatchIdentity:
        return new_identity()

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        key, token = identity.idempotency_key, idempotency_binding(identity, KEYS)
        if scenario is Scenario.SUCCEEDED:
            refund(self.api, key, "succeeded", token, "refunded")
        elif scenario is Scenario.FAILED:
            refund(self.api, key, "failed", token, "card_expired")
        elif scenario is Scenario.STILL_RUNNING:
            refund(self.api, key, "processing", token, None)
        elif scenario is Scenario.TAMPERED:
            refund(
                self.api, key, "succeeded", token[:-1] + ("0" if token[-1] != "0" else "1"), None
            )
        elif scenario is Scenario.IDENTITY_DRIFT:
            other = msgspec.structs.replace(identity, attempt=2)
            refund(self.api, key, "succeeded", idempotency_binding(other, KEYS), None)
        elif scenario is Scenario.OVERSIZE:
            refund(self.api, key, "succeeded", token + " " + "x" * 70_000, None)
        else:
            raise NotApplicable("the API's answer is mapped by pointers: extra fields are ignored")

    def snapshot(self) -> object:
        # The API's records, and every write it was asked for.
        writes = [entry for entry in self.api.state.log if entry[0] not in ("GET", "HEAD")]
        return dict(self.api.state.refunds), writes

    def close(self) -> None:
        for provider in self._providers:
            provider.close()


class TestHttpLookupContract(ProviderContract):
    @pytest.fixture
    def provider_harness(self, api: PaymentsApi) -> Iterator[ProviderHarness]:
        harness = ApiHarness(api)
        yield harness  # type: ignore[misc]
        harness.close()


def test_the_mapping_reads_what_the_api_answers(api: PaymentsApi) -> None:
    lookup = create(api.settings())
    try:
        assert lookup.inspect(new_identity()).cause == "no_record"
        unbound = new_identity()
        refund(api, unbound.idempotency_key, "succeeded", None, "refunded")
        assert lookup.inspect(unbound).cause == "record_not_bound"
        odd = new_identity()
        refund(api, odd.idempotency_key, "disputed", idempotency_binding(odd, KEYS), None)
        assert lookup.inspect(odd).cause == "unknown_status"
        moved = create(api.settings(status_pointer="/data/state"))
        bound = new_identity()
        refund(api, bound.idempotency_key, "succeeded", idempotency_binding(bound, KEYS), None)
        finding = moved.inspect(bound)
        assert (finding.kind, finding.failure, finding.cause) == (
            FindingKind.UNAVAILABLE,
            ProviderFailure.CONFIGURATION,
            "bad_mapping",
        )
        moved.close()
        assert lookup.inspect(bound).result_code == "succeeded"  # no code: the status stands in
    finally:
        lookup.close()
    assert pointer({"a": [{"b~/c": 1}]}, "/a/0/b~0~1c") == 1


def test_the_token_may_only_read_and_the_client_only_gets(api: PaymentsApi) -> None:
    identity = new_identity()
    refund(api, identity.idempotency_key, "succeeded", idempotency_binding(identity, KEYS), "ok")
    seen = len(api.state.log)
    lookup = create(api.settings())
    try:
        assert lookup.inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
    finally:
        lookup.close()
    assert {(m, who) for m, _, who in api.state.log[seen:]} == {("GET", "reader")}
    refused = httpx.post(
        f"{api.url}/v1/refunds",
        json={"amount": 1},
        headers={"Authorization": "Bearer reader-token-1", "Idempotency-Key": "x"},
        verify=ssl.create_default_context(cafile=str(api.ca_bundle)),
    )
    assert refused.status_code == 403
    client = ReadOnlyHttpClient(api.url, timeout_seconds=2, max_body_bytes=1024)
    with pytest.raises(MethodNotAllowed):
        client.request("POST", "/v1/refunds")
    client.close()


def test_an_unverified_certificate_sends_nothing(api: PaymentsApi) -> None:
    seen = len(api.state.log)
    lookup = create(api.settings(ca_bundle=None))  # the system CAs do not know the test CA
    try:
        finding = lookup.inspect(new_identity())
    finally:
        lookup.close()
    assert finding.kind is FindingKind.UNAVAILABLE
    assert api.state.log[seen:] == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"path": "/v1/refunds"}, "idempotency_key"),
        ({"path": "/v1/{secret}?k={idempotency_key}"}, "placeholders"),
        ({"status_pointer": "data.status"}, "JSON pointer"),
        ({"token_env": None}, "authenticate"),
        ({"statuses": {"succeeded": ["ok"], "failed": ["ok"]}}, "one list only"),
    ],
)
def test_bad_settings_are_a_clear_start_up_error(
    api: PaymentsApi, change: dict[str, Any], message: str
) -> None:
    settings = {k: v for k, v in {**api.settings(), **change}.items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        create(settings)
