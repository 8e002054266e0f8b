"""The API's request and response types, and the bounds every input meets before any SQL.

Request types are strict (a version is a JSON integer, never `"7"`, `7.0` or `true`); the
response models are the API's own, not the storage rows.
"""

# No `from __future__ import annotations` here: FastAPI and pydantic read these annotations
# at definition time.

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from resolver.core.domain import (
    BIGINT_MAX,
    HEX64_REGEX,
    ID_REGEX,
    REASON_CODE_REGEX,
    Decision,
)

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
