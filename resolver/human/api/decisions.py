"""The decision routes: one fenced manual decision, closing a two-person proposal, and bulk.

Every write passes the caller's rate limit first and goes through the one
`ManualResolutionService`, which authorizes and commits it in the database.
"""

# No `from __future__ import annotations`: FastAPI resolves the endpoint annotations.

from typing import Annotated

import structlog
from fastapi import APIRouter, Path, Response
from fastapi.responses import JSONResponse

from resolver.core.domain import (
    ID_REGEX,
    ManualDecision,
    ManualResult,
    Principal,
    ProposalAction,
)
from resolver.human.api.bulk import BulkRequest, BulkResponse, bulk_cost, decide_each
from resolver.human.api.deps import ApiContext, Context, User, admit
from resolver.human.api.models import (
    DecisionRequest,
    DecisionResponse,
    Proposal,
    ProposalActionRequest,
    ProposalActionResponse,
)
from resolver.human.api.problems import problem_responses

log = structlog.get_logger("resolver.api")
router = APIRouter()
DispatchId = Annotated[str, Path(pattern=ID_REGEX)]


@router.post(
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
    context: Context, user: User, body: DecisionRequest, dispatch_id: DispatchId
) -> Response:
    admit(context, user.user_id)
    decision = ManualDecision(
        dispatch_id=dispatch_id,
        decision=body.decision,
        mutation_id=body.mutation_id,
        expected_execution_version=body.expected_execution_version,
        reason_code=body.reason_code,
        evidence_digest=body.evidence_digest,
        tamper_acknowledged=body.tamper_acknowledged,
    )
    result = context.service.decide(user, decision)
    context.events.decided(body.decision.terminal_state, result)
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
        proposal=Proposal.of(context.service.open_proposal(dispatch_id)) if proposed else None,
    )
    return JSONResponse(answer.model_dump(exclude_none=True), status_code=202 if proposed else 200)


@router.post(
    "/v1/dispatches/{dispatch_id}/proposal/withdraw",
    response_model=ProposalActionResponse,
    responses=problem_responses(400, 401, 403, 404, 409, 415, 422, 429),
    summary="The proposer withdraws its open two-person proposal",
)
def proposal_withdraw(
    context: Context, user: User, body: ProposalActionRequest, dispatch_id: DispatchId
) -> ProposalActionResponse:
    return _close(context, user, body, dispatch_id, ProposalAction.WITHDRAW)


@router.post(
    "/v1/dispatches/{dispatch_id}/proposal/reject",
    response_model=ProposalActionResponse,
    responses=problem_responses(400, 401, 403, 404, 409, 415, 422, 429),
    summary="A second person rejects an open two-person proposal",
)
def proposal_reject(
    context: Context, user: User, body: ProposalActionRequest, dispatch_id: DispatchId
) -> ProposalActionResponse:
    return _close(context, user, body, dispatch_id, ProposalAction.REJECT)


@router.post(
    "/v1/resolutions/bulk",
    response_model=BulkResponse,
    responses=problem_responses(400, 401, 415, 422, 429),
)
def decide_bulk(context: Context, user: User, body: BulkRequest) -> BulkResponse:
    """One decision for 1-100 dispatches, each its own fenced decision; every item's result
    comes back in order. Takes one rate-limit token per 10 items."""
    admit(context, user.user_id, bulk_cost(len(body.items), context.limiter.per_minute))
    return BulkResponse(results=decide_each(context.service, user, body, context.events))


def _close(
    context: ApiContext,
    user: Principal,
    body: ProposalActionRequest,
    dispatch_id: str,
    action: ProposalAction,
) -> ProposalActionResponse:
    admit(context, user.user_id)
    result = context.service.close_proposal(
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
