"""An HTTP client that can only read: GET and HEAD, no body, bounded replies, timeouts, tracing.

HTTP evidence providers get this client instead of a general one, so "a provider never
re-sends the request" is enforced by the type, not promised by the provider.

Behind the wrapper, `resolver.evidence.http_exchange` keeps a pool of keep-alive connections (one
TCP and TLS handshake per connection, not per probe) and runs a page of probes at once on
the calling thread: `get_many` sends them over the pooled connections together and reads
the answers as they come, with h11 doing the HTTP/1.1 framing. A replica's CPU per
resolution is what bounds a latency-bound provider's rate, and a thread per probe blocked
in urllib3 and http.client cost about two and a half times as much per probe.

Two caps per client (so per provider, per replica) keep a burst of recoveries after an
outage polite to the service it asks: at most `max_in_flight` requests at once, and
requests started at no more than `max_requests_per_second`. Waiting for either counts
against the request's own timeout; a request that could not start in time is never sent
and reads as `HttpUnavailable`.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from opentelemetry import propagate

from resolver import __version__
from resolver.core.declarations import Reason
from resolver.core.errors import ConfigError, ResolverError
from resolver.evidence.http_exchange import ConnectionPool, Endpoint, HttpReply, HttpUnavailable

# The reply types are the engine's, so that it builds them directly; providers take them
# from here, with the client.
__all__ = [
    "ALLOWED_METHODS",
    "HTTP_SOURCE_REASONS",
    "HttpReply",
    "HttpUnavailable",
    "MethodNotAllowed",
    "ReadOnlyHttpClient",
    "RequestPacer",
    "TlsSettings",
]

ALLOWED_METHODS = frozenset({"GET", "HEAD"})
# What an HTTP provider's source refusals mean to a person, for its declaration. Other
# statuses pass through as `http_<status>` and show as the code.
HTTP_SOURCE_REASONS = (
    Reason("http_401", "the evidence source refused the resolver's credential"),
    Reason("http_403", "the evidence source forbids the resolver this read"),
)
# The pacer lets this share of a second's requests through at once, at most: any one-second
# window then holds at most 1.04x the rate (within a budget's usual 5 %), and a page of 16
# at a few hundred per second goes out together instead of spread over tens of ms.
_BURST_SHARE = 0.04


class MethodNotAllowed(ResolverError):
    """A caller asked the read-only client for a method other than GET or HEAD."""


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

    A request is booked a start time, which the caller waits for without holding anything
    but its connection; one that would start past its deadline is refused at once and its
    slot is not used, so a backlog never builds up behind the cap.
    """

    def __init__(self, per_second: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if per_second <= 0:
            raise ConfigError("max_requests_per_second must be positive")
        self.per_second = per_second
        self._interval = 1.0 / per_second
        burst = max(1, int(per_second * _BURST_SHARE))
        self._tolerance = (burst - 1) * self._interval
        self._clock = clock
        self._lock = threading.Lock()
        self._next = 0.0  # the theoretical time of the next request

    def reserve(self, deadline: float) -> float | None:
        """Book the next start: the time it may begin (at or before now: at once), or None
        if that is past `deadline` (and nothing is booked)."""
        with self._lock:
            scheduled = max(self._next, self._clock())
            start = scheduled - self._tolerance
            if start > deadline:
                return None
            self._next = scheduled + self._interval
        return start


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
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ConfigError("base_url has a port that is not a number in 1..65535") from None
        self._prefix = parts.path.rstrip("/")
        self._timeout_seconds = timeout_seconds
        self._max_body_bytes = max_body_bytes
        # Sent on every request. identity: a compressed body would dodge the size cap.
        self._headers = {
            "User-Agent": f"approved-action-resolver/{__version__}",
            "Accept-Encoding": "identity",
            **(headers or {}),
        }
        pacer = (
            RequestPacer(max_requests_per_second) if max_requests_per_second is not None else None
        )
        context = (tls or TlsSettings()).context() if parts.scheme == "https" else None
        # Proxies, netrc and SSL_CERT_* in the environment play no part: what is trusted
        # and where the token goes is what the config says.
        self._pool = ConnectionPool(
            Endpoint(parts.hostname, port, context),
            max_in_flight,
            pacer.reserve if pacer is not None else None,
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
        reply = self.exchange([(method, path)], headers)[0]
        if isinstance(reply, HttpUnavailable):
            raise reply
        return reply

    def get_many(
        self, paths: Sequence[str], headers: Mapping[str, str] | None = None
    ) -> list[HttpReply | HttpUnavailable]:
        """GET every path at once (within the caps), each answer or failure in path order,
        all within one timeout from now."""
        return self.exchange([("GET", p) for p in paths], headers)

    def exchange(
        self, requests: Sequence[tuple[str, str]], headers: Mapping[str, str] | None = None
    ) -> list[HttpReply | HttpUnavailable]:
        """Send each bodiless (method, path) once; an unsupported method or a malformed path
        raises before any I/O, for the whole batch."""
        for method, path in requests:
            if method not in ALLOWED_METHODS:
                raise MethodNotAllowed(
                    f"the read-only client refuses {method[:16]!r}: GET/HEAD only"
                )
            if not path.startswith("/") or any(c in path for c in "\r\n "):
                raise ValueError("path must start with / and hold no whitespace (quote it)")
        deadline = time.monotonic() + self._timeout_seconds
        sent = {**self._headers, **(headers or {})}
        propagate.inject(sent)  # W3C traceparent/tracestate of the current span, if any
        return self._pool.exchange(
            [(m, self._prefix + p) for m, p in requests],
            list(sent.items()),
            deadline=deadline,
            max_body_bytes=self._max_body_bytes,
        )
