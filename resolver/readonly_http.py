"""An HTTP client that can only read: GET and HEAD, no body, bounded replies, timeouts, tracing.

HTTP evidence providers get this client instead of a general one, so "a provider never
re-sends the request" is enforced by the type, not promised by the provider.

Behind the wrapper, urllib3 keeps a pool of keep-alive connections (one TCP and TLS
handshake per connection, not per probe). urllib3 rather than httpx: on this path it costs
about a third of the CPU per request (114 against 334 µs on the benchmark machine), and a
replica's CPU per resolution is what bounds a latency-bound provider's rate.

Two caps per client (so per provider, per replica) keep a burst of recoveries after an
outage polite to the service it asks: at most `max_in_flight` requests at once, and
requests started at no more than `max_requests_per_second`. Waiting for either counts
against the request's own timeout; a request that could not start in time is never sent
and reads as `HttpUnavailable`.
"""

from __future__ import annotations

import math
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import urllib3
from opentelemetry import propagate
from urllib3.exceptions import HTTPError as Urllib3Error

from resolver.errors import ConfigError, ResolverError

ALLOWED_METHODS = frozenset({"GET", "HEAD"})
_CHUNK_BYTES = 1024
# The pacer lets this share of a second's requests through at once, at most.
_BURST_SHARE = 0.02


class MethodNotAllowed(ResolverError):
    """A caller asked the read-only client for a method other than GET or HEAD."""


class HttpUnavailable(ResolverError):
    """No answer: refused, reset, timed out, throttled here, or not HTTP: `unavailable`."""


@dataclass(frozen=True, slots=True)
class HttpReply:
    status: int
    body: bytes
    truncated: bool
    """True when the server sent more than the cap; `body` then holds only the cap."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """Whom to trust and who we are. Without `ca_bundle` the system's CAs are trusted."""

    ca_bundle: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    """The client certificate's key, when it is not in the `client_cert` file itself."""

    def context(self) -> ssl.SSLContext:
        """A verifying context (hostname and chain, TLS 1.2 or later); files read now, so a
        missing or unreadable one fails start-up with its setting's name."""
        try:
            if self.ca_bundle is not None:
                context = ssl.create_default_context(cafile=str(self.ca_bundle))
            else:
                context = ssl.create_default_context()
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"ca_bundle: cannot load {self.ca_bundle}: {_reason(exc)}") from None
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.client_cert is not None:
            try:
                context.load_cert_chain(
                    str(self.client_cert), str(self.client_key) if self.client_key else None
                )
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"client_cert: cannot load {self.client_cert}"
                    f"{f' with key {self.client_key}' if self.client_key else ''}: {_reason(exc)}"
                ) from None
        elif self.client_key is not None:
            raise ConfigError("client_key: set client_cert too (the key alone identifies no one)")
        return context


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or getattr(exc, "reason", None) or type(exc).__name__)


class RequestPacer:
    """Starts requests no faster than `per_second` (GCRA: a virtual schedule, no thread).

    A caller that would have to wait past its deadline is refused at once and its slot is
    not used, so a backlog never builds up behind the cap.
    """

    def __init__(
        self,
        per_second: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if per_second <= 0:
            raise ConfigError("max_requests_per_second must be positive")
        self.per_second = per_second
        self._interval = 1.0 / per_second
        burst = max(1, int(per_second * _BURST_SHARE))
        self._tolerance = (burst - 1) * self._interval
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next = 0.0  # the theoretical time of the next request

    def acquire(self, deadline: float) -> bool:
        with self._lock:
            now = self._clock()
            scheduled = max(self._next, now)
            start = scheduled - self._tolerance
            if start > deadline:
                return False
            self._next = scheduled + self._interval
        if start > now:
            self._sleep(start - now)
        return True


class ReadOnlyHttpClient:
    """Pooled keep-alive connections; redirects are answers, never followed."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_seconds: float,
        max_body_bytes: int,
        headers: Mapping[str, str] | None = None,
        tls: TlsSettings | None = None,
        max_in_flight: int = 16,
        max_requests_per_second: float | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError("base_url must be an absolute http:// or https:// URL")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ConfigError(
                "base_url must not hold credentials, a query or a fragment; "
                "the token comes from token_env or token_file"
            )
        if timeout_seconds <= 0 or max_body_bytes <= 0:
            raise ConfigError("timeout_seconds and max_body_bytes must be positive")
        if max_in_flight < 1:
            raise ConfigError("max_in_flight must be at least 1")
        if tls is not None and parts.scheme != "https" and tls != TlsSettings():
            raise ConfigError("ca_bundle, client_cert and client_key need an https:// base_url")
        self._prefix = parts.path.rstrip("/")
        self._timeout_seconds = timeout_seconds
        self._max_body_bytes = max_body_bytes
        self._headers = dict(headers or {})
        self._in_flight = threading.BoundedSemaphore(max_in_flight)
        self._pacer = (
            RequestPacer(max_requests_per_second) if max_requests_per_second is not None else None
        )
        # block=True: the pool never opens more than max_in_flight connections. Connections
        # stay open between requests; one the server closed is noticed when taken from the
        # pool and replaced, never used.
        self._pool: urllib3.HTTPConnectionPool
        if parts.scheme == "https":
            self._pool = urllib3.HTTPSConnectionPool(
                parts.hostname,
                parts.port,
                maxsize=max_in_flight,
                block=True,
                retries=False,
                ssl_context=(tls or TlsSettings()).context(),
            )
        else:
            self._pool = urllib3.HTTPConnectionPool(
                parts.hostname, parts.port, maxsize=max_in_flight, block=True, retries=False
            )

    def close(self) -> None:
        self._pool.close()

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> HttpReply:
        return self.request("GET", path, headers)

    def head(self, path: str, headers: Mapping[str, str] | None = None) -> HttpReply:
        return self.request("HEAD", path, headers)

    def request(
        self, method: str, path: str, headers: Mapping[str, str] | None = None
    ) -> HttpReply:
        """Send a bodiless GET or HEAD; every other method raises before any I/O."""
        if method not in ALLOWED_METHODS:
            raise MethodNotAllowed(f"the read-only client refuses {method[:16]!r}: GET/HEAD only")
        if not path.startswith("/") or any(c in path for c in "\r\n "):
            raise ValueError("path must start with / and hold no whitespace (quote it)")
        deadline = time.monotonic() + self._timeout_seconds
        if not self._in_flight.acquire(timeout=self._timeout_seconds):
            raise HttpUnavailable("in-flight cap: no free slot before the timeout")
        try:
            if self._pacer is not None and not self._pacer.acquire(deadline):
                raise HttpUnavailable("rate cap: no request slot before the timeout")
            return self._send(method, path, headers, deadline)
        finally:
            self._in_flight.release()

    def _send(
        self, method: str, path: str, headers: Mapping[str, str] | None, deadline: float
    ) -> HttpReply:
        sent = {**self._headers, **(headers or {})}
        propagate.inject(sent)  # W3C traceparent/tracestate of the current span, if any
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HttpUnavailable("no time left to send before the timeout")
        timeout = urllib3.Timeout(connect=remaining, read=remaining)
        try:
            # retries=False and redirect=False: nothing is ever sent twice, and a redirect
            # is an answer. Proxies, netrc and SSL_CERT_* in the environment play no part:
            # what is trusted and where the token goes is what the config says.
            response = self._pool.urlopen(
                method,
                self._prefix + path,
                headers=sent,
                retries=False,
                redirect=False,
                timeout=timeout,
                # The in-flight semaphore already holds a slot: the pool has a connection.
                pool_timeout=math.ceil(remaining),
                preload_content=False,
                decode_content=False,
            )
        except (OSError, Urllib3Error) as exc:
            raise HttpUnavailable(f"no usable answer: {type(exc).__name__}") from exc
        reusable = False
        try:
            body = (
                b"" if method == "HEAD" else _read_capped(response, self._max_body_bytes, deadline)
            )
            truncated = len(body) > self._max_body_bytes
            reusable = not truncated  # read to its end: the connection can serve again
        except (OSError, Urllib3Error, TimeoutError) as exc:
            raise HttpUnavailable(f"no usable answer: {type(exc).__name__}") from exc
        finally:
            if not reusable:
                # Unread bytes or an unknown state: closed before it goes back to the pool,
                # which then opens a fresh connection for the next request.
                response.close()
            response.release_conn()
        return HttpReply(response.status, body[: self._max_body_bytes], truncated)


def _read_capped(response: urllib3.BaseHTTPResponse, cap: int, deadline: float) -> bytes:
    """At most cap+1 bytes (enough to know it was over), within the overall deadline."""
    chunks: list[bytes] = []
    size = 0
    while size <= cap:
        if time.monotonic() > deadline:
            # A server dripping bytes must not hold the provider past its timeout.
            raise TimeoutError("reply not complete before the deadline")
        chunk = response.read(min(_CHUNK_BYTES * 8, cap + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
