"""The manual-resolution HTTP API: the human queue and explicit, authorized decisions.

Every answer, success or failure, leaves through one edge (`_Edge`): `Cache-Control:
no-store`, an access-log line without the query string, and for any failure an RFC 9457
problem document with a stable `code` and no internals. Request types are strict (a version
is a JSON integer, never `"7"`, `7.0` or `true`) and bounded before any SQL runs.
"""

# No `from __future__ import annotations` here: FastAPI resolves the endpoint annotations,
# which name dependencies local to create_app, at definition time.

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Annotated, Any, Literal, cast

import structlog
from fastapi import Depends, FastAPI, Header, Path, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from resolver.core.domain import (
    BIGINT_MAX,
    HEX64_REGEX,
    ID_REGEX,
    REASON_CODE_REGEX,
    Decision,
    ManualDecision,
    Principal,
)
from resolver.core.errors import (
    ConstraintViolation,
    FenceConflict,
    NotFound,
    PermissionDenied,
    SchemaNotReady,
    StorageUnavailable,
    StrongAuthRequired,
)
from resolver.core.ports import HumanStore
from resolver.human.api.bulk import BulkRequest, BulkResponse, bulk_cost, decide_each
from resolver.human.api.cases import install_case_routes
from resolver.human.auth import InvalidToken, TokenVerifier
from resolver.human.console_config import ConsoleConfig
from resolver.human.manual import MAX_AUTH_AGE_MS, ManualResolutionService
from resolver.telemetry.health import Probe
from resolver.telemetry.observer import ApiObserver, NullApiObserver

log = structlog.get_logger("resolver.api")
access_log = structlog.get_logger("resolver.api.access")
UNMATCHED_ROUTE = "unmatched"
PROBLEM = "application/problem+json"
ACCESS_LOG_PATH_CHARS = 256
QUIET_ROUTES = frozenset({"/healthz", "/readyz"})
# The `acr_values` of a step-up answer (RFC 9470): multi-factor authentication, the class the
# OIDC `amr` values the API accepts (mfa, hwk, swk, otp, fido) all belong to.
STEP_UP_ACR_VALUES = "mfa"
# A decision body is a few hundred bytes: anything near this is not one, and is not read.
MAX_BODY_BYTES = 64 * 1024


class BodyTooLarge(Exception):
    """The request body passed MAX_BODY_BYTES while it was being read."""


class DecisionRequest(BaseModel):
    """The body of a decision. Unknown fields are refused; no value is coerced."""

    model_config = ConfigDict(extra="forbid")

    decision: Decision
    mutation_id: StrictStr = Field(pattern=ID_REGEX, description="1-128 of [A-Za-z0-9_.:-]")
    expected_execution_version: StrictInt = Field(ge=1, le=BIGINT_MAX)
    reason_code: StrictStr = Field(pattern=REASON_CODE_REGEX)
    evidence_digest: StrictStr | None = Field(default=None, pattern=HEX64_REGEX)


class CurrentState(BaseModel):
    """The dispatch as it stands, on a 409: what the console shows instead of the stale view."""

    state: str
    version: int
    control_status: str | None


class Problem(BaseModel):
    """An RFC 9457 problem document; `code` is stable, `title` is for humans. A 409 of a
    decision also carries the dispatch's `current` state."""

    type: str
    title: str
    status: int
    code: str
    current: CurrentState | None = None


class DecisionResponse(BaseModel):
    dispatch_id: str
    outcome: Literal["succeeded", "failed", "blocked"]
    result: Literal["committed", "replayed"]


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        title: str,
        headers: dict[str, str] | None = None,
        current: dict[str, object] | None = None,
    ):
        super().__init__(title)
        self.status, self.code, self.title, self.headers = status, code, title, headers or {}
        self.current = current


@dataclass
class RateLimiter:
    """Token bucket per user, per replica: bounds how fast one account can decide."""

    per_minute: int = 30
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allow(self, user_id: str, cost: int = 1) -> bool:
        """Take `cost` tokens (a bulk request takes more than one) or none if too few are left."""
        rate = self.per_minute / 60.0
        with self._lock:
            now = self.clock()
            tokens, at = self._buckets.get(user_id, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - at) * rate)
            allowed = tokens >= cost
            self._buckets[user_id] = (tokens - cost if allowed else tokens, now)
            return allowed


def create_app(
    store: HumanStore,
    verifier: TokenVerifier,
    *,
    service: ManualResolutionService | None = None,
    limiter: RateLimiter | None = None,
    observer: ApiObserver | None = None,
    readiness: Callable[[], Probe] | None = None,
    console: ConsoleConfig | None = None,
) -> FastAPI:
    """The API app; `readiness` (the composition root's database and schema check) adds
    `/readyz`, `observer` receives the request, token, step-up and decision events, `console`
    is what the operator console is told (sign-in, link-outs, reason codes)."""
    service = service or ManualResolutionService(store)
    limiter = limiter or RateLimiter()
    events: ApiObserver = observer or NullApiObserver()
    # The schema is not served: it is published in docs/openapi.json (`resolver api
    # --openapi`), so the API port tells an unauthenticated caller nothing it need not know.
    app = FastAPI(
        title="approved-action recovery resolver",
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    _install_error_handlers(app, events)
    app.add_middleware(_Edge, events=events)

    def principal(authorization: Annotated[str | None, Header()] = None) -> Principal:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            events.token_rejected("missing")
            raise ApiError(
                401,
                "unauthenticated",
                "a bearer token is required",
                {"WWW-Authenticate": 'Bearer realm="resolver"'},
            )
        try:
            return verifier.verify(token.strip())
        except InvalidToken as exc:
            log.info("token_rejected", reason=str(exc))
            events.token_rejected(exc.reason)
            raise ApiError(
                401,
                "invalid_token",
                "the bearer token is not valid",
                {"WWW-Authenticate": 'Bearer realm="resolver", error="invalid_token"'},
            ) from None

    User = Annotated[Principal, Depends(principal)]

    install_case_routes(
        app,
        store,
        principal,
        _problems,
        lambda title: ApiError(404, "not_found", title),
        _bad_cursor,
    )

    @app.post(
        "/v1/dispatches/{dispatch_id}/resolution",
        response_model=DecisionResponse,
        responses=_problems(400, 401, 403, 404, 409, 415, 422, 429),
    )
    def decide(
        user: User,
        body: DecisionRequest,
        dispatch_id: Annotated[str, Path(pattern=ID_REGEX)],
    ) -> DecisionResponse:
        _admit(limiter, user.user_id)
        decision = ManualDecision(
            dispatch_id=dispatch_id,
            decision=body.decision,
            mutation_id=body.mutation_id,
            expected_execution_version=body.expected_execution_version,
            reason_code=body.reason_code,
            evidence_digest=body.evidence_digest,
        )
        result = service.decide(user, decision)
        events.decided(body.decision.terminal_state, result)
        log.info(
            "manual_decision",
            dispatch_id=dispatch_id,
            user_id=user.user_id,
            decision=body.decision.value,
            result=result.value,
        )
        return DecisionResponse(
            dispatch_id=dispatch_id,
            outcome=body.decision.terminal_state.value,
            result=result.value,
        )

    @app.post(
        "/v1/resolutions/bulk",
        response_model=BulkResponse,
        responses=_problems(400, 401, 415, 422, 429),
    )
    def decide_bulk(user: User, body: BulkRequest) -> BulkResponse:
        """One decision for 1-100 dispatches, each its own fenced decision; every item's result
        comes back in order. Takes one rate-limit token per 10 items."""
        _admit(limiter, user.user_id, bulk_cost(len(body.items), limiter.per_minute))
        results = decide_each(service, user, body, events)
        return BulkResponse(results=results)

    _install_probes(app, readiness)
    _install_console(app, console or ConsoleConfig())
    return app


def _admit(limiter: RateLimiter, user_id: str, cost: int = 1) -> None:
    if not limiter.allow(user_id, cost):
        raise ApiError(
            429, "rate_limited", "too many decisions; wait a minute", {"Retry-After": "60"}
        )


class _Edge:
    """The outermost layer every request passes: headers, metrics, access log, last resort.

    A plain ASGI middleware rather than an exception handler for `Exception`: Starlette's
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
                await _problem(ApiError(413, *_HTTP_CODES[413]))(scope, receive, send_with_headers)
                return
            await self._app(scope, bounded_receive, send_with_headers)
        except Exception:
            # Masked at the edge: the log has the traceback (as JSON), the client a code only.
            log.exception("api_unexpected_error", route=_route(scope))
            if status:  # the answer had begun: nothing sane can follow it on this connection
                raise
            await _problem(ApiError(500, "internal", "internal error"))(
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


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem answers a route gives (413, 500, 503: every route,
    the body limit is checked before routing)."""
    return {
        status: {"model": Problem, "content": {PROBLEM: {}}}
        for status in sorted({*statuses, 413, 500, 503})
    }


class _NoKeys:
    """No issuer: the document is built, never served."""

    def key(self, kid: str) -> None:
        del kid


def openapi_document() -> dict[str, Any]:
    """The published OpenAPI document (docs/openapi.json); the app serves none."""
    unused = TokenVerifier(issuer="", audience="", keys=_NoKeys())
    document = create_app(cast(HumanStore, None), unused).openapi()
    # FastAPI's schema model holds bounds as floats: 2**63 - 1 would print as 2**63.
    schemas = document["components"]["schemas"]
    for fenced in ("DecisionRequest", "BulkItem"):
        version = schemas[fenced]["properties"]["expected_execution_version"]
        version.update(minimum=1, maximum=BIGINT_MAX)
    return document


def _install_probes(app: FastAPI, readiness: Callable[[], Probe] | None) -> None:
    """Unauthenticated probes that answer a status word only: the API port may face users,
    so the schema revision and failure reasons stay on the metrics port."""

    # On the event loop, not the thread pool: it answers while the loop does, even when every
    # worker thread waits for the database.
    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> Response:
        return JSONResponse({"status": "ok"})

    if readiness is None:
        return

    @app.get("/readyz", include_in_schema=False)
    def readyz() -> Response:
        ready = readiness().ok
        return JSONResponse(
            {"status": "ready" if ready else "not_ready"}, status_code=200 if ready else 503
        )


# What the console may fetch; config.json is built from ConsoleConfig, the rest ship in the wheel.
CONSOLE_CONFIG = "config.json"
CONSOLE_FILES = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "auth.js": "text/javascript",
    "app.css": "text/css",
    CONSOLE_CONFIG: "application/json",
}


def _install_console(app: FastAPI, config: ConsoleConfig) -> None:
    assets = resources.files("resolver.human") / "console"
    cached = {
        name: (assets / name).read_bytes() for name in CONSOLE_FILES if name != CONSOLE_CONFIG
    }
    cached[CONSOLE_CONFIG] = json.dumps(config.public_document()).encode()
    headers = {
        "Content-Security-Policy": config.content_security_policy(),
        "Referrer-Policy": "no-referrer",
    }

    def serve(name: str) -> Response:
        return Response(cached[name], media_type=CONSOLE_FILES[name], headers=headers)

    @app.get("/console", include_in_schema=False)
    def console() -> Response:
        return serve("index.html")

    @app.get("/console/{name}", include_in_schema=False)
    def console_asset(name: str) -> Response:
        if name not in CONSOLE_FILES or name == "index.html":
            raise ApiError(404, "not_found", "no such page")
        return serve(name)


# Framework HTTP errors (routing, method, body parsing) as stable codes; the framework's own
# detail text never reaches a client.
_HTTP_CODES: dict[int, tuple[str, str]] = {
    400: ("malformed_body", "the body is not a JSON document"),
    404: ("not_found", "no such resource"),
    405: ("method_not_allowed", "method not allowed on this resource"),
    413: ("too_large", f"the body is larger than {MAX_BODY_BYTES} bytes"),
    415: ("unsupported_media_type", "send the body as application/json"),
}


def _install_error_handlers(app: FastAPI, events: ApiObserver) -> None:
    # RFC 9470: what to ask the identity provider for (a second factor, at most this old).
    step_up = (
        'Bearer realm="resolver", error="insufficient_user_authentication", '
        'error_description="recent multi-factor authentication required", '
        f'acr_values="{STEP_UP_ACR_VALUES}", max_age={MAX_AUTH_AGE_MS // 1000}'
    )
    unavailable = ApiError(
        503, "unavailable", "storage is unavailable; try again", {"Retry-After": "5"}
    )
    mapping: dict[type[Exception], Callable[[Exception], ApiError]] = {
        StrongAuthRequired: lambda e: ApiError(
            401, "step_up_required", str(e), {"WWW-Authenticate": step_up}
        ),
        PermissionDenied: lambda e: ApiError(403, "forbidden", str(e)),
        NotFound: lambda e: ApiError(404, "not_found", str(e)),
        FenceConflict: lambda e: ApiError(
            409, "conflict", str(e), current=cast(FenceConflict, e).current
        ),
        # The constraint's name is schema detail: the client learns only that the write lost.
        ConstraintViolation: lambda _e: ApiError(409, "conflict", "the write was refused"),
        StorageUnavailable: lambda _e: unavailable,
        SchemaNotReady: lambda _e: unavailable,
    }

    async def api_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return _problem(exc)

    async def domain_error(_request: Request, exc: Exception) -> Response:
        if isinstance(exc, StrongAuthRequired):
            events.step_up_required()
        if isinstance(exc, StorageUnavailable | SchemaNotReady):
            log.warning("api_storage_unavailable", error=type(exc).__name__)
        build = next(b for kind, b in mapping.items() if isinstance(exc, kind))
        return _problem(build(exc))

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if isinstance(exc.__cause__, BodyTooLarge):  # the framework wraps it as a parse error
            return _problem(ApiError(413, *_HTTP_CODES[413]))
        code, title = _HTTP_CODES.get(exc.status_code, ("http_error", "the request failed"))
        headers = {k: v for k, v in (exc.headers or {}).items() if k.lower() == "allow"}
        return _problem(ApiError(exc.status_code, code, title, headers))

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        if any(err.get("type") == "json_invalid" for err in errors):
            return _problem(ApiError(400, *_HTTP_CODES[400]))
        if _body_not_json(request, errors):
            return _problem(ApiError(415, *_HTTP_CODES[415]))
        fields = sorted({".".join(str(p) for p in err["loc"][1:]) or "body" for err in errors})
        return _problem(ApiError(422, "invalid_request", f"invalid fields: {', '.join(fields)}"))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    for kind in mapping:
        app.add_exception_handler(kind, domain_error)


def _body_not_json(request: Request, errors: Any) -> bool:
    """A body sent with no or a non-JSON content type reaches validation as raw bytes."""
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    is_json = content_type == "application/json" or content_type.endswith("+json")
    return not is_json and any(tuple(err["loc"]) == ("body",) for err in errors)


def _problem(error: ApiError) -> JSONResponse:
    body = Problem(
        type=f"urn:resolver:problem:{error.code}",
        title=error.title,
        status=error.status,
        code=error.code,
        current=CurrentState.model_validate(error.current) if error.current else None,
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=error.status,
        headers=error.headers,
        media_type=PROBLEM,
    )


def _bad_cursor() -> ApiError:
    return ApiError(422, "invalid_request", "invalid fields: cursor")
