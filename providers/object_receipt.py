"""`object_receipt`: a signed receipt v1 object in S3-compatible storage, read, never written.

The key comes from the dispatch's immutable identity (`resolver.evidence.object_store`):
`{prefix}{project_id}/{dispatch_id}.receipt.json`. Executors publish it once with a
conditional PUT that refuses to overwrite (docs/executor-sdk.md); this provider GETs it.

| what the store answers                                        | finding                       |
|---------------------------------------------------------------|-------------------------------|
| the object, receipt v1 verifies, outcome succeeded / failed   | verified_succeeded / _failed  |
| the object with any shape, size, key, signature or identity mismatch | conflict               |
| versioned bucket: more than one version, or a delete marker   | conflict (it was overwritten) |
| NoSuchKey (404), or no version of the key                     | missing                       |
| 403, NoSuchBucket, a redirect, another 4xx, no credentials    | unavailable (`configuration`) |
| 5xx, 503 SlowDown, 429, a refused or reset connection, DNS    | unavailable (`outage`)        |
| a connect or read timeout, or the page's time ran out         | unavailable (`timeout`)       |

With `versioned: true` the provider first lists the versions of that one key
(ListObjectVersions with the key as prefix): a GET answers the newest version only, and only
the version listing shows that an older one existed or that one was deleted. It then GETs the
one version it listed, by id. Without versioning it sends one GET and lists nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import structlog
from pydantic import Field

from providers._declared import MISSING_FOR_AN_HOUR
from resolver.evidence import (
    MAX_RAW_RECEIPT_BYTES,
    RECEIPT_REASONS,
    Capability,
    DispatchIdentity,
    Finding,
    FindingKind,
    KeyRing,
    ProviderFailure,
    Reason,
    declare,
    parse_provider_settings,
    receipt_finding,
)
from resolver.evidence.object_store import ObjectStoreSettings, make_client, receipt_key

NAME = "object_receipt"
log = structlog.get_logger("providers.object_receipt")

_MISSING = Finding(FindingKind.MISSING)
_CONFLICT = Finding(FindingKind.CONFLICT)
_TIMEOUT = Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.TIMEOUT, cause="timeout")
_TRANSIENT_4XX = frozenset({408, 425, 429})


class ObjectReceiptSettings(ObjectStoreSettings):
    versioned: bool = Field(
        default=False,
        description="set true when the bucket keeps versions: an overwritten receipt is then "
        "a conflict",
    )
    max_in_flight: int = Field(
        default=16,
        ge=1,
        le=256,
        description="use 1..256 requests at once per replica",
    )


class ObjectReceiptProvider:
    """One GET per dispatch (a listing and a GET when versioned), a page's requests run at
    once on a small pool; what is not answered within the timeout reads as unavailable."""

    capability = Capability.AUTOMATIC
    # The page waits at most timeout_seconds for its requests (the botocore timeouts bound
    # each socket wait), so the reconciler may call inspect_page on the cycle's thread.
    bounds_own_time = True

    def __init__(self, client: Any, settings: ObjectReceiptSettings, keys: KeyRing) -> None:
        self._client = client
        self._settings = settings
        self._keys = keys.require_keys(NAME)
        self.timeout_seconds = settings.timeout_seconds
        self._pool = ThreadPoolExecutor(settings.max_in_flight, thread_name_prefix=NAME)

    def inspect(self, identity: DispatchIdentity) -> Finding:
        return self.inspect_page([identity])[identity.dispatch_id]

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> dict[str, Finding]:
        futures = {i.dispatch_id: self._pool.submit(self._inspect_one, i) for i in identities}
        wait(futures.values(), timeout=self.timeout_seconds)
        return {
            dispatch_id: future.result() if future.done() else _TIMEOUT
            for dispatch_id, future in futures.items()
        }

    def _inspect_one(self, identity: DispatchIdentity) -> Finding:
        key = receipt_key(self._settings.prefix, identity.project_id, identity.dispatch_id)
        try:
            return self._read(identity, key)
        except Exception as exc:
            return _failure(identity, exc)

    def _read(self, identity: DispatchIdentity, key: str) -> Finding:
        bucket = self._settings.bucket
        request: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if self._settings.versioned:
            listed = self._client.list_object_versions(Bucket=bucket, Prefix=key, MaxKeys=4)
            versions = [v for v in listed.get("Versions", ()) if v["Key"] == key]
            markers = [m for m in listed.get("DeleteMarkers", ()) if m["Key"] == key]
            if not versions and not markers:
                return _MISSING
            if len(versions) != 1 or markers:
                _rejected(identity, "overwritten")
                return _CONFLICT
            request["VersionId"] = versions[0]["VersionId"]
        try:
            reply = self._client.get_object(**request)
        except Exception as exc:
            if _code(exc) == "NoSuchKey":
                return _MISSING
            raise
        body = reply["Body"]
        try:
            if reply.get("ContentLength", 0) > MAX_RAW_RECEIPT_BYTES:
                _rejected(identity, "too_large")
                return _CONFLICT
            data = body.read(MAX_RAW_RECEIPT_BYTES + 1)
        finally:
            body.close()
        if len(data) > MAX_RAW_RECEIPT_BYTES:
            _rejected(identity, "too_large")
            return _CONFLICT
        return receipt_finding(data, identity, self._keys, source=NAME)

    def close(self) -> None:
        """Stop the pool and close the pooled connections (the registry calls this)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()


def _rejected(identity: DispatchIdentity, reason: str) -> None:
    log.warning("receipt_rejected", source=NAME, dispatch_id=identity.dispatch_id, reason=reason)


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _status(exc: BaseException) -> int:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    return 0


def _failure(identity: DispatchIdentity, exc: BaseException) -> Finding:
    """What a failed request means: it heals (outage, timeout) or it will not (configuration)."""
    bx = importlib.import_module("botocore.exceptions")  # untyped: see object_store

    # Debug: the reconciler logs the classified failure once per cycle and action type.
    log.debug(
        "receipt_store_unavailable", dispatch_id=identity.dispatch_id, error=type(exc).__name__
    )
    if isinstance(exc, bx.ConnectTimeoutError | bx.ReadTimeoutError):
        return _TIMEOUT
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        return _unavailable(ProviderFailure.CONFIGURATION, "no_credentials")
    if isinstance(exc, bx.EndpointConnectionError | bx.ConnectionClosedError | bx.HTTPClientError):
        return _unavailable(ProviderFailure.OUTAGE, "connect")
    if isinstance(exc, bx.ClientError):
        status, code = _status(exc), _code(exc)
        if code in ("SlowDown", "Throttling", "ThrottlingException", "RequestTimeout"):
            return _unavailable(ProviderFailure.OUTAGE, "slow_down")
        if status >= 500 or status in _TRANSIENT_4XX:
            return _unavailable(ProviderFailure.OUTAGE, f"http_{status}")
        if code == "NoSuchBucket":
            return _unavailable(ProviderFailure.CONFIGURATION, "no_such_bucket")
        return _unavailable(ProviderFailure.CONFIGURATION, f"http_{status}")
    if isinstance(exc, bx.BotoCoreError):
        return _unavailable(ProviderFailure.OUTAGE, "client")
    return _unavailable(ProviderFailure.ERROR, "error")


def _unavailable(failure: ProviderFailure, cause: str) -> Finding:
    return Finding(FindingKind.UNAVAILABLE, failure=failure, cause=cause)


@declare(
    reasons=(
        *RECEIPT_REASONS,
        Reason("no_credentials", "the resolver found no credentials for the object store"),
        Reason("no_such_bucket", "the receipt bucket does not exist"),
        Reason("connect", "the object store could not be reached"),
        Reason("slow_down", "the object store asked the resolver to slow down"),
        Reason("client", "the object store client failed before an answer"),
    ),
    escalate_after_seconds=MISSING_FOR_AN_HOUR,
)
def create(settings: Mapping[str, Any]) -> ObjectReceiptProvider:
    """The `resolver.providers` entry point: settings from the YAML config."""
    parsed = parse_provider_settings(ObjectReceiptSettings, settings, NAME)
    keys = KeyRing.from_environment().require_keys(NAME)
    client = make_client(parsed, max_pool=parsed.max_in_flight, read_only=True)
    return ObjectReceiptProvider(client, parsed, keys)
