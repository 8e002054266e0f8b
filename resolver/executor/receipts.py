"""Receipt writing for executors: a signed receipt v1 in the same transaction as the mutation.

The executor calls `write_receipt` inside the transaction of its own mutation, so the receipt
exists if and only if the mutation committed; a provider reading `action_receipts` reads it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from resolver.core.domain import Completion, DispatchIdentity, ExecutionLease, Outcome, sha256_hex
from resolver.db.session import Connection, require_open_transaction
from resolver.db.store.receipts import receipt_identity, receipt_write, receipt_write_complete
from resolver.evidence.receipts import KeyRing, encode_receipt, sign_receipt


@dataclass(frozen=True, slots=True)
class WrittenReceipt:
    receipt: dict[str, Any]
    evidence_digest: str
    """Pass this to `Completion(evidence_digest=...)` so a late completion replays exactly."""


def write_receipt(
    conn: Connection,
    lease: ExecutionLease,
    *,
    outcome: Outcome,
    result_code: str,
    receipt_id: str,
    keys: KeyRing,
) -> WrittenReceipt:
    """Sign and insert the receipt inside the caller's transaction (the mutation's own).

    Both steps are protocol functions fenced on the executor's lease
    (`resolver_receipt_identity`, `resolver_receipt_write`): if the execution is no longer
    `executing` under this owner/token/version, `FenceConflict` is raised and the caller must
    roll back its mutation.
    """
    return write_receipt_in(
        conn, lease, outcome=outcome, result_code=result_code, receipt_id=receipt_id, keys=keys
    ).written


@dataclass(frozen=True, slots=True)
class ReceiptWrite:
    """What one receipt write did."""

    written: WrittenReceipt
    xact_id: str
    """The id of the transaction that wrote it: the SDK judges a lost COMMIT reply by it."""
    settled: bool | None
    """Completing in the same statement: whether it settled the execution (False for an exact
    replay); None when it wrote the receipt only."""


def write_receipt_in(
    conn: Connection,
    lease: ExecutionLease,
    *,
    outcome: Outcome,
    result_code: str,
    receipt_id: str,
    keys: KeyRing,
    signed_as: tuple[DispatchIdentity, int] | None = None,
    mutation_id: str | None = None,
) -> ReceiptWrite:
    """`write_receipt`, saying what the write did. `signed_as`: the identity and finish time
    to sign with, where the caller read the identity already (the runner, with the start
    barrier): the write alone then checks the fence, the live lease and every field against
    the execution. `mutation_id`: the same statement also completes the execution with the
    receipt's digest, fenced on the same lease."""
    receipt = _signed(conn, lease, outcome, result_code, receipt_id, keys, signed_as)
    digest = sha256_hex(encode_receipt(receipt))
    settled: bool | None = None
    if mutation_id is None:
        row = receipt_write(conn, lease, receipt)
    else:
        completion = Completion(outcome, result_code, mutation_id, digest)
        row = receipt_write_complete(conn, lease, receipt, completion)
        settled = row["result"] == "committed"
    return ReceiptWrite(WrittenReceipt(receipt, digest), str(row["xact_id"]), settled)


def _signed(
    conn: Connection,
    lease: ExecutionLease,
    outcome: Outcome,
    result_code: str,
    receipt_id: str,
    keys: KeyRing,
    signed_as: tuple[DispatchIdentity, int] | None,
) -> dict[str, Any]:
    require_open_transaction(conn, caller="write_receipt")
    if signed_as is None:
        row = dict(receipt_identity(conn, lease))
        now_ms = row.pop("db_now_ms")
        identity = DispatchIdentity(**row)
    else:
        identity, now_ms = signed_as
    return sign_receipt(
        identity,
        outcome=outcome,
        result_code=result_code,
        finished_at_ms=now_ms,
        receipt_id=receipt_id,
        keys=keys,
    )
