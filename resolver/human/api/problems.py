"""Every failure as an RFC 9457 problem document with a stable `code` and no internals.

Domain errors, framework errors (routing, method, body parsing) and validation errors each
map to one status and code here; the framework's own detail text never reaches a client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import structlog
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from resolver.core.errors import (
    ConstraintViolation,
    FenceConflict,
    NotFound,
    PermissionDenied,
    ProposalConflict,
    SchemaNotReady,
    StorageUnavailable,
    StrongAuthRequired,
    TamperAcknowledgementRequired,
)
from resolver.human.api.models import MAX_BODY_BYTES, CurrentState, Problem
from resolver.human.manual import MAX_AUTH_AGE_MS
from resolver.telemetry.observer import ApiObserver

log = structlog.get_logger("resolver.api")
PROBLEM = "application/problem+json"
# The `acr_values` of a step-up answer (RFC 9470): multi-factor authentication, the class the
# OIDC `amr` values the API accepts (mfa, hwk, swk, otp, fido) all belong to.
STEP_UP_ACR_VALUES = "mfa"


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


class BodyTooLarge(Exception):
    """The request body passed MAX_BODY_BYTES while it was being read."""


HTTP_CODES: dict[int, tuple[str, str]] = {
    400: ("malformed_body", "the body is not a JSON document"),
    404: ("not_found", "no such resource"),
    405: ("method_not_allowed", "method not allowed on this resource"),
    413: ("too_large", f"the body is larger than {MAX_BODY_BYTES} bytes"),
    415: ("unsupported_media_type", "send the body as application/json"),
}


def http_problem(status: int) -> ApiError:
    """The problem for a framework-level HTTP status that has a stable code."""
    return ApiError(status, *HTTP_CODES[status])


def problem(error: ApiError) -> JSONResponse:
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


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the problem answers a route gives (413, 500, 503: every route,
    the body limit is checked before routing)."""
    return {
        status: {"model": Problem, "content": {PROBLEM: {}}}
        for status in sorted({*statuses, 413, 500, 503})
    }


def _domain_mapping() -> dict[type[Exception], Callable[[Exception], ApiError]]:
    step_up = (
        'Bearer realm="resolver", error="insufficient_user_authentication", '
        'error_description="recent multi-factor authentication required", '
        f'acr_values="{STEP_UP_ACR_VALUES}", max_age={MAX_AUTH_AGE_MS // 1000}'
    )
    unavailable = ApiError(
        503, "unavailable", "storage is unavailable; try again", {"Retry-After": "5"}
    )
    return {
        StrongAuthRequired: lambda e: ApiError(
            401, "step_up_required", str(e), {"WWW-Authenticate": step_up}
        ),
        PermissionDenied: lambda e: ApiError(403, "forbidden", str(e)),
        NotFound: lambda e: ApiError(404, "not_found", str(e)),
        # Before FenceConflict (its base class): the first matching kind answers.
        ProposalConflict: lambda e: ApiError(
            409, cast(ProposalConflict, e).code, str(e), current=cast(ProposalConflict, e).current
        ),
        TamperAcknowledgementRequired: lambda e: ApiError(
            409,
            TamperAcknowledgementRequired.code,
            str(e),
            current=cast(FenceConflict, e).current,
        ),
        FenceConflict: lambda e: ApiError(
            409, "conflict", str(e), current=cast(FenceConflict, e).current
        ),
        # The constraint's name is schema detail: the client learns only that the write lost.
        ConstraintViolation: lambda _e: ApiError(409, "conflict", "the write was refused"),
        StorageUnavailable: lambda _e: unavailable,
        SchemaNotReady: lambda _e: unavailable,
    }


def install_error_handlers(app: FastAPI, events: ApiObserver) -> None:
    mapping = _domain_mapping()

    async def api_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return problem(exc)

    async def domain_error(_request: Request, exc: Exception) -> Response:
        if isinstance(exc, StrongAuthRequired):
            events.step_up_required()
        if isinstance(exc, StorageUnavailable | SchemaNotReady):
            log.warning("api_storage_unavailable", error=type(exc).__name__)
        build = next(b for kind, b in mapping.items() if isinstance(exc, kind))
        return problem(build(exc))

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if isinstance(exc.__cause__, BodyTooLarge):  # the framework wraps it as a parse error
            return problem(http_problem(413))
        code, title = HTTP_CODES.get(exc.status_code, ("http_error", "the request failed"))
        headers = {k: v for k, v in (exc.headers or {}).items() if k.lower() == "allow"}
        return problem(ApiError(exc.status_code, code, title, headers))

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        if any(err.get("type") == "json_invalid" for err in errors):
            return problem(http_problem(400))
        if _body_not_json(request, errors):
            return problem(http_problem(415))
        fields = sorted({".".join(str(p) for p in err["loc"][1:]) or "body" for err in errors})
        return problem(ApiError(422, "invalid_request", f"invalid fields: {', '.join(fields)}"))

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
