"""The API's routes: the manual queue and decisions behind a bearer token, the probes and the
operator console."""

# No `from __future__ import annotations` here: FastAPI resolves the endpoint annotations,
# which name dependencies local to the install functions, at definition time.

import json
from collections.abc import Callable
from importlib import resources
from typing import Annotated

import structlog
from fastapi import Depends, FastAPI, Header, Path, Response
from fastapi.responses import JSONResponse

from resolver.core.domain import ID_REGEX, ManualDecision, ManualResult, Principal, ProposalAction
from resolver.core.liveness import Probe
from resolver.human.api.bulk import BulkRequest, BulkResponse, bulk_cost, decide_each
from resolver.human.api.limits import RateLimiter
from resolver.human.api.models import (
    DecisionRequest,
    DecisionResponse,
    Proposal,
    ProposalActionRequest,
    ProposalActionResponse,
)
from resolver.human.api.problems import ApiError, problem_responses
from resolver.human.auth import InvalidToken, TokenVerifier
from resolver.human.console_config import ConsoleConfig
from resolver.human.manual import ManualResolutionService
from resolver.telemetry.observer import ApiObserver

log = structlog.get_logger("resolver.api")


def bearer_principal(
    verifier: TokenVerifier, events: ApiObserver
) -> Callable[[str | None], Principal]:
    """The dependency that turns the `Authorization` header into a verified principal."""

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

    return principal


def install_manual_routes(
    app: FastAPI,
    principal: Callable[[str | None], Principal],
    service: ManualResolutionService,
    limiter: RateLimiter,
    events: ApiObserver,
) -> None:
    User = Annotated[Principal, Depends(principal)]

    @app.post(
        "/v1/dispatches/{dispatch_id}/resolution",
        response_model=DecisionResponse,
        responses={
            202: {
                "model": DecisionResponse,
                "description": "A two-person case: recorded as a proposal (`result: proposed`)",
            },
            **problem_responses(400, 401, 403, 404, 409, 415, 422, 429),
        },
    )
    def decide(
        user: User,
        body: DecisionRequest,
        dispatch_id: Annotated[str, Path(pattern=ID_REGEX)],
    ) -> Response:
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
        proposed = result is ManualResult.PROPOSED
        answer = DecisionResponse(
            dispatch_id=dispatch_id,
            outcome=body.decision.terminal_state.value,
            result=result.value,
            proposal=Proposal.of(service.open_proposal(dispatch_id)) if proposed else None,
        )
        return JSONResponse(
            answer.model_dump(exclude_none=True), status_code=202 if proposed else 200
        )

    def close_route(action: ProposalAction) -> Callable[..., ProposalActionResponse]:
        def route(
            user: User,
            body: ProposalActionRequest,
            dispatch_id: Annotated[str, Path(pattern=ID_REGEX)],
        ) -> ProposalActionResponse:
            _admit(limiter, user.user_id)
            result = service.close_proposal(
                user, dispatch_id, action, body.mutation_id, body.reason_code
            )
            log.info(
                "manual_proposal_closed",
                dispatch_id=dispatch_id,
                user_id=user.user_id,
                action=action.value,
                result=result.value,
            )
            return ProposalActionResponse(dispatch_id=dispatch_id, result=result.value)

        return route

    app.post(
        "/v1/dispatches/{dispatch_id}/proposal/withdraw",
        response_model=ProposalActionResponse,
        responses=problem_responses(400, 401, 403, 404, 409, 415, 422, 429),
        summary="The proposer withdraws its open two-person proposal",
        name="proposal_withdraw",
    )(close_route(ProposalAction.WITHDRAW))
    app.post(
        "/v1/dispatches/{dispatch_id}/proposal/reject",
        response_model=ProposalActionResponse,
        responses=problem_responses(400, 401, 403, 404, 409, 415, 422, 429),
        summary="A second person rejects an open two-person proposal",
        name="proposal_reject",
    )(close_route(ProposalAction.REJECT))

    @app.post(
        "/v1/resolutions/bulk",
        response_model=BulkResponse,
        responses=problem_responses(400, 401, 415, 422, 429),
    )
    def decide_bulk(user: User, body: BulkRequest) -> BulkResponse:
        """One decision for 1-100 dispatches, each its own fenced decision; every item's result
        comes back in order. Takes one rate-limit token per 10 items."""
        _admit(limiter, user.user_id, bulk_cost(len(body.items), limiter.per_minute))
        results = decide_each(service, user, body, events)
        return BulkResponse(results=results)


def _admit(limiter: RateLimiter, user_id: str, cost: int = 1) -> None:
    if not limiter.allow(user_id, cost):
        raise ApiError(
            429, "rate_limited", "too many decisions; wait a minute", {"Retry-After": "60"}
        )


def install_probes(app: FastAPI, readiness: Callable[[], Probe] | None) -> None:
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


def install_console(app: FastAPI, config: ConsoleConfig, strong_auth_seconds: int = 300) -> None:
    assets = resources.files("resolver.human") / "console"
    cached = {
        name: (assets / name).read_bytes() for name in CONSOLE_FILES if name != CONSOLE_CONFIG
    }
    # How long a strong sign-in counts for a decision: the console says when it runs out.
    document = {**config.public_document(), "strong_auth_seconds": strong_auth_seconds}
    cached[CONSOLE_CONFIG] = json.dumps(document).encode()
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


def bad_cursor() -> ApiError:
    return ApiError(422, "invalid_request", "invalid fields: cursor")
