"""What every route depends on: the parts the app was built with, and the caller.

`create_app` puts one `ApiContext` on the app's state; routes take it (and the verified
caller) as FastAPI dependencies, so each router is a plain module with no closures and a
test can build an app around any store.
"""

# No `from __future__ import annotations`: FastAPI resolves the dependency annotations.

from dataclasses import dataclass
from typing import Annotated, cast

import structlog
from fastapi import Depends, Header, Request

from resolver.core.domain import Principal
from resolver.core.ports import HumanStore
from resolver.human.api.limits import RateLimiter
from resolver.human.api.problems import ApiError
from resolver.human.auth import InvalidToken, TokenVerifier
from resolver.human.manual import ManualResolutionService
from resolver.telemetry.observer import ApiObserver

log = structlog.get_logger("resolver.api")


@dataclass(frozen=True, repr=False)
class ApiContext:
    """The parts one app serves with: set once, read by every request.

    Its repr names nothing it holds: an error report that prints a frame's locals must not
    walk into the store, the verifier's keys or the fact signer."""

    store: HumanStore
    service: ManualResolutionService
    verifier: TokenVerifier
    limiter: RateLimiter
    events: ApiObserver

    def __repr__(self) -> str:
        return "ApiContext(...)"


def api_context(request: Request) -> ApiContext:
    return cast(ApiContext, request.app.state.context)


Context = Annotated[ApiContext, Depends(api_context)]


def bearer_principal(
    context: Context, authorization: Annotated[str | None, Header()] = None
) -> Principal:
    """The `Authorization` header as a verified principal, or a 401 that says which."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        context.events.token_rejected("missing")
        raise ApiError(
            401,
            "unauthenticated",
            "a bearer token is required",
            {"WWW-Authenticate": 'Bearer realm="resolver"'},
        )
    try:
        return context.verifier.verify(token.strip())
    except InvalidToken as exc:
        log.info("token_rejected", reason=str(exc))
        context.events.token_rejected(exc.reason)
        raise ApiError(
            401,
            "invalid_token",
            "the bearer token is not valid",
            {"WWW-Authenticate": 'Bearer realm="resolver", error="invalid_token"'},
        ) from None


User = Annotated[Principal, Depends(bearer_principal)]


def admit(context: ApiContext, user_id: str, cost: int = 1) -> None:
    """Spend `cost` of the caller's decision budget, or answer 429."""
    if not context.limiter.allow(user_id, cost):
        raise ApiError(
            429, "rate_limited", "too many decisions; wait a minute", {"Retry-After": "60"}
        )
