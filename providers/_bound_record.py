"""What a downstream service's record of a request proves, wherever it is read from (its
database, its API): a status mapped by configuration, bound to the dispatch by the binding v1
token the executor sent with the request (`resolver.executor.idempotency_binding`)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

from resolver.evidence import (
    DispatchIdentity,
    Finding,
    FindingKind,
    KeyRing,
    Outcome,
    Reason,
    ReceiptRejected,
)
from resolver.evidence.bindings import IDEMPOTENCY_RECORD, binding_evidence_digest, verify_binding

_RESULT_CODE = re.compile(r"^[a-z0-9_.-]{1,64}\Z")

MISSING = Finding(FindingKind.MISSING, cause="no_record")
_UNBOUND = Finding(FindingKind.CONFLICT, cause="record_not_bound")
_UNKNOWN_STATUS = Finding(FindingKind.CONFLICT, cause="unknown_status")
_STILL_RUNNING = Finding(FindingKind.STILL_RUNNING)
# One meaning for these codes, whichever provider reads the record.
RECORD_REASONS = (
    Reason("no_record", "the service has no record of a request with this key"),
    Reason(
        "record_not_bound",
        "the service's record for this key carries no binding to the approved action",
    ),
    Reason("unknown_status", "the service's record has a status the configuration maps to nothing"),
)


class Statuses(BaseModel):
    """Which of the service's status values mean what; a value in no list is a conflict."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    succeeded: tuple[str, ...] = Field(min_length=1)
    failed: tuple[str, ...] = ()
    still_running: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _disjoint(self) -> Statuses:
        values = [*self.succeeded, *self.failed, *self.still_running]
        if len(values) != len(set(values)):
            raise ValueError("a status value may be in one list only")
        return self


def judge_record(
    identity: DispatchIdentity,
    *,
    status: object,
    token: object,
    result_code: object,
    statuses: Statuses,
    keys: KeyRing,
) -> Finding:
    """The finding one record of the request proves."""
    if not isinstance(token, str) or not token.strip():
        return _UNBOUND
    token = token.strip()
    try:
        verify_binding(token, identity, kind=IDEMPOTENCY_RECORD, subject="", keys=keys)
    except ReceiptRejected as exc:
        return Finding(FindingKind.CONFLICT, cause=exc.reason)
    text = str(status)
    if text in statuses.still_running:
        return _STILL_RUNNING
    if text in statuses.succeeded:
        outcome = Outcome.SUCCEEDED
    elif text in statuses.failed:
        outcome = Outcome.FAILED
    else:
        return _UNKNOWN_STATUS
    code = _result_code(result_code, text, outcome)
    record = f"{identity.idempotency_key}:{text}:{code}"
    return Finding.verified(
        outcome, binding_evidence_digest(IDEMPOTENCY_RECORD, record, token), code
    )


def _result_code(value: object, status: str, outcome: Outcome) -> str:
    """The service's own result code when it has the shape, else its status, else the
    outcome: a resolution always stores a bounded code, never the service's free text."""
    for candidate in (value, status.lower()):
        if isinstance(candidate, str) and _RESULT_CODE.match(candidate):
            return candidate
    return outcome.value
