"""`object_receipt`: a signed receipt v1 object in S3-compatible storage, read, never written.

The key comes from the dispatch's immutable identity (`resolver.evidence.object_store`):
`{prefix}{project_id}/{dispatch_id}.receipt.json`. Executors publish it once with a
conditional PUT that refuses to overwrite (docs/executor-sdk.md); this provider reads it.

Evidence fails closed: a store that could replace a receipt without leaving a trace is not
evidence. At start the provider asks the bucket whether it keeps versions
(GetBucketVersioning, a read); a bucket that does not is a configuration error unless the
operator accepted that weaker evidence (`accept_overwritable_store: true`). On a versioned
bucket the provider lists the versions of the one key and reads the **first**: any later
version or delete marker is a conflict of its own, whether or not the store honoured the
publisher's `If-None-Match`.

| what the store holds                                       | finding                      |
|------------------------------------------------------------|------------------------------|
| one version; receipt v1 verifies, outcome succeeded/failed | verified_succeeded / _failed |
| the first version fails a receipt check                    | conflict (its reason)        |
| a later version, or a delete marker                        | conflict (`overwritten`,     |
|                                                            | `deleted`)                   |
| the first version written while versioning was off         | conflict (`written_unversioned`) |
| the first version stored after the lease ended             | conflict (`published_late`)  |
| over the size cap                                          | conflict (`too_large`)       |
| NoSuchKey (404), or no version of the key                  | missing                      |
| 403, NoSuchBucket, a redirect, another 4xx, no credentials | unavailable (configuration)  |
| 5xx, 503 SlowDown, 429, a refused or reset connection, DNS | unavailable (outage)         |
| a connect or read timeout, or the page's time ran out      | unavailable (timeout)        |
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime
from typing import Any

import structlog
from pydantic import Field

from providers._declared import MISSING_FOR_AN_HOUR
from resolver.evidence import (
    MAX_RAW_RECEIPT_BYTES,
    RECEIPT_REASONS,
    Capability,
    ConfigError,
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
from resolver.evidence.object_store import (
    ObjectStoreSettings,
    bucket_versioning,
    make_client,
    receipt_key,
)

NAME = "object_receipt"
log = structlog.get_logger("providers.object_receipt")

_MISSING = Finding(FindingKind.MISSING)
_TIMEOUT = Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.TIMEOUT, cause="timeout")
_TRANSIENT_4XX = frozenset({408, 425, 429})
# Versions listed per key: the key is the listing's prefix, so a longer key that starts with
# it may share the page; more versions of the key itself than fit are a conflict anyway.
_LISTED_VERSIONS = 8
# The version id a store gives an object written while the bucket kept no versions.
_NULL_VERSION = "null"


class ObjectReceiptSettings(ObjectStoreSettings):
    accept_overwritable_store: bool = Field(
        default=False,
        description="set true only to accept a bucket without versioning, where a receipt "
        "can be replaced without a trace (docs/providers.md, weaker evidence)",
    )
    max_clock_skew_seconds: float = Field(
        default=2.0,
        ge=0,
        le=60,
        description="use 0..60 seconds: how far the store's clock may run ahead of the "
        "database's before a receipt counts as stored after the lease ended",
    )
    max_in_flight: int = Field(
        default=16,
        ge=1,
        le=256,
        description="use 1..256 requests at once per replica",
    )


class _StoreGuarantee:
    """Whether the bucket keeps versions, asked once (again while the store did not answer).

    A bucket that keeps none is refused unless the weaker evidence was accepted; the answer
    is cached once it is known, a failure to ask is the inspection's failure.
    """

    def __init__(self, client: Any, settings: ObjectReceiptSettings) -> None:
        self._client = client
        self._settings = settings
        self._lock = threading.Lock()
        self._versioned: bool | None = None

    def versioned(self) -> bool:
        if self._versioned is None:
            with self._lock:
                if self._versioned is None:
                    self._versioned = self._ask()
        return self._versioned

    def _ask(self) -> bool:
        settings = self._settings
        status = bucket_versioning(self._client, settings.bucket)
        if status == "Enabled":
            return True
        if not settings.accept_overwritable_store:
            raise ConfigError(
                f"bucket {settings.bucket} keeps no versions (the store says "
                f"{status or 'never enabled'}), so a receipt there can be replaced without a "
                "trace; enable versioning on the bucket, or set accept_overwritable_store: true "
                "to accept that weaker evidence (docs/providers.md)"
            )
        return False


class ObjectReceiptProvider:
    """A version listing and one GET per dispatch (one GET on an accepted unversioned
    bucket); a page's requests run at once on a small pool; what is not answered within the
    timeout reads as unavailable."""

    capability = Capability.AUTOMATIC
    # The page waits at most timeout_seconds for its requests (the botocore timeouts bound
    # each socket wait), so the reconciler may call inspect_page on the cycle's thread.
    bounds_own_time = True

    def __init__(self, client: Any, settings: ObjectReceiptSettings, keys: KeyRing) -> None:
        self._client = client
        self._settings = settings
        self._keys = keys.require_keys(NAME)
        self._guarantee = _StoreGuarantee(client, settings)
        self._skew_ms = int(settings.max_clock_skew_seconds * 1000)
        self.timeout_seconds = settings.timeout_seconds
        self._pool = ThreadPoolExecutor(settings.max_in_flight, thread_name_prefix=NAME)

    def check_store(self) -> None:
        """Ask the bucket what it guarantees now: a `ConfigError` if it keeps no versions
        and nobody accepted that; a store that does not answer is asked again later."""
        try:
            self._guarantee.versioned()
        except ConfigError:
            raise
        except Exception as exc:
            finding = _failure(None, exc)
            if finding.failure is ProviderFailure.CONFIGURATION:
                raise ConfigError(
                    f"bucket {self._settings.bucket}: the store refused GetBucketVersioning "
                    f"({finding.cause}); grant s3:GetBucketVersioning on the bucket to the "
                    "resolver's identity (docs/providers.md)"
                ) from None
            bucket = self._settings.bucket
            log.warning("receipt_store_unchecked", bucket=bucket, cause=finding.cause)

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
            if self._guarantee.versioned():
                return self._read_first_version(identity, key)
            return self._read(identity, {"Key": key})
        except ConfigError:
            # The bucket lost its guarantee (or was never asked): nothing it holds is evidence.
            return _unavailable(ProviderFailure.CONFIGURATION, "unversioned_bucket")
        except Exception as exc:
            return _failure(identity, exc)

    def _read_first_version(self, identity: DispatchIdentity, key: str) -> Finding:
        listed = self._client.list_object_versions(
            Bucket=self._settings.bucket, Prefix=key, MaxKeys=_LISTED_VERSIONS
        )
        versions = [v for v in listed.get("Versions", ()) if v["Key"] == key]
        markers = [m for m in listed.get("DeleteMarkers", ()) if m["Key"] == key]
        if not versions and not markers:
            return _MISSING
        if not versions or (listed.get("IsTruncated") and listed.get("NextKeyMarker") == key):
            # Only markers, or more versions than a page: the first is beyond what we read.
            return _rejected(identity, "deleted" if not versions else "overwritten")
        # A store lists a key's versions newest first: the first version is the last listed
        # (not the oldest LastModified: two versions may share a second).
        first = versions[-1]
        found = self._read(identity, {"Key": key, "VersionId": first["VersionId"]})
        if found.kind is FindingKind.CONFLICT:
            return found
        if markers:
            return _rejected(identity, "deleted")
        if len(versions) > 1:
            return _rejected(identity, "overwritten")
        if first["VersionId"] == _NULL_VERSION and not self._settings.accept_overwritable_store:
            return _rejected(identity, "written_unversioned")
        return found

    def _read(self, identity: DispatchIdentity, request: dict[str, Any]) -> Finding:
        try:
            reply = self._client.get_object(Bucket=self._settings.bucket, **request)
        except Exception as exc:
            if _code(exc) in ("NoSuchKey", "NoSuchVersion"):
                return _MISSING
            raise
        body = reply["Body"]
        try:
            if reply.get("ContentLength", 0) > MAX_RAW_RECEIPT_BYTES:
                return _rejected(identity, "too_large")
            data = body.read(MAX_RAW_RECEIPT_BYTES + 1)
        finally:
            body.close()
        if len(data) > MAX_RAW_RECEIPT_BYTES:
            return _rejected(identity, "too_large")
        found = receipt_finding(data, identity, self._keys, source=NAME)
        if found.kind.is_verified and self._stored_late(identity, reply.get("LastModified")):
            return _rejected(identity, "published_late")
        return found

    def _stored_late(self, identity: DispatchIdentity, stored: datetime | None) -> bool:
        """The store recorded the object after the lease ended: a PUT held somewhere and
        applied late. An executor sends none that could land after its lease (the SDKs'
        rule), so what the store shows once recovery may read stays what it will show."""
        if identity.lease_expires_at_ms is None or stored is None:
            return False
        stored_ms = int(stored.timestamp() * 1000)
        return stored_ms > identity.lease_expires_at_ms + self._skew_ms

    def close(self) -> None:
        """Stop the pool and close the pooled connections (the registry calls this)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()


def _rejected(identity: DispatchIdentity, reason: str) -> Finding:
    log.warning("receipt_rejected", source=NAME, dispatch_id=identity.dispatch_id, reason=reason)
    return Finding(FindingKind.CONFLICT, cause=reason)


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


def _failure(identity: DispatchIdentity | None, exc: BaseException) -> Finding:
    """What a failed request means: it heals (outage, timeout) or it will not (configuration)."""
    bx = importlib.import_module("botocore.exceptions")  # untyped: see object_store

    # Debug: the reconciler logs the classified failure once per cycle and action type.
    log.debug(
        "receipt_store_unavailable",
        dispatch_id=identity.dispatch_id if identity else None,
        error=type(exc).__name__,
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
        Reason("overwritten", "the receipt object was replaced after it was published", True),
        Reason("deleted", "the receipt object was deleted after it was published", True),
        Reason(
            "written_unversioned",
            "the receipt object was written while its bucket kept no versions: it may have "
            "been replaced",
        ),
        Reason("published_late", "the store recorded the receipt after the executor's lease ended"),
        Reason(
            "unversioned_bucket",
            "the receipt bucket keeps no versions, so nothing in it counts as evidence",
        ),
    ),
    escalate_after_seconds=MISSING_FOR_AN_HOUR,
)
def create(settings: Mapping[str, Any]) -> ObjectReceiptProvider:
    """The `resolver.providers` entry point: settings from the YAML config. A bucket that
    keeps no versions is refused here, unless its weaker evidence was accepted."""
    parsed = parse_provider_settings(ObjectReceiptSettings, settings, NAME)
    keys = KeyRing.from_environment().require_keys(NAME)
    client = make_client(parsed, max_pool=parsed.max_in_flight, read_only=True)
    provider = ObjectReceiptProvider(client, parsed, keys)
    try:
        provider.check_store()
    except BaseException:
        provider.close()
        raise
    return provider
