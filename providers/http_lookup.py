"""`http_lookup`: ask an API what happened to the request with this idempotency key, by
configuration alone.

Payment, refund and ticketing APIs answer "what became of the request with idempotency key K"
(a lookup by key, or the object the request created with the metadata it was sent). The
executor sends its request with the dispatch's idempotency key and the binding v1 token
(`resolver.executor.idempotency_binding`, e.g. in the request's metadata); this provider GETs
the configured path for the key, through the GET/HEAD-only client (TLS verified, bearer token,
optional client certificate), reads the status, the token and a result code from the JSON
answer at configured JSON pointers, and accepts the answer only with the token.

| the API's answer                                      | finding                            |
|-------------------------------------------------------|------------------------------------|
| a status in `missing_statuses` (default 404)          | missing (`no_record`)              |
| 202                                                   | still_running                      |
| 200, bound, a status mapped to an outcome or running  | verified_* / still_running         |
| 200 without a token                                   | conflict (`record_not_bound`)      |
| 200, a token altered, foreign, another attempt's      | conflict (receipt reasons)         |
| 200, a status mapped to nothing                       | conflict (`unknown_status`)        |
| 200 that is not JSON or lacks the status pointer      | unavailable (`bad_mapping`)        |
| 200 over the size cap                                 | conflict (`too_large`)             |
| 401, 403, 3xx, other 4xx                              | unavailable (configuration)        |
| 5xx, 408, 425, 429, timeout, refused                  | unavailable (outage)               |
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from pydantic import Field, field_validator, model_validator

from providers._bound_record import MISSING, RECORD_REASONS, Statuses, judge_record
from providers._declared import MISSING_FOR_AN_HOUR
from providers.http_receipt import HttpReceiptSettings
from resolver.evidence import (
    HTTP_SOURCE_REASONS,
    RECEIPT_REASONS,
    Capability,
    DispatchIdentity,
    Finding,
    FindingKind,
    HttpReply,
    HttpUnavailable,
    KeyRing,
    ProviderFailure,
    ReadOnlyHttpClient,
    Reason,
    declare,
    parse_provider_settings,
)

NAME = "http_lookup"
MAX_ANSWER_BYTES = 64 * 1024
PLACEHOLDERS = ("idempotency_key", "dispatch_id", "project_id", "action_type")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_POINTER = re.compile(r"^(/[^/]*)+\Z")
_TRANSIENT_4XX = frozenset({408, 425, 429})
_ABSENT = object()

_STILL_RUNNING = Finding(FindingKind.STILL_RUNNING)
_TOO_LARGE = Finding(FindingKind.CONFLICT, cause="too_large")
_BAD_MAPPING = Finding(
    FindingKind.UNAVAILABLE, failure=ProviderFailure.CONFIGURATION, cause="bad_mapping"
)
_OUTAGE = Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.OUTAGE)


class HttpLookupSettings(HttpReceiptSettings):
    path: str = Field(
        description="the lookup's path after base_url, e.g. /v1/refunds?idempotency_key="
        "{idempotency_key}; placeholders are URL-quoted"
    )
    status_pointer: str = Field(description="JSON pointer to the status, e.g. /data/status")
    binding_pointer: str = Field(
        description="JSON pointer to the binding token, e.g. /data/metadata/resolver_binding"
    )
    result_code_pointer: str | None = Field(
        default=None, description="JSON pointer to a result code, e.g. /data/code"
    )
    statuses: Statuses
    missing_statuses: tuple[int, ...] = Field(
        default=(404,), description="the HTTP statuses that mean the API has no such request"
    )

    @field_validator("path")
    @classmethod
    def _a_path_template(cls, value: str) -> str:
        unknown = set(_PLACEHOLDER.findall(value)) - set(PLACEHOLDERS)
        if not value.startswith("/") or any(c in value for c in " \r\n") or unknown:
            raise ValueError(f"must start with / and name only placeholders {list(PLACEHOLDERS)}")
        if "idempotency_key" not in _PLACEHOLDER.findall(value):
            raise ValueError("must name {idempotency_key}: the lookup is by the request's key")
        return value

    @field_validator("status_pointer", "binding_pointer", "result_code_pointer")
    @classmethod
    def _a_pointer(cls, value: str | None) -> str | None:
        if value is not None and not _POINTER.match(value):
            raise ValueError("must be a JSON pointer such as /data/status")
        return value

    @model_validator(mode="after")
    def _one_token_source(self) -> HttpLookupSettings:
        # A bearer token, or mutual TLS alone: never both token sources, never the token itself.
        if self.token_env is not None and self.token_file is not None:
            raise ValueError("set at most one of token_env or token_file")
        if self.token_env is None and self.token_file is None and self.client_cert is None:
            raise ValueError("authenticate: set token_env or token_file, or client_cert")
        return self


def pointer(document: object, path: str) -> object:
    """RFC 6901: the value at `path`, or `_ABSENT`."""
    node = document
    for raw in path.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return _ABSENT
    return node


class HttpLookupProvider:
    """A page's lookups at once over pooled connections, within one timeout."""

    capability = Capability.AUTOMATIC
    bounds_own_time = True

    def __init__(
        self, client: ReadOnlyHttpClient, settings: HttpLookupSettings, keys: KeyRing
    ) -> None:
        self._client = client
        self._settings = settings
        self._keys = keys
        self.timeout_seconds = settings.timeout_seconds

    def inspect(self, identity: DispatchIdentity) -> Finding:
        return self.inspect_page([identity])[identity.dispatch_id]

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        paths = [self._path(i) for i in identities]
        replies = self._client.get_many(paths, {"Accept": "application/json"})
        return {i.dispatch_id: self._judge(i, r) for i, r in zip(identities, replies, strict=True)}

    def _path(self, identity: DispatchIdentity) -> str:
        return _PLACEHOLDER.sub(
            lambda m: quote(str(getattr(identity, m[1])), safe=""), self._settings.path
        )

    def _judge(self, identity: DispatchIdentity, reply: HttpReply | HttpUnavailable) -> Finding:
        if isinstance(reply, HttpUnavailable):
            return _OUTAGE
        if reply.status in self._settings.missing_statuses:
            return MISSING
        if reply.status == 202:
            return _STILL_RUNNING
        if reply.status != 200:
            if reply.status >= 500 or reply.status in _TRANSIENT_4XX:
                return _OUTAGE
            return Finding(
                FindingKind.UNAVAILABLE,
                failure=ProviderFailure.CONFIGURATION,
                cause=f"http_{reply.status}",
            )
        if reply.truncated:
            return _TOO_LARGE
        try:
            document = json.loads(reply.body)
        except ValueError:
            return _BAD_MAPPING
        status = pointer(document, self._settings.status_pointer)
        if status is _ABSENT or not isinstance(status, str | int):
            return _BAD_MAPPING
        token = pointer(document, self._settings.binding_pointer)
        code_pointer = self._settings.result_code_pointer
        code = pointer(document, code_pointer) if code_pointer else None
        return judge_record(
            identity,
            status=status,
            token=None if token is _ABSENT else token,
            result_code=None if code is _ABSENT else code,
            statuses=self._settings.statuses,
            keys=self._keys,
        )

    def close(self) -> None:
        self._client.close()


@declare(
    reasons=(
        *RECORD_REASONS,
        Reason("bad_mapping", "the API's answer has no status where the configuration says"),
        *RECEIPT_REASONS,
        *HTTP_SOURCE_REASONS,
    ),
    escalate_after_seconds=MISSING_FOR_AN_HOUR,
)
def create(settings: Mapping[str, Any]) -> HttpLookupProvider:
    """The `resolver.providers` entry point: settings from the YAML config."""
    parsed = parse_provider_settings(HttpLookupSettings, settings, NAME)
    keys = KeyRing.from_environment().require_keys(NAME)
    token = parsed.read_token() if parsed.token_env or parsed.token_file else None
    client = ReadOnlyHttpClient(
        parsed.base_url,
        timeout_seconds=parsed.timeout_seconds,
        max_body_bytes=MAX_ANSWER_BYTES,
        headers={"Authorization": f"Bearer {token}"} if token else None,
        tls=parsed.tls(),
        max_in_flight=parsed.max_in_flight,
        max_requests_per_second=parsed.max_requests_per_second,
    )
    return HttpLookupProvider(client, parsed, keys)
