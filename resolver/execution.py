"""The executor API: create a dispatch, lease it, cross the start barrier, renew, complete.

Every call is one fenced transaction on the database clock. A lost fence is an answer
(`FenceConflict`, `LeaseLost`), never a reason to retry blindly.
"""

from __future__ import annotations

from enum import StrEnum

from resolver.domain import (
    Completion,
    DispatchSpec,
    ExecutionLease,
    ExecutionState,
    ExecutionView,
)
from resolver.errors import FenceConflict, InvalidDispatch, LeaseLost, NotFound, NotLeasable
from resolver.ports import ExecutionStore

TERMINAL = frozenset({ExecutionState.SUCCEEDED, ExecutionState.FAILED, ExecutionState.BLOCKED})


class CompletionResult(StrEnum):
    COMMITTED = "committed"
    """This call moved the execution to its terminal state."""
    REPLAYED = "replayed"
    """The same outcome was already recorded (by this completion or an exact resolution)."""


class ExecutionClient:
    """What an executor process uses around one side effect."""

    def __init__(self, store: ExecutionStore, *, owner: str, lease_seconds: float = 30.0) -> None:
        if lease_seconds <= 0:
            raise ValueError("lease_seconds must be positive")
        self._store = store
        self._owner = owner
        self._lease_ms = int(lease_seconds * 1000)

    def create_dispatch(self, spec: DispatchSpec) -> DispatchSpec:
        """Record the immutable dispatch; an identical re-create is accepted idempotently."""
        if self._store.insert_dispatch(spec):
            return spec
        existing = self._store.get_dispatch(spec.dispatch_id, spec.idempotency_key)
        if existing == spec:
            return spec
        raise InvalidDispatch(
            f"dispatch {spec.dispatch_id!r} or idempotency key {spec.idempotency_key!r} is "
            "already recorded with a different identity; a new action needs a new dispatch id "
            "and idempotency key"
        )

    def lease(self, dispatch_id: str, *, now_ms: int | None = None) -> ExecutionLease:
        lease = self._store.lease_execution(dispatch_id, self._owner, self._lease_ms, now_ms)
        if lease is not None:
            return lease
        view = self._require(dispatch_id, now_ms)
        if view.state is ExecutionState.LEASED:
            raise NotLeasable(
                f"dispatch {dispatch_id!r} is leased by {view.owner!r} until its lease expires"
            )
        raise NotLeasable(
            f"dispatch {dispatch_id!r} is {view.state.value}: past the start barrier only "
            "recovery or a human may settle it"
        )

    def start(self, lease: ExecutionLease, *, now_ms: int | None = None) -> ExecutionLease:
        """Cross the start barrier (leased -> executing) and arm recovery, atomically."""
        started = self._store.start_execution(lease, self._lease_ms, now_ms)
        if started is not None:
            return started
        view = self._require(lease.dispatch_id, now_ms)
        if view.state is ExecutionState.LEASED and view.version == lease.version:
            raise LeaseLost(f"lease on {lease.dispatch_id!r} expired before the start barrier")
        if view.state is ExecutionState.LEASED:
            raise LeaseLost(
                f"lease on {lease.dispatch_id!r} was taken over (attempt {view.attempt})"
            )
        raise FenceConflict(f"dispatch {lease.dispatch_id!r} is already {view.state.value}")

    def renew(self, lease: ExecutionLease, *, now_ms: int | None = None) -> ExecutionLease:
        """Extend the lease; recovery leases on the dispatch are revoked in the same step."""
        renewed = self._store.renew_execution(lease, self._lease_ms, now_ms)
        if renewed is not None:
            return renewed
        view = self._require(lease.dispatch_id, now_ms)
        if view.state is ExecutionState.LEASED:
            raise LeaseLost(
                f"lease on {lease.dispatch_id!r} was taken over (attempt {view.attempt})"
            )
        raise FenceConflict(
            f"renew of {lease.dispatch_id!r} at version {lease.version} rejected: "
            f"now {view.state.value} at version {view.version}"
        )

    def complete(
        self, lease: ExecutionLease, completion: Completion, *, now_ms: int | None = None
    ) -> CompletionResult:
        """Record the terminal state; a resolution that won first only admits an exact replay."""
        if self._store.complete_execution(lease, completion, now_ms):
            return CompletionResult.COMMITTED
        view = self._require(lease.dispatch_id, now_ms)
        if _is_exact_replay(view, completion):
            return CompletionResult.REPLAYED
        raise FenceConflict(_completion_conflict(view, lease, completion))

    def _require(self, dispatch_id: str, now_ms: int | None) -> ExecutionView:
        view = self._store.get_execution(dispatch_id, now_ms)
        if view is None:
            raise NotFound(f"dispatch {dispatch_id!r} has no execution")
        return view


def _is_exact_replay(view: ExecutionView, completion: Completion) -> bool:
    if view.state.value != completion.outcome.value:
        return False
    if view.resolution_source is None:
        # Our own completion already landed: a replay repeats every semantic field.
        return (
            view.completion_mutation_id == completion.mutation_id
            and view.result_code == completion.result_code
            and view.evidence_digest == completion.evidence_digest
        )
    # A resolution won first: only the same outcome on the same evidence is the same fact.
    return (
        completion.evidence_digest is not None
        and view.resolution_evidence_digest == completion.evidence_digest
    )


def _completion_conflict(view: ExecutionView, lease: ExecutionLease, completion: Completion) -> str:
    if view.state in TERMINAL:
        by = f"a {view.resolution_source} resolution" if view.resolution_source else "a completion"
        return (
            f"dispatch {view.dispatch_id!r} was already settled {view.state.value} by {by}; "
            f"completion {completion.mutation_id!r} ({completion.outcome.value}) drifts from it"
        )
    return (
        f"completion of {view.dispatch_id!r} at version {lease.version} rejected: "
        f"now {view.state.value} at version {view.version}"
    )
