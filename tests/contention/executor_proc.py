"""An executor process for the crash matrix: kills itself (SIGKILL) at one of its boundaries.

`python -m tests.contention.executor_proc URL DISPATCH_ID CRASH_AT LEASE_SECONDS PROVIDER`.
Its side effect is an internal mutation (a `side_effects` row) whose evidence commits in the
same transaction: a `scripted_evidence` row, or for the built-in `internal_mutation` provider
a signed receipt v1 written with `resolver.executor.write_receipt` under the lease.
"""

from __future__ import annotations

import os
import signal
import sys
from enum import StrEnum

import psycopg

from resolver.core.domain import Completion, DispatchSpec, ExecutionLease, Outcome
from resolver.evidence.receipts import KeyRing
from resolver.executor import PostgresExecutionStore, PostgresHandle
from resolver.executor.client import ExecutionClient
from resolver.executor.receipts import write_receipt
from resolver_test_support.scripted import SCRIPT_TABLE_DDL, evidence_digest

from .workload import RECEIPT_TYPE, _spec


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


SIDE_EFFECTS_DDL = "CREATE TABLE IF NOT EXISTS side_effects (dispatch_id text, at timestamptz)"


def side_effect(url: str, lease: ExecutionLease, spec: DispatchSpec, provider: str) -> str:
    """The mutation and its evidence in one transaction; returns the evidence digest."""
    with psycopg.connect(url) as conn:
        conn.execute(SIDE_EFFECTS_DDL)
        conn.execute("INSERT INTO side_effects VALUES (%s, now())", (spec.dispatch_id,))
        if provider == "internal_mutation":
            keys = KeyRing.from_environment()
            written = write_receipt(
                conn,
                lease,
                outcome=Outcome.SUCCEEDED,
                result_code="ok",
                receipt_id=f"rcpt-{spec.dispatch_id}",
                keys=keys,
            )
            return written.evidence_digest
        conn.execute(SCRIPT_TABLE_DDL)
        conn.execute(
            "INSERT INTO scripted_evidence (dispatch_id, action_digest, idempotency_key, kinds,"
            " until_ms) VALUES (%s, %s, %s, ARRAY['verified_succeeded'], '{}')",
            (spec.dispatch_id, spec.action_digest, spec.idempotency_key),
        )
    return evidence_digest(
        spec.dispatch_id, spec.action_digest, spec.idempotency_key, Outcome.SUCCEEDED, "ok"
    )


def main(
    url: str, dispatch_id: str, crash_at: ExecutorCrash, lease_seconds: float, provider: str
) -> None:
    action_type = RECEIPT_TYPE if provider == "internal_mutation" else "pay.charge"
    spec = _spec(dispatch_id, action_type)
    with PostgresExecutionStore(PostgresHandle(url)) as store:
        client = ExecutionClient(store, owner=f"exec-{os.getpid()}", lease_seconds=lease_seconds)
        client.create_dispatch(spec)
        lease = client.lease(dispatch_id)
        _maybe_crash(crash_at, ExecutorCrash.AFTER_LEASE)
        lease = client.start(lease)
        _maybe_crash(crash_at, ExecutorCrash.AFTER_START)
        if crash_at is ExecutorCrash.AFTER_RENEW:
            lease = client.renew(lease)
        digest = side_effect(url, lease, spec, provider)
        _maybe_crash(crash_at, ExecutorCrash.AFTER_RENEW)
        _maybe_crash(crash_at, ExecutorCrash.AFTER_EFFECT)
        client.complete(lease, Completion(Outcome.SUCCEEDED, "ok", f"done-{dispatch_id}", digest))
        _maybe_crash(crash_at, ExecutorCrash.AFTER_COMPLETE)


def _maybe_crash(crash_at: ExecutorCrash, here: ExecutorCrash) -> None:
    if crash_at is here:
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], ExecutorCrash(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
