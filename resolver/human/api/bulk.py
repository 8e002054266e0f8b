"""Bulk manual decisions: one decision and reason for up to 100 dispatches, each its own decision.

Every item goes through the same `ManualResolutionService.decide` as a single decision, with
its own expected version and mutation id, so each is fenced, authorized and committed (or
refused) on its own: a bulk request is a convenience for the operator, never a wider write.
The answer lists every item's result in request order; nothing is hidden on partial failure.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

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
from resolver.human.manual import ManualResolutionService
from resolver.telemetry.observer import ApiObserver

log = structlog.get_logger("resolver.api.bulk")
MAX_BULK_ITEMS = 100
# A bulk request takes one rate-limit token per this many items (rounded up, at most the
# whole bucket): a 100-item request costs what 10 single decisions cost. Each item is still
# its own fenced decision, but the operator checked the selection once, not 100 times.
ITEMS_PER_TOKEN = 10
BulkResult = Literal["committed", "replayed", "proposed", "conflict", "refused", "not_found"]
WRITTEN: frozenset[str] = frozenset({"committed", "proposed"})
# What one item may answer without failing the others; anything else is a bug and a 500.
ITEM_FAILURES = (
    NotFound,
    FenceConflict,
    ConstraintViolation,
    PermissionDenied,
    StorageUnavailable,
    SchemaNotReady,
)


class BulkItem(BaseModel):
    """One dispatch of a bulk decision: what a single decision's path and fences carry."""

    model_config = ConfigDict(extra="forbid")

    dispatch_id: StrictStr = Field(pattern=ID_REGEX, description="1-128 of [A-Za-z0-9_.:-]")
    expected_execution_version: StrictInt = Field(ge=1, le=BIGINT_MAX)
    mutation_id: StrictStr = Field(pattern=ID_REGEX, description="1-128 of [A-Za-z0-9_.:-]")


class BulkRequest(BaseModel):
    """One decision and reason for 1-100 dispatches. Unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    decision: Decision
    reason_code: StrictStr = Field(pattern=REASON_CODE_REGEX)
    evidence_digest: StrictStr | None = Field(default=None, pattern=HEX64_REGEX)
    items: list[BulkItem] = Field(min_length=1, max_length=MAX_BULK_ITEMS)


class BulkItemResult(BaseModel):
    dispatch_id: str
    result: BulkResult
    code: str | None = None
    """Why an item was not decided: the `code` a single decision would have answered."""


class BulkResponse(BaseModel):
    results: list[BulkItemResult]


def bulk_cost(items: int, per_minute: int) -> int:
    """Rate-limit tokens a bulk request of `items` takes (never more than the bucket holds)."""
    return min(math.ceil(items / ITEMS_PER_TOKEN), per_minute)


def decide_each(
    service: ManualResolutionService, user: Principal, body: BulkRequest, events: ApiObserver
) -> list[BulkItemResult]:
    """Each item through the single-decision service, in order.

    A step-up answer before anything was written is the whole request's answer (the console
    signs in again and resends it); after a write, it is that item's result. Once storage is
    unavailable the remaining items are not tried and say so.
    """
    results: list[BulkItemResult] = []
    for item in body.items:
        if results and results[-1].code == "unavailable":
            results.append(_refused(item, "unavailable"))
            continue
        try:
            outcome = service.decide(user, _decision(body, item))
        except StrongAuthRequired:
            if not any(r.result in WRITTEN for r in results):
                raise
            results.append(_refused(item, "step_up_required"))
            continue
        except ITEM_FAILURES as exc:
            results.append(_failed(item, exc))
            continue
        events.decided(body.decision.terminal_state, outcome)
        results.append(BulkItemResult(dispatch_id=item.dispatch_id, result=outcome.value))
    counts: Counter[str] = Counter(r.result for r in results)
    log.info(
        "manual_bulk_decision",
        user_id=user.user_id,
        decision=body.decision.value,
        items=len(results),
        **counts,
    )
    return results


def _decision(body: BulkRequest, item: BulkItem) -> ManualDecision:
    return ManualDecision(
        dispatch_id=item.dispatch_id,
        decision=body.decision,
        mutation_id=item.mutation_id,
        expected_execution_version=item.expected_execution_version,
        reason_code=body.reason_code,
        evidence_digest=body.evidence_digest,
    )


def _refused(item: BulkItem, code: str) -> BulkItemResult:
    return BulkItemResult(dispatch_id=item.dispatch_id, result="refused", code=code)


def _failed(item: BulkItem, exc: Exception) -> BulkItemResult:
    """The per-item form of the problem a single decision would answer (same codes)."""
    if isinstance(exc, NotFound):
        return BulkItemResult(dispatch_id=item.dispatch_id, result="not_found", code="not_found")
    if isinstance(exc, FenceConflict | ConstraintViolation):
        code = getattr(exc, "code", "conflict")
        return BulkItemResult(dispatch_id=item.dispatch_id, result="conflict", code=code)
    if isinstance(exc, PermissionDenied):
        return _refused(item, "forbidden")
    return _refused(item, "unavailable")
