"""The execution port: the executor protocol's functions, one call each."""

from __future__ import annotations

import msgspec

from resolver.core.domain import (
    Completion,
    DispatchIdentity,
    DispatchSpec,
    ExecutionLease,
    ExecutionState,
    ExecutionView,
    ResolutionSource,
    StartedExecution,
)
from resolver.db.store.handle import PortStore, Row
from resolver.db.store.rows import completion_params, enums, fence, lease_of


class PostgresExecutionStore(PortStore):
    """What the executor API calls: create, lease, start, renew, complete, read.

    Each protocol call is one function call, atomic by itself: it runs as one statement on a
    pooled connection, one round trip (behind a transaction pooler, in a BEGIN with the
    handle's `SET LOCAL`s).
    """

    def create_dispatch(self, spec: DispatchSpec) -> bool:
        params = {
            "dispatch_id": spec.dispatch_id,
            "approval_request_id": spec.approval_request_id,
            "project_id": spec.project_id,
            "action_type": spec.action_type,
            "action_digest": spec.action_digest,
            "idempotency_key": spec.idempotency_key,
            "schema_version": spec.schema_version,
            "supersedes_dispatch_id": spec.supersedes_dispatch_id,
            "action_summary": spec.action_summary.json() if spec.action_summary else None,
        }
        row = self._db.call("dispatch_create", params)
        assert row is not None  # the function answers one row or raises
        return bool(row["created"])

    def lease_execution(self, dispatch_id: str, owner: str, lease_ms: int) -> ExecutionLease:
        params = {"dispatch_id": dispatch_id, "owner": owner, "lease_ms": lease_ms}
        return lease_of(self._db.call("execution_lease", {**params, "now_ms": self._db.now_ms}))

    def start_execution(self, lease: ExecutionLease, lease_ms: int) -> ExecutionLease:
        params = fence(lease, lease_ms=lease_ms, now_ms=self._db.now_ms)
        return lease_of(self._db.call("execution_start", params))

    def renew_execution(self, lease: ExecutionLease, lease_ms: int) -> ExecutionLease:
        params = fence(lease, lease_ms=lease_ms, now_ms=self._db.now_ms)
        return lease_of(self._db.call("execution_renew", params))

    def complete_execution(self, lease: ExecutionLease, completion: Completion) -> bool:
        params = completion_params(lease, completion, self._db.now_ms)
        row = self._db.call("execution_complete", params)
        assert row is not None  # the function answers one row or raises
        return bool(row["result"] == "committed")

    def get_execution(self, dispatch_id: str) -> ExecutionView | None:
        row = self._db.one("execution_get", {"dispatch_id": dispatch_id, "now_ms": self._db.now_ms})
        if row is None:
            return None
        row.pop("token")
        enums(row, state=ExecutionState, resolution_source=ResolutionSource)
        enums(row, resolution_outcome=ExecutionState)
        return ExecutionView(**row)


# The executor SDK's way past the barrier: the protocol's calls composed in one statement
# (resolver/db/queries.sql), one transaction and one round trip where the calls one by one
# take two or three; not part of the execution port, which is one call per protocol function.
# What the receipt's identity read answers: the identity's own fields. (Its lease end is what
# recovery read, not what a receipt binds; the composed row's lease end is the new lease's.)
_IDENTITY_FIELDS = tuple(f.name for f in msgspec.structs.fields(DispatchIdentity) if f.required)


def lease_and_start(
    store: PostgresExecutionStore, dispatch_id: str, owner: str, lease_ms: int
) -> StartedExecution:
    """Lease, cross the start barrier and read the receipt's identity, in one transaction:
    every refusal of the calls one by one, and nothing written when one is refused."""
    params = {"dispatch_id": dispatch_id, "owner": owner, "lease_ms": lease_ms}
    return _started(store._db.call("execution_lease_start", {**params, "now_ms": store._db.now_ms}))


def start_with_identity(
    store: PostgresExecutionStore, lease: ExecutionLease, lease_ms: int
) -> StartedExecution:
    """Cross the start barrier of a lease taken before, and read the receipt's identity, in
    one transaction."""
    params = fence(lease, lease_ms=lease_ms, now_ms=store._db.now_ms)
    return _started(store._db.call("execution_start_identity", params))


def _started(row: Row | None) -> StartedExecution:
    lease = lease_of(row)
    assert row is not None  # lease_of refused it otherwise
    identity = DispatchIdentity(**{name: row[name] for name in _IDENTITY_FIELDS})
    return StartedExecution(lease=lease, identity=identity, db_now_ms=row["db_now_ms"])
