"""The outcome feed: what a runtime learns after the resolver (its records, one dispatch's
status and history, their CloudEvents form)."""

from __future__ import annotations

import datetime
from enum import StrEnum
from typing import Any

import msgspec

from resolver.core.domain.sets import TERMINAL_STATES, ControlStatus


class DispatchState(StrEnum):
    """A dispatch's state as a runtime reads it: the stored execution state, `pending` before
    the first lease, and `recovery_required` (never stored) for an executing execution whose
    lease has expired on the database clock."""

    PENDING = "pending"
    LEASED = "leased"
    EXECUTING = "executing"
    RECOVERY_REQUIRED = "recovery_required"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"

    @property
    def terminal(self) -> bool:
        return self.value in TERMINAL_STATES


class OutcomeKind(StrEnum):
    """What a feed record reports (resolver_outcomes_after's `kind`)."""

    SETTLED = "settled"
    """The dispatch reached a terminal state (succeeded, failed, blocked)."""
    CONTRADICTED = "contradicted"
    """Verified evidence seen after a person's decision disagrees with it; the state stays."""
    SUPERSEDED = "superseded"
    """A new dispatch does the action again (`superseded_by`)."""


class SettledBy(StrEnum):
    EXECUTOR = "executor"
    """The executor's own completion."""
    RESOLVER = "resolver"
    """A resolver replica, from verified evidence (`finding`)."""
    PERSON = "person"
    """A person's decision (`actors`, `reason_code`)."""


# CloudEvents 1.0: each record's `type` is this prefix and its kind; `source` defaults to this.
OUTCOME_EVENT_TYPE_PREFIX = "approved-action-resolver.outcome."
OUTCOME_EVENT_SOURCE = "urn:approved-action-resolver:outcomes"


def rfc3339_ms(ms: int) -> str:
    """Milliseconds since the epoch as an RFC 3339 UTC time (CloudEvents' `time`)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class OutcomeRecord(msgspec.Struct, frozen=True):
    """One record of the outcome feed, as resolver_outcomes_after answers it.

    `cursor` is its place in the feed (`xid:seq`): save it after handling the record and read
    after it next time. `state` is the terminal state for `settled` and `contradicted` (the
    person's decision, which the contradiction does not change), and the superseded
    dispatch's state at that moment for `superseded`.
    """

    cursor: str
    kind: OutcomeKind
    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    state: DispatchState
    settled_by: SettledBy | None
    finding: str | None
    result_code: str | None
    evidence_digest: str | None
    mutation_id: str | None
    reason_code: str | None
    actors: tuple[str, ...] | None
    superseded_by: str | None
    occurred_at_ms: int

    def cloud_event(self, source: str = OUTCOME_EVENT_SOURCE) -> dict[str, Any]:
        """The record as a CloudEvents 1.0 event in structured JSON form: `id` the cursor
        (unique in the feed), `subject` the dispatch id, `time` when it happened, `data`
        every field. Forward it to an event bus as it is."""
        data = msgspec.to_builtins(self)
        return {
            "specversion": "1.0",
            "id": self.cursor,
            "source": source,
            "type": OUTCOME_EVENT_TYPE_PREFIX + self.kind.value,
            "subject": self.dispatch_id,
            "time": rfc3339_ms(self.occurred_at_ms),
            "datacontenttype": "application/json",
            "data": data,
        }


class DispatchStatus(msgspec.Struct, frozen=True):
    """One dispatch now, as resolver_dispatch_status answers it: identity, effective state on
    the database clock, what settled it, and the newest dispatch that supersedes it."""

    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    idempotency_key: str
    supersedes_dispatch_id: str | None
    superseded_by: str | None
    state: DispatchState
    attempt: int | None
    lease_expires_at_ms: int | None
    started_at_ms: int | None
    finished_at_ms: int | None
    result_code: str | None
    evidence_digest: str | None
    settled_by: SettledBy | None
    finding: str | None
    reason_code: str | None
    actors: tuple[str, ...] | None
    control_status: ControlStatus | None
    created_at_ms: int
    db_now_ms: int

    @property
    def settled(self) -> bool:
        return self.state.terminal

    @property
    def lease_live(self) -> bool:
        """Leased or executing under a lease that has not expired: someone may be working."""
        return (
            self.state in (DispatchState.LEASED, DispatchState.EXECUTING)
            and self.lease_expires_at_ms is not None
            and self.lease_expires_at_ms > self.db_now_ms
        )


class HistoryEntry(msgspec.Struct, frozen=True):
    """One step of a dispatch's history (resolver_dispatch_history): `created`, `started`,
    then its feed records with their cursors."""

    cursor: str | None
    kind: str
    state: DispatchState
    settled_by: SettledBy | None
    finding: str | None
    result_code: str | None
    reason_code: str | None
    actors: tuple[str, ...] | None
    superseded_by: str | None
    attempt: int | None
    occurred_at_ms: int
