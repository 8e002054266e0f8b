"""Receipt publication to S3-compatible object storage, for side effects outside PostgreSQL.

`SideEffect.publish_receipt(publisher, ...)` signs receipt v1 and hands it here; this module
PUTs it once under the dispatch's key with `If-None-Match: *`, so the store refuses to
overwrite a receipt that is already there.

The fence (docs/executor-sdk.md states it for users): a PUT is sent only while the lease
surely outlasts the whole request plus a margin, on the executor's conservative lease clock,
and never after that point, retries included. Recovery can begin only once the lease has run
out in the database, so by then no request of this executor is still to leave it, whatever
point the executor crashed at. A request held on the way (a proxy, a slow store) may still be
applied later: the provider refuses an object the store recorded after the lease ended
(`published_late`). A receipt of an earlier or later attempt is refused by the provider's
fence check (attempt and start are signed).
"""

from __future__ import annotations

import hashlib
import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from resolver.core.errors import LeaseLost, ResolverError
from resolver.evidence.object_store import ObjectStoreSettings, make_client, receipt_key

log = structlog.get_logger("resolver.object_receipts")

# Answers after which the PUT may be sent again: throttling, a server error, or a
# concurrent conditional write to the same key (S3 answers 409 and asks to retry).
_RETRY_CODES = frozenset({"SlowDown", "Throttling", "ConditionalRequestConflict", "RequestTimeout"})
_BACKOFF_SECONDS = (0.05, 0.1, 0.2, 0.4, 0.8)


class PublicationError(ResolverError):
    """The receipt could not be published; what the subclass says about the store."""


class ReceiptAlreadyPublished(PublicationError):
    """The store holds a different object under this dispatch's key: nothing was written."""


class PublicationFailed(PublicationError):
    """The store refused the PUT (or never got it) and nothing was written."""


class PublicationUnknown(PublicationError):
    """A PUT may have landed and no later answer told: do not repeat the side effect;
    recovery reads the key and settles the execution from what is there."""


@dataclass(frozen=True, slots=True)
class PublishedReceipt:
    key: str
    etag: str
    version_id: str | None
    evidence_digest: str
    """Pass to the completion (the SDK does): a late completion then replays exactly."""


class ReceiptPublisher:
    """Publishes receipt objects with the writer's credentials (the standard chain).

    `margin_seconds`: how much lease must be left beyond one whole request when it is sent;
    by default a quarter of the lease.
    """

    def __init__(
        self,
        settings: ObjectStoreSettings,
        *,
        margin_seconds: float | None = None,
        session: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if margin_seconds is not None and margin_seconds < 0:
            raise ValueError("margin_seconds must not be negative")
        self.settings = settings
        self.margin_seconds = margin_seconds
        self._client = make_client(settings, max_pool=2, read_only=False, session=session)
        self._sleep = sleep
        # Whether this thread's PUT reached the HTTP layer: botocore's last event before the
        # request leaves. A failure before it (no credentials, no region) sent nothing.
        self._sending = threading.local()
        self._client.meta.events.register("before-send.s3.PutObject", self._handed_over)

    @property
    def request_seconds(self) -> float:
        """The longest one PUT may take: connect, then the reply (the body is one send)."""
        return 2 * self.settings.timeout_seconds

    def key_for(self, project_id: str, dispatch_id: str) -> str:
        return receipt_key(self.settings.prefix, project_id, dispatch_id)

    def publish(
        self,
        key: str,
        body: bytes,
        *,
        lease_left: Callable[[], float],
        lease_seconds: float,
    ) -> PublishedReceipt:
        """PUT `body` at `key` unless it exists; `lease_left()` is the lease's sure remainder."""
        margin = lease_seconds / 4 if self.margin_seconds is None else self.margin_seconds
        digest = hashlib.sha256(body).hexdigest()
        maybe_landed = False
        for attempt in range(len(_BACKOFF_SECONDS) + 1):
            if attempt:
                self._sleep(_BACKOFF_SECONDS[attempt - 1])
            if lease_left() < self.request_seconds + margin:
                # The fence: no PUT leaves once it could land after the lease ran out.
                if maybe_landed:
                    raise PublicationUnknown(
                        "a PUT of the receipt may have landed and the lease leaves no time to "
                        "ask again: recovery settles the execution from the store"
                    )
                raise LeaseLost(
                    "too little of the lease is left to publish the receipt before it runs "
                    "out: nothing was published"
                )
            self._sending.sent = False
            try:
                reply = self._client.put_object(
                    Bucket=self.settings.bucket,
                    Key=key,
                    Body=body,
                    IfNoneMatch="*",
                    ContentType="application/json",
                )
            except Exception as exc:
                verdict = self._judge(exc, key, body, digest, maybe_landed)
                if isinstance(verdict, PublishedReceipt):
                    return verdict
                maybe_landed = maybe_landed or verdict
                continue
            return PublishedReceipt(key, reply["ETag"], reply.get("VersionId"), digest)
        if maybe_landed:
            raise PublicationUnknown("the store did not confirm the receipt's PUT")
        raise PublicationFailed("the store kept refusing the receipt's PUT (throttled or down)")

    def _judge(
        self, exc: Exception, key: str, body: bytes, digest: str, maybe_landed: bool
    ) -> PublishedReceipt | bool:
        """A failed PUT: published after all, worth another try (and whether it may have
        landed), or an error to raise."""
        bx = importlib.import_module("botocore.exceptions")  # untyped: see object_store

        if not getattr(self._sending, "sent", False):
            # Refused before it left (no credentials, no region, a bad parameter): nothing
            # can land, and trying again will not help.
            raise PublicationFailed(f"the receipt's PUT was never sent: {exc}") from exc
        if isinstance(exc, bx.ConnectTimeoutError | bx.EndpointConnectionError):
            return False  # never reached the store
        if isinstance(exc, bx.ReadTimeoutError | bx.ConnectionClosedError | bx.HTTPClientError):
            log.warning("receipt_put_unanswered", key=key, error=type(exc).__name__)
            return True  # sent: it may have landed
        if not isinstance(exc, bx.ClientError):
            raise exc
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if status == 412:
            if maybe_landed:
                stored = self._stored(key)
                if stored is not None and stored[0] == body:
                    # Our own earlier PUT landed and its reply was lost.
                    return PublishedReceipt(key, stored[1], stored[2], digest)
            raise ReceiptAlreadyPublished(
                f"a receipt is already published at {key}: the store refused to overwrite it"
            ) from None
        if code in _RETRY_CODES or status >= 500 or status == 429:
            log.info("receipt_put_retry", key=key, status=status, code=code)
            return False
        raise PublicationFailed(
            f"the store refused the receipt's PUT: HTTP {status} {code}"
        ) from None

    def _handed_over(self, **_: Any) -> None:
        self._sending.sent = True

    def _stored(self, key: str) -> tuple[bytes, str, str | None] | None:
        try:
            reply = self._client.get_object(Bucket=self.settings.bucket, Key=key)
        except Exception:
            return None
        with reply["Body"] as stream:
            return stream.read(8192), reply["ETag"], reply.get("VersionId")

    def close(self) -> None:
        self._client.close()
