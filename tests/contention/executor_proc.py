"""An executor process for the crash matrix: kills itself (SIGKILL) at one of its boundaries.

`python -m tests.contention.executor_proc URL DISPATCH_ID CRASH_AT LEASE_SECONDS`. Its side
effect is an internal mutation whose receipt (the `scripted_evidence` row) commits in the
same transaction as the mutation, so evidence exists exactly when the effect happened.
"""

from __future__ import annotations

import os
import signal
import sys
from enum import StrEnum

import psycopg

from resolver.db.repository import PostgresStore
from resolver.domain import Completion, DispatchSpec, Outcome
from resolver.execution import ExecutionClient
from resolver.testing.scripted import SCRIPT_TABLE_DDL

from .workload import _spec


class ExecutorCrash(StrEnum):
    AFTER_LEASE = "after_lease"
    """Leased, never crossed the barrier: another attempt may safely run it."""
    AFTER_START = "after_start"
    """Crossed the barrier, no side effect yet: nothing can prove it did not happen."""
    AFTER_RENEW = "after_renew"
    """Renewed the lease, then did the effect and died: recovery waits for the new expiry."""
    AFTER_EFFECT = "after_effect"
    """The effect and its receipt committed; the completion never did."""
    AFTER_COMPLETE = "after_complete"
    """Completed; nothing is left for recovery."""
    NONE = "none"


def side_effect(url: str, spec: DispatchSpec) -> None:
    """The mutation and its receipt in one transaction (here the receipt is all there is)."""
    with psycopg.connect(url) as conn:
        conn.execute(SCRIPT_TABLE_DDL)
        conn.execute(
            "INSERT INTO scripted_evidence (dispatch_id, action_digest, idempotency_key, kinds,"
            " until_ms) VALUES (%s, %s, %s, ARRAY['verified_succeeded'], '{}')",
            (spec.dispatch_id, spec.action_digest, spec.idempotency_key),
        )


def main(url: str, dispatch_id: str, crash_at: ExecutorCrash, lease_seconds: float) -> None:
    spec = _spec(dispatch_id, "pay.charge")
    with PostgresStore(url) as store:
        client = ExecutionClient(store, owner=f"exec-{os.getpid()}", lease_seconds=lease_seconds)
        client.create_dispatch(spec)
        lease = client.lease(dispatch_id)
        _maybe_crash(crash_at, ExecutorCrash.AFTER_LEASE)
        lease = client.start(lease)
        _maybe_crash(crash_at, ExecutorCrash.AFTER_START)
        if crash_at is ExecutorCrash.AFTER_RENEW:
            lease = client.renew(lease)
        side_effect(url, spec)
        _maybe_crash(crash_at, ExecutorCrash.AFTER_RENEW)
        _maybe_crash(crash_at, ExecutorCrash.AFTER_EFFECT)
        digest = _receipt_digest(spec)
        client.complete(lease, Completion(Outcome.SUCCEEDED, "ok", f"done-{dispatch_id}", digest))
        _maybe_crash(crash_at, ExecutorCrash.AFTER_COMPLETE)


def _receipt_digest(spec: DispatchSpec) -> str:
    from resolver.testing.scripted import evidence_digest

    return evidence_digest(
        spec.dispatch_id, spec.action_digest, spec.idempotency_key, Outcome.SUCCEEDED, "ok"
    )


def _maybe_crash(crash_at: ExecutorCrash, here: ExecutorCrash) -> None:
    if crash_at is here:
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], ExecutorCrash(sys.argv[3]), float(sys.argv[4]))
