"""A dispatch and its execution as the executor records them: the specification with its
action summary, the lease, the completion, and the execution as stored."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from resolver.core.domain.findings import DispatchIdentity
from resolver.core.domain.sets import ExecutionState, Outcome, ResolutionSource
from resolver.core.domain.shapes import (
    ACTION_TYPE_PATTERN,
    HEX64_PATTERN,
    ID_PATTERN,
    RESULT_CODE_PATTERN,
    check_evidence_digest,
    check_mutation_id,
)
from resolver.core.errors import InvalidDispatch

# What was approved, for people: the same rules as resolver_action_summary_problem
# (resolver/db/schema/functions/01_recovery_core.sql), checked here first for a clear error in
# the executor's own process; the database checks them again.
SUMMARY_MAX_BYTES = 2048
SUMMARY_MAX_FACTS = 8
_SUMMARY_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_SUMMARY_SECRET_LABEL = re.compile(
    r"(passw|secret|token|api.?key|private.?key|credential|authori[sz]ation|cookie)", re.I
)
_SUMMARY_SECRET_VALUE = re.compile(
    r"(-----BEGIN|^(bearer|basic)\s|eyJ[A-Za-z0-9_-]+\.|://[^/@\s]*:[^/@\s]*@|[A-Za-z0-9+/=_]{32})",
    re.I,
)


class SummaryFact(msgspec.Struct, frozen=True):
    """One labelled fact of an action summary: `Amount` / `2,490.00 EUR`."""

    label: str
    value: str


class ActionSummary(msgspec.Struct, frozen=True):
    """What was approved, for the person who decides on it: a title and a few labelled
    facts (amount and order, command and host, package and version, target).

    Low-sensitivity by rule: never a secret, tool arguments or a raw response. Bounded,
    free of control and invisible characters, and refused when a label names a secret or a
    value looks like one (docs/executor-protocol.md). No rule reads it; people read it.
    """

    title: str
    facts: tuple[SummaryFact, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= len(self.title) <= 120:
            raise InvalidDispatch("action_summary title must be 1-120 characters")
        if len(self.facts) > SUMMARY_MAX_FACTS:
            raise InvalidDispatch("action_summary takes at most 8 facts")
        for fact in self.facts:
            if not (1 <= len(fact.label) <= 40 and 1 <= len(fact.value) <= 200):
                raise InvalidDispatch(
                    "each action_summary fact needs a 1-40 character label and a 1-200"
                    " character value"
                )
            if _SUMMARY_SECRET_LABEL.search(fact.label):
                raise InvalidDispatch(
                    "an action_summary label names a secret: secrets never go in the summary"
                )
        for text in (self.title, *(t for f in self.facts for t in (f.label, f.value))):
            if _SUMMARY_INVISIBLE.search(text):
                raise InvalidDispatch(
                    "action_summary takes no control, zero-width or direction-override character"
                )
            if _SUMMARY_SECRET_VALUE.search(text):
                raise InvalidDispatch(
                    "an action_summary value looks like a secret or a digest (a key, token,"
                    " credential or 32+ character code): never put one in the summary"
                )
        if len(self.json()) > SUMMARY_MAX_BYTES:
            raise InvalidDispatch("action_summary must be at most 2048 bytes as JSON")

    @classmethod
    def of(cls, title: str, facts: Mapping[str, str] | None = None) -> ActionSummary:
        """`ActionSummary.of("Charge", {"Amount": "2,490.00 EUR", "Order": "ord-1"})`."""
        return cls(title, tuple(SummaryFact(k, v) for k, v in (facts or {}).items()))

    @classmethod
    def from_stored(cls, value: Mapping[str, Any] | None) -> ActionSummary | None:
        """A summary as the database keeps it (already checked there)."""
        if value is None:
            return None
        facts = tuple(SummaryFact(f["label"], f["value"]) for f in value.get("facts", ()))
        return cls(value["title"], facts)

    def json(self) -> str:
        """The stored JSON (compact, as PostgreSQL's jsonb counts it closely enough)."""
        return msgspec.json.encode(self).decode("utf-8")


class DispatchSpec(msgspec.Struct, frozen=True):
    """What an executor asks to record before anything runs; validated on construction."""

    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    action_digest: str
    idempotency_key: str
    schema_version: int = 1
    supersedes_dispatch_id: str | None = None
    action_summary: ActionSummary | None = None
    """What was approved, for people (optional; shown to the operator, read by no rule)."""

    def __post_init__(self) -> None:
        for name in ("dispatch_id", "approval_request_id", "project_id", "idempotency_key"):
            if not ID_PATTERN.match(getattr(self, name)):
                raise InvalidDispatch(
                    f"{name} must be 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric"
                )
        if self.supersedes_dispatch_id is not None and not ID_PATTERN.match(
            self.supersedes_dispatch_id
        ):
            raise InvalidDispatch("supersedes_dispatch_id has the same shape as dispatch_id")
        if not ACTION_TYPE_PATTERN.match(self.action_type):
            raise InvalidDispatch("action_type must match [a-z][a-z0-9_.-]{0,63}")
        if not HEX64_PATTERN.match(self.action_digest):
            raise InvalidDispatch(
                "action_digest must be a lowercase hex sha256 (use action_digest())"
            )
        if not 1 <= self.schema_version <= 32767:
            raise InvalidDispatch("schema_version must be between 1 and 32767")


class ExecutionLease(msgspec.Struct, frozen=True):
    """The executor's fence: every start/renew/complete must present it unchanged."""

    dispatch_id: str
    owner: str
    token: str
    version: int
    attempt: int
    lease_expires_at_ms: int
    state: ExecutionState


class StartedExecution(msgspec.Struct, frozen=True):
    """A run past the start barrier as the statement that crossed it answered: the lease, the
    identity its receipt is signed with, and the database clock when that identity was read."""

    lease: ExecutionLease
    identity: DispatchIdentity
    db_now_ms: int


class Completion(msgspec.Struct, frozen=True):
    """The executor's report of a finished side effect."""

    outcome: Outcome
    result_code: str
    mutation_id: str
    evidence_digest: str | None = None

    def __post_init__(self) -> None:
        if not RESULT_CODE_PATTERN.match(self.result_code):
            raise ValueError("result_code must match [a-z0-9_.-]{1,64}")
        check_mutation_id(self.mutation_id)
        check_evidence_digest(self.evidence_digest)


class ExecutionView(msgspec.Struct, frozen=True):
    """An execution as stored, with the resolution (if any) that closed it."""

    dispatch_id: str
    state: ExecutionState
    owner: str
    version: int
    attempt: int
    lease_expires_at_ms: int
    started_at_ms: int | None
    finished_at_ms: int | None
    result_code: str | None
    completion_mutation_id: str | None
    evidence_digest: str | None
    resolution_source: ResolutionSource | None
    resolution_outcome: ExecutionState | None
    resolution_evidence_digest: str | None
    db_now_ms: int

    @property
    def recovery_required(self) -> bool:
        return self.state is ExecutionState.EXECUTING and self.lease_expires_at_ms <= self.db_now_ms
