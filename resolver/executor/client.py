"""The executor API: create a dispatch, lease it, cross the start barrier, renew, complete.

A thin caller of the executor protocol's SQL functions (docs/executor-protocol.md): every
call is one fenced transaction on the database clock, and every refusal is decided inside
the database and raised here as its typed error. A lost fence
is an answer (`FenceConflict`, `LeaseLost`), never a reason to retry blindly.
"""

from __future__ import annotations

import copy
from enum import StrEnum

from resolver.core.domain import Completion, DispatchSpec, ExecutionLease
from resolver.core.ports import ExecutionStore


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

    def at(self, now_ms: int) -> ExecutionClient:
        """This client with its calls at `now_ms` in place of the database clock (tests, as the
        table owner: an executor role's override is refused with `InvalidDispatch`)."""
        view = copy.copy(self)
        view._store = self._store.at(now_ms)
        return view

    def create_dispatch(self, spec: DispatchSpec) -> DispatchSpec:
        """Record the immutable dispatch; an identical re-create is accepted idempotently."""
        self._store.create_dispatch(spec)
        return spec

    def lease(self, dispatch_id: str) -> ExecutionLease:
        """First lease, or takeover of an expired `leased` one; `NotLeasable` otherwise."""
        return self._store.lease_execution(dispatch_id, self._owner, self._lease_ms)

    def start(self, lease: ExecutionLease) -> ExecutionLease:
        """Cross the start barrier (leased -> executing) and arm recovery, atomically."""
        return self._store.start_execution(lease, self._lease_ms)

    def renew(self, lease: ExecutionLease) -> ExecutionLease:
        """Extend the lease; recovery leases on the dispatch are revoked in the same step."""
        return self._store.renew_execution(lease, self._lease_ms)

    def complete(self, lease: ExecutionLease, completion: Completion) -> CompletionResult:
        """Record the terminal state; a resolution that won first only admits an exact replay."""
        if self._store.complete_execution(lease, completion):
            return CompletionResult.COMMITTED
        return CompletionResult.REPLAYED
