"""An HTTP client that can only read: GET and HEAD, no body, bounded replies, timeouts, tracing.

HTTP evidence providers get this client instead of a general one, so "a provider never
re-sends the request" is enforced by the type, not promised by the provider.
"""

from __future__ import annotations

import http.client
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from opentelemetry import propagate

from resolver.errors import ConfigError, ResolverError

ALLOWED_METHODS = frozenset({"GET", "HEAD"})
_CHUNK_BYTES = 1024


class MethodNotAllowed(ResolverError):
    """A caller asked the read-only client for a method other than GET or HEAD."""


class HttpUnavailable(ResolverError):
    """No answer: refused, reset, timed out, or not HTTP. Classified `unavailable`."""


@dataclass(frozen=True, slots=True)
class HttpReply:
    status: int
    body: bytes
    truncated: bool
    """True when the server sent more than the cap; `body` then holds only the cap."""


class ReadOnlyHttpClient:
    """One short connection per request; redirects are answers, never followed."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_seconds: float,
        max_body_bytes: int,
        headers: Mapping[str, str] | None = None,
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
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._timeout_seconds = timeout_seconds
        self._max_body_bytes = max_body_bytes
        self._headers = dict(headers or {})

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
        sent = {**self._headers, **(headers or {})}
        propagate.inject(sent)  # W3C traceparent/tracestate of the current span, if any
        deadline = time.monotonic() + self._timeout_seconds
        conn = self._connection()
        try:
            conn.request(method, self._prefix + path, headers=sent)
            response = conn.getresponse()
            body = (
                b"" if method == "HEAD" else _read_capped(response, self._max_body_bytes, deadline)
            )
            return HttpReply(
                response.status, body[: self._max_body_bytes], len(body) > self._max_body_bytes
            )
        except (OSError, http.client.HTTPException) as exc:
            raise HttpUnavailable(f"no usable answer: {type(exc).__name__}") from exc
        finally:
            conn.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(
                self._host,
                self._port,
                timeout=self._timeout_seconds,
                context=ssl.create_default_context(),
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_seconds)


def _read_capped(response: http.client.HTTPResponse, cap: int, deadline: float) -> bytes:
    """At most cap+1 bytes (enough to know it was over), within the overall deadline."""
    chunks: list[bytes] = []
    size = 0
    while size <= cap:
        if time.monotonic() > deadline:
            # A server dripping bytes must not hold the provider past its timeout.
            raise TimeoutError("reply not complete before the deadline")
        chunk = response.read1(min(_CHUNK_BYTES, cap + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
