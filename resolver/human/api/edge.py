"""The outermost layer every request passes: headers, body limit, metrics, access log and the
last resort for an unexpected error.

Every answer, success or failure, leaves through it: `Cache-Control: no-store`, an
access-log line without the query string, and for an unexpected failure a masked 500.
"""

from __future__ import annotations

import time

import structlog
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from resolver.human.api.models import MAX_BODY_BYTES
from resolver.human.api.problems import ApiError, BodyTooLarge, http_problem, problem
from resolver.telemetry.observer import ApiObserver

log = structlog.get_logger("resolver.api")
access_log = structlog.get_logger("resolver.api.access")
UNMATCHED_ROUTE = "unmatched"
ACCESS_LOG_PATH_CHARS = 256
QUIET_ROUTES = frozenset({"/healthz", "/readyz"})


class Edge:
    """A plain ASGI middleware rather than an exception handler for `Exception`: Starlette's
    server-error layer re-raises after answering, which makes the server drop a keep-alive
    connection; here an unexpected error is answered and the connection stays usable.
    """

    def __init__(self, app: ASGIApp, events: ApiObserver) -> None:
        self._app = app
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status: list[int] = []
        received = 0

        async def bounded_receive() -> Message:
            # Counted as it arrives: a chunked body has no Content-Length to check up front.
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > MAX_BODY_BYTES:
                    raise BodyTooLarge
            return message

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
                headers = MutableHeaders(scope=message)
                headers["Cache-Control"] = "no-store"
                headers["X-Content-Type-Options"] = "nosniff"
            await send(message)

        try:
            if _declared_length(scope) > MAX_BODY_BYTES:
                await problem(http_problem(413))(scope, receive, send_with_headers)
                return
            await self._app(scope, bounded_receive, send_with_headers)
        except Exception:
            # Masked at the edge: the log has the traceback (as JSON), the client a code only.
            log.exception("api_unexpected_error", route=_route(scope))
            if status:  # the answer had begun: nothing sane can follow it on this connection
                raise
            await problem(ApiError(500, "internal", "internal error"))(
                scope, receive, send_with_headers
            )
        finally:
            self._observe(scope, status[0] if status else 500, time.perf_counter() - started)

    def _observe(self, scope: Scope, status: int, seconds: float) -> None:
        route = _route(scope)
        self._events.request(route, status, seconds)
        if route in QUIET_ROUTES and status < 400:
            return  # a kubelet probe every few seconds is not worth a log line
        # The path without its query string: a client that puts a token there must not see
        # it land in logs.
        access_log.info(
            "http_request",
            method=scope.get("method"),
            path=str(scope.get("path", ""))[:ACCESS_LOG_PATH_CHARS],
            route=route,
            status=status,
            duration_ms=round(seconds * 1000, 3),
        )


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


def _route(scope: Scope) -> str:
    """The matched route's template: a bounded label, never the raw path with its ids."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE
