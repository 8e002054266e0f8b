"""The API's request and response types, and the bounds every input meets before any SQL.

Request types are strict (a version is a JSON integer, never `"7"`, `7.0` or `true`); the
response models are the API's own, not the storage rows.
"""

# No `from __future__ import annotations` here: FastAPI and pydantic read these annotations
# at definition time.

from typing import Annotated, Literal

from fastapi import Query
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, StrictStr

from resolver.core.domain import (
    BIGINT_MAX,
    HEX64_REGEX,
    ID_REGEX,
    REASON_CODE_REGEX,
    Decision,
    FindingKind,
    ManualQueueItem,
)

MAX_QUEUE_LIMIT = 100
MAX_CURSOR_LENGTH = 300
# A decision body is a few hundred bytes: anything near this is not one, and is not read.
MAX_BODY_BYTES = 64 * 1024


class DecisionRequest(BaseModel):
    """The body of a decision. Unknown fields are refused; no value is coerced."""

    model_config = ConfigDict(extra="forbid")

    decision: Decision
    mutation_id: StrictStr = Field(pattern=ID_REGEX, description="1-128 of [A-Za-z0-9_.:-]")
    expected_execution_version: StrictInt = Field(ge=1, le=BIGINT_MAX)
    reason_code: StrictStr = Field(pattern=REASON_CODE_REGEX)
    evidence_digest: StrictStr | None = Field(default=None, pattern=HEX64_REGEX)


class Problem(BaseModel):
    """An RFC 9457 problem document; `code` is stable, `title` is for humans."""

    type: str
    title: str
    status: int
    code: str


def _decimal(value: object) -> object:
    """Query integers in plain ASCII digits only: no sign, space, `_`, `7.0` or exponent."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit() and len(value) <= 6):
        raise ValueError("must be a decimal integer")
    return value


QueueLimit = Annotated[int, Query(ge=1, le=MAX_QUEUE_LIMIT), BeforeValidator(_decimal)]


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
