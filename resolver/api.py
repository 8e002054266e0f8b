"""The manual-resolution HTTP API: the human queue and explicit, authorized decisions.

Every error leaves as an RFC 9457 problem document with a stable `code` and no internals.
"""

# No `from __future__ import annotations` here: FastAPI resolves the endpoint annotations,
# which name dependencies local to create_app, at definition time.

import base64
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Annotated, Any, Literal

import structlog
from fastapi import Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from resolver.auth import InvalidToken, TokenVerifier
from resolver.domain import Decision, FindingKind, ManualDecision, ManualQueueItem, Principal
from resolver.errors import (
    FenceConflict,
    NotFound,
    PermissionDenied,
    StorageUnavailable,
    StrongAuthRequired,
)
from resolver.manual import MAX_AUTH_AGE_MS, ManualResolutionService
from resolver.ports import ManualStore
from resolver.telemetry.health import Probe
from resolver.telemetry.observer import ApiObserver, NullApiObserver

log = structlog.get_logger("resolver.api")
UNMATCHED_ROUTE = "unmatched"
PROBLEM = "application/problem+json"


class DecisionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Decision
    mutation_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")
    expected_execution_version: int = Field(ge=1)
    reason_code: str = Field(pattern=r"^[a-z0-9_.\-]{1,64}$")
    evidence_digest: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class DecisionResponse(BaseModel):
    dispatch_id: str
    outcome: Literal["succeeded", "failed", "blocked"]
    result: Literal["committed", "replayed"]


class QueueEntry(BaseModel):
    """One dispatch waiting for a human, as the API shows it (not the storage row)."""

    model_config = ConfigDict(frozen=True)

    dispatch_id: str
    project_id: str
    action_type: str
    last_finding: FindingKind | None
    finding_count: int
    manual_at_ms: int
    execution_version: int
    """Send it back as `expected_execution_version`: the decision is fenced on it."""
    started_at_ms: int
    attempt: int

    @classmethod
    def of(cls, item: ManualQueueItem) -> "QueueEntry":
        return cls(
            dispatch_id=item.dispatch_id,
            project_id=item.project_id,
            action_type=item.action_type,
            last_finding=item.last_finding,
            finding_count=item.finding_count,
            manual_at_ms=item.manual_at_ms,
            execution_version=item.execution_version,
            started_at_ms=item.started_at_ms,
            attempt=item.attempt,
        )


class QueuePage(BaseModel):
    items: list[QueueEntry]
    next_cursor: str | None


class ApiError(Exception):
    def __init__(self, status: int, code: str, title: str, headers: dict[str, str] | None = None):
        super().__init__(title)
        self.status, self.code, self.title, self.headers = status, code, title, headers or {}


@dataclass
class RateLimiter:
    """Token bucket per user, per replica: bounds how fast one account can decide."""

    per_minute: int = 30
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allow(self, user_id: str) -> bool:
        rate = self.per_minute / 60.0
        with self._lock:
            now = self.clock()
            tokens, at = self._buckets.get(user_id, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - at) * rate)
            allowed = tokens >= 1.0
            self._buckets[user_id] = (tokens - 1.0 if allowed else tokens, now)
            return allowed


def create_app(
    store: ManualStore,
    verifier: TokenVerifier,
    *,
    service: ManualResolutionService | None = None,
    limiter: RateLimiter | None = None,
    observer: ApiObserver | None = None,
    readiness: Callable[[], Probe] | None = None,
) -> FastAPI:
    """The API app; `readiness` (the composition root's database and schema check) adds
    `/readyz`, `observer` receives the request, token, step-up and decision events."""
    service = service or ManualResolutionService(store)
    limiter = limiter or RateLimiter()
    events: ApiObserver = observer or NullApiObserver()
    app = FastAPI(
        title="approved-action recovery resolver", version="1", docs_url=None, redoc_url=None
    )
    _install_error_handlers(app, events)
    _install_request_metrics(app, events)

    @app.middleware("http")
    async def no_store(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

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

    @app.get("/v1/manual-queue", response_model=QueuePage)
    def manual_queue(
        user: User,
        limit: Annotated[int, Query(ge=1, le=100)] = 50,
        cursor: Annotated[str | None, Query(max_length=300)] = None,
    ) -> QueuePage:
        items = store.manual_queue(user.user_id, limit, _decode_cursor(cursor))
        next_cursor = (
            _encode_cursor(items[-1].manual_at_ms, items[-1].dispatch_id)
            if len(items) == limit
            else None
        )
        return QueuePage(items=[QueueEntry.of(item) for item in items], next_cursor=next_cursor)

    @app.post("/v1/dispatches/{dispatch_id}/resolution", response_model=DecisionResponse)
    def decide(
        user: User,
        body: DecisionRequest,
        dispatch_id: Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")],
    ) -> DecisionResponse:
        if not limiter.allow(user.user_id):
            raise ApiError(
                429, "rate_limited", "too many decisions; wait a minute", {"Retry-After": "60"}
            )
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

    _install_probes(app, readiness)
    _install_console(app)
    return app


def _install_request_metrics(app: FastAPI, events: ApiObserver) -> None:
    @app.middleware("http")
    async def observe(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        try:
            response = await call_next(request)
        except Exception:
            # Unexpected errors are answered 500 by the outermost handler, after this one.
            events.request(_route(request), 500, time.perf_counter() - started)
            raise
        events.request(_route(request), response.status_code, time.perf_counter() - started)
        return response


def _route(request: Request) -> str:
    """The matched route's template: a bounded label, never the raw path with its ids."""
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


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


CONSOLE_FILES = {"index.html": "text/html", "app.js": "text/javascript", "app.css": "text/css"}
# The console loads nothing but itself and talks only to this origin.
CONSOLE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)


def _install_console(app: FastAPI) -> None:
    assets = resources.files("resolver") / "console"
    cached = {name: (assets / name).read_bytes() for name in CONSOLE_FILES}

    def serve(name: str) -> Response:
        return Response(
            cached[name],
            media_type=CONSOLE_FILES[name],
            headers={"Content-Security-Policy": CONSOLE_CSP, "Referrer-Policy": "no-referrer"},
        )

    @app.get("/console", include_in_schema=False)
    def console() -> Response:
        return serve("index.html")

    @app.get("/console/{name}", include_in_schema=False)
    def console_asset(name: str) -> Response:
        if name not in CONSOLE_FILES or name == "index.html":
            raise ApiError(404, "not_found", "no such page")
        return serve(name)


def _install_error_handlers(app: FastAPI, events: ApiObserver) -> None:
    step_up = (
        'Bearer realm="resolver", error="insufficient_user_authentication", '
        'error_description="recent multi-factor authentication required", '
        f"max_age={MAX_AUTH_AGE_MS // 1000}"
    )
    mapping: dict[type[Exception], Callable[[Exception], ApiError]] = {
        StrongAuthRequired: lambda e: ApiError(
            401, "step_up_required", str(e), {"WWW-Authenticate": step_up}
        ),
        PermissionDenied: lambda e: ApiError(403, "forbidden", str(e)),
        NotFound: lambda e: ApiError(404, "not_found", str(e)),
        FenceConflict: lambda e: ApiError(409, "conflict", str(e)),
        StorageUnavailable: lambda _e: ApiError(
            503, "unavailable", "storage is unavailable; try again", {"Retry-After": "5"}
        ),
    }

    async def api_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return _problem(exc)

    async def domain_error(_request: Request, exc: Exception) -> Response:
        if isinstance(exc, StrongAuthRequired):
            events.step_up_required()
        for kind, build in mapping.items():
            if isinstance(exc, kind):
                return _problem(build(exc))
        return await unexpected(_request, exc)

    async def invalid(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        fields = sorted({".".join(str(p) for p in err["loc"][1:]) for err in exc.errors()})
        return _problem(ApiError(422, "invalid_request", f"invalid fields: {', '.join(fields)}"))

    async def unexpected(_request: Request, exc: Exception) -> Response:
        # Masked at the edge: the log has the class, the client only an opaque code.
        log.error("api_unexpected_error", error=type(exc).__name__)
        return _problem(ApiError(500, "internal", "internal error"))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, invalid)
    for kind in mapping:
        app.add_exception_handler(kind, domain_error)
    app.add_exception_handler(Exception, unexpected)


def _problem(error: ApiError) -> JSONResponse:
    body: dict[str, Any] = {
        "type": f"urn:resolver:problem:{error.code}",
        "title": error.title,
        "status": error.status,
        "code": error.code,
    }
    return JSONResponse(body, status_code=error.status, headers=error.headers, media_type=PROBLEM)


def _encode_cursor(manual_at_ms: int, dispatch_id: str) -> str:
    return base64.urlsafe_b64encode(f"{manual_at_ms}:{dispatch_id}".encode()).decode()


def _decode_cursor(cursor: str | None) -> tuple[int, str] | None:
    if cursor is None:
        return None
    try:
        at, _, dispatch_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        return int(at), dispatch_id
    except (ValueError, UnicodeDecodeError):
        raise ApiError(422, "invalid_request", "invalid fields: cursor") from None
