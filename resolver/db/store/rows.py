"""Rows of the protocol, recovery and late-evidence statements as domain values, and the
JSON pages the batch functions read."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

import msgspec

from resolver.core.domain import (
    ClaimedItem,
    Completion,
    DispatchIdentity,
    ExecutionLease,
    ExecutionState,
    ItemOutcome,
    LateWatch,
)
from resolver.db.store.handle import Row


def enums(row: Row, **columns: Callable[[str], StrEnum]) -> None:
    """Stored codes become their enums (NULL stays None); an unknown code raises."""
    for column, enum in columns.items():
        if row[column] is not None:
            row[column] = enum(row[column])


def fence(lease: ExecutionLease, **extra: Any) -> dict[str, Any]:
    return {
        "dispatch_id": lease.dispatch_id,
        "owner": lease.owner,
        "token": lease.token,
        "version": lease.version,
        **extra,
    }


def completion_params(
    lease: ExecutionLease, completion: Completion, now_ms: int | None
) -> dict[str, Any]:
    """resolver_execution_complete's arguments: the fence and what the executor completes with."""
    return fence(
        lease,
        now_ms=now_ms,
        outcome=completion.outcome.value,
        result_code=completion.result_code,
        mutation_id=completion.mutation_id,
        evidence_digest=completion.evidence_digest,
    )


def lease_of(row: Row | None) -> ExecutionLease:
    assert row is not None  # the protocol functions answer one row or raise
    return ExecutionLease(
        dispatch_id=row["dispatch_id"],
        owner=row["owner"],
        token=row["token"],
        version=row["version"],
        attempt=row["attempt"],
        lease_expires_at_ms=row["lease_expires_at_ms"],
        state=ExecutionState(row["state"]),
    )


# What the claim returns, in its RETURNING order: rows are read as tuples (a dict per row
# cost more than the rest of building the page). tests/integration/schema/test_statements.py
# checks the statement against this list.
CLAIM_COLUMNS = (
    "dispatch_id",
    "recovery_token",
    "recovery_version",
    "execution_version",
    "finding_count",
    "schema_version",
    "approval_request_id",
    "project_id",
    "action_type",
    "action_digest",
    "idempotency_key",
    "attempt",
    "started_at_ms",
    "lease_expires_at_ms",
    "claimed_at_ms",
    "next_due_at_ms",
)


def claimed(
    dispatch_id: str,
    recovery_token: str,
    recovery_version: int,
    execution_version: int,
    finding_count: int,
    schema_version: int,
    approval_request_id: str,
    project_id: str,
    action_type: str,
    action_digest: str,
    idempotency_key: str,
    attempt: int,
    started_at_ms: int,
    lease_expires_at_ms: int,
    claimed_at_ms: int,
    next_due_at_ms: int | None,
) -> ClaimedItem:
    # Positional, in the fields' declared order: a page builds two of these per row, and
    # keyword arguments cost a frozen dataclass's __init__ more than its work.
    identity = DispatchIdentity(
        schema_version,
        dispatch_id,
        approval_request_id,
        project_id,
        action_type,
        action_digest,
        attempt,
        started_at_ms,
        idempotency_key,
        lease_expires_at_ms,
    )
    return ClaimedItem(
        identity,
        recovery_token,
        recovery_version,
        execution_version,
        finding_count,
        claimed_at_ms,
        next_due_at_ms,
    )


def late_watch(row: Row) -> LateWatch:
    return LateWatch(
        identity=DispatchIdentity(
            schema_version=row["schema_version"],
            dispatch_id=row["dispatch_id"],
            approval_request_id=row["approval_request_id"],
            project_id=row["project_id"],
            action_type=row["action_type"],
            action_digest=row["action_digest"],
            attempt=row["attempt"],
            started_at_ms=row["started_at_ms"],
            idempotency_key=row["idempotency_key"],
            lease_expires_at_ms=row["lease_expires_at_ms"],
        ),
        watch_token=row["watch_token"],
        decided_outcome=ExecutionState(row["decided_outcome"]),
        observations=row["observations"],
    )


def page_items(outcomes: Sequence[ItemOutcome]) -> str:
    """A page's outcomes as the JSON array `resolver_commit_automatic` reads, one object per item.

    One C-level encode of the whole page: adapting nine parallel arrays element by element
    cost the replica more CPU than the rest of the commit.
    """
    return encode_items(
        [
            {
                "dispatch_id": o.item.identity.dispatch_id,
                "recovery_token": o.item.recovery_token,
                "recovery_version": o.item.recovery_version,
                "execution_version": o.item.execution_version,
                "finding": o.finding.kind.value,
                "result_code": o.finding.result_code,
                "evidence_digest": o.finding.evidence_digest,
                "mutation_id": o.mutation_id,
                "delay_ms": o.retry_delay_ms,
                "failure": o.finding.failure.value if o.finding.failure is not None else None,
                "escalate_after_ms": o.escalate_after_ms,
                "reason": o.finding.reason,
            }
            for o in outcomes
        ]
    ).decode("utf-8")


# msgspec's encoder: the page as one compact JSON text in C, several times faster than the
# standard library's for a page of small flat objects (UTF-8 kept, as before).
encode_items = msgspec.json.Encoder().encode
