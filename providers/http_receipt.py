"""`http_receipt`: an authenticated GET of the idempotency key's signed receipt v1.

`GET {base_url}/receipts/{idempotency_key}` with `Authorization: Bearer {token}`, through a
client that cannot send anything but GET/HEAD: the original request is never re-sent.

| answer                                                        | finding                 |
|---------------------------------------------------------------|-------------------------|
| 200, receipt v1 verifies, outcome succeeded / failed          | verified_succeeded / _failed |
| 200 with any shape, size, key, signature or identity mismatch | conflict                |
| 202 (still processing)                                        | still_running           |
| 404 (no record of the key)                                    | missing                 |
| 401, 403, a redirect, any other status below 500 but 408/425/429 | unavailable (`configuration`) |
| 5xx, 408, 425, 429, timeout, refused or reset                 | unavailable (`outage`)  |
| not sent: the in-flight or rate cap left no slot in time      | unavailable             |

A 401/403 means the token or its rights are wrong and a redirect that base_url is: waiting
will not fix either, so they are reported as configuration errors, not as an outage.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import structlog
from pydantic import BaseModel, ConfigDict, Field, model_validator

from providers._declared import MISSING_FOR_AN_HOUR
from resolver.evidence import (
    HTTP_SOURCE_REASONS,
    MAX_RAW_RECEIPT_BYTES,
    RECEIPT_REASONS,
    Capability,
    ConfigError,
    DispatchIdentity,
    Finding,
    FindingKind,
    HttpReply,
    HttpUnavailable,
    KeyRing,
    ProviderFailure,
    ReadOnlyHttpClient,
    Reason,
    TlsSettings,
    declare,
    parse_provider_settings,
    receipt_finding,
)

NAME = "http_receipt"
log = structlog.get_logger("providers.http_receipt")

_STILL_RUNNING = Finding(FindingKind.STILL_RUNNING)
# Each with its reason code, kept on the control and shown to the operator.
_MISSING = Finding(FindingKind.MISSING, cause="http_404")
_CONFLICT = Finding(FindingKind.CONFLICT, cause="too_large")
_OUTAGE = Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.OUTAGE)
# Client errors that a later retry can cure: the server timed out, too early, rate limited.
_TRANSIENT_4XX = frozenset({408, 425, 429})
_ACCEPT = {"Accept": "application/json"}


class HttpReceiptSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(
        description="set base_url to the receipt service, e.g. https://payments.internal/api"
    )
    token_env: str | None = Field(
        default=None,
        min_length=1,
        description="name the environment variable holding the service's bearer token",
    )
    token_file: Path | None = Field(
        default=None, description="give the path of a mounted file holding the bearer token"
    )
    timeout_seconds: float = Field(
        default=5.0, gt=0, le=60, description="use a number of seconds in (0, 60]"
    )
    max_in_flight: int = Field(
        default=16,
        ge=1,
        le=256,
        description="use 1..256 requests at once per replica (divide the service's budget by "
        "the replica count)",
    )
    max_requests_per_second: float = Field(
        default=100.0,
        gt=0,
        le=100_000,
        description="use a positive rate per replica (the service's budget over the replica count)",
    )
    ca_bundle: Path | None = Field(
        default=None, description="give the path of a PEM file with the CAs to trust"
    )
    client_cert: Path | None = Field(
        default=None, description="give the path of the PEM client certificate (mutual TLS)"
    )
    client_key: Path | None = Field(
        default=None, description="give the path of the client certificate's PEM key"
    )

    @model_validator(mode="after")
    def _one_token_source(self) -> HttpReceiptSettings:
        if (self.token_env is None) == (self.token_file is None):
            raise ValueError("set exactly one of token_env or token_file (never the token itself)")
        return self

    def tls(self) -> TlsSettings:
        return TlsSettings(self.ca_bundle, self.client_cert, self.client_key)

    def read_token(self, environ: Mapping[str, str] | None = None) -> str:
        env = os.environ if environ is None else environ
        if self.token_env is not None:
            token = env.get(self.token_env, "").strip()
            where = f"token_env: environment variable {self.token_env}"
        else:
            assert self.token_file is not None
            try:
                token = self.token_file.read_text(encoding="utf-8").strip()
            except OSError:
                token = ""
            where = f"token_file: {self.token_file}"
        if not token or any(c.isspace() for c in token):
            raise ConfigError(f"{where} holds no usable bearer token; put the token there")
        return token


class HttpReceiptProvider:
    """One GET per dispatch, a page's GETs sent at once over the pooled connections; the
    client's caps bound how hard they hit the service, and its timeout how long a page
    waits (an item not answered by then reads as unavailable, the rest stand)."""

    capability = Capability.AUTOMATIC
    # Every wait in the client ends at its deadline (sockets are non-blocking and even DNS
    # is bounded), so the reconciler calls inspect_page on the cycle's own thread.
    bounds_own_time = True

    def __init__(self, client: ReadOnlyHttpClient, keys: KeyRing, timeout_seconds: float) -> None:
        self._client = client
        self._keys = keys.require_keys(NAME)
        self.timeout_seconds = timeout_seconds

    def inspect(self, identity: DispatchIdentity) -> Finding:
        return self.inspect_page([identity])[identity.dispatch_id]

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> dict[str, Finding]:
        paths = ["/receipts/" + quote(i.idempotency_key, safe="") for i in identities]
        replies = self._client.get_many(paths, _ACCEPT)
        pairs = zip(identities, replies, strict=True)
        return {i.dispatch_id: self._finding(i, reply) for i, reply in pairs}

    def _finding(self, identity: DispatchIdentity, reply: HttpReply | HttpUnavailable) -> Finding:
        if isinstance(reply, HttpUnavailable):
            # Debug: the reconciler logs the classified failure once per cycle and type.
            log.debug(
                "receipt_service_unavailable", dispatch_id=identity.dispatch_id, error=str(reply)
            )
            return _OUTAGE
        if reply.status == 202:
            return _STILL_RUNNING
        if reply.status == 404:
            return _MISSING
        if reply.status != 200:
            log.debug(
                "receipt_service_status", dispatch_id=identity.dispatch_id, status=reply.status
            )
            return _status_failure(reply.status)
        if reply.truncated:
            # Bigger than any receipt v1 can be: the answer breaks the contract.
            log.warning(
                "receipt_rejected",
                source=NAME,
                dispatch_id=identity.dispatch_id,
                reason="too_large",
            )
            return _CONFLICT  # too_large
        return receipt_finding(reply.body, identity, self._keys, source=NAME)

    def close(self) -> None:
        """Close the pooled connections (the registry calls this at shutdown)."""
        self._client.close()


def _status_failure(status: int) -> Finding:
    """An unexpected status: a server-side or throttling problem heals; a refused token, a
    redirect (a wrong base_url) or an answer outside the contract does not."""
    if status < 500 and status not in _TRANSIENT_4XX:
        return Finding(
            FindingKind.UNAVAILABLE, failure=ProviderFailure.CONFIGURATION, cause=f"http_{status}"
        )
    return _OUTAGE


@declare(
    reasons=(
        Reason("http_404", "the receipt service has no receipt for it"),
        *RECEIPT_REASONS,
        *HTTP_SOURCE_REASONS,
    ),
    escalate_after_seconds=MISSING_FOR_AN_HOUR,
)
def create(settings: Mapping[str, Any]) -> HttpReceiptProvider:
    """The `resolver.providers` entry point: settings from the YAML config."""
    parsed = parse_provider_settings(HttpReceiptSettings, settings, NAME)
    keys = KeyRing.from_environment().require_keys(NAME)
    host = urlsplit(parsed.base_url).hostname or ""
    if parsed.base_url.startswith("http://") and host not in ("127.0.0.1", "::1", "localhost"):
        # Allowed (a mesh may add TLS), but the bearer token then crosses the wire in clear.
        log.warning("receipt_service_plain_http", host=host)
    client = ReadOnlyHttpClient(
        parsed.base_url,
        timeout_seconds=parsed.timeout_seconds,
        max_body_bytes=MAX_RAW_RECEIPT_BYTES,
        headers={"Authorization": f"Bearer {parsed.read_token()}"},
        tls=parsed.tls(),
        max_in_flight=parsed.max_in_flight,
        max_requests_per_second=parsed.max_requests_per_second,
    )
    return HttpReceiptProvider(client, keys, parsed.timeout_seconds)
