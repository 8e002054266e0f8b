"""`internal_mutation`: a signed receipt v1 written in the same transaction as the mutation.

The executor calls `write_receipt` inside the transaction of its own mutation, so the
receipt exists if and only if the mutation committed. The provider reads the receipt in a
READ ONLY transaction and verifies it against the whole dispatch identity.

| evidence                                        | finding              |
|-------------------------------------------------|----------------------|
| no receipt row                                  | missing              |
| valid receipt, outcome succeeded / failed       | verified_succeeded / verified_failed |
| any shape, size, key, signature, identity issue | conflict             |
| database unreachable, timeout, not migrated     | unavailable          |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from psycopg.pq import TransactionStatus

from providers._sql import SqlPageProvider, SqlSourceSettings
from resolver.db.readonly import ReadOnlyDatabase
from resolver.db.repository import receipt_identity, receipt_write
from resolver.domain import (
    DispatchIdentity,
    ExecutionLease,
    Finding,
    FindingKind,
    Outcome,
    sha256_hex,
)
from resolver.evidence import parse_provider_settings
from resolver.receipts import KeyRing, encode_receipt, receipt_finding, sign_receipt

NAME = "internal_mutation"

SELECT_RECEIPTS: LiteralString = """
SELECT dispatch_id, receipt::text AS receipt
FROM action_receipts
WHERE dispatch_id = ANY(%(dispatch_ids)s::text[])
"""

_MISSING = Finding(FindingKind.MISSING)


class InternalMutationSettings(SqlSourceSettings):
    pass


class InternalMutationProvider(SqlPageProvider):
    """Reads `action_receipts` for a whole page in one READ ONLY query."""

    def __init__(self, database: ReadOnlyDatabase, keys: KeyRing, timeout_seconds: float) -> None:
        super().__init__(database, timeout_seconds)
        self._keys = keys.require_keys(NAME)

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        ids = [i.dispatch_id for i in identities]
        rows = self._fetch(SELECT_RECEIPTS, {"dispatch_ids": ids})
        if isinstance(rows, Finding):
            return dict.fromkeys(ids, rows)
        receipts = {row["dispatch_id"]: row["receipt"] for row in rows}
        return {i.dispatch_id: self._finding(i, receipts.get(i.dispatch_id)) for i in identities}

    def _finding(self, identity: DispatchIdentity, receipt: str | None) -> Finding:
        if receipt is None:
            return _MISSING
        return receipt_finding(receipt, identity, self._keys, source=NAME)


def create(settings: Mapping[str, Any]) -> InternalMutationProvider:
    """The `resolver.providers` entry point: settings from the YAML config."""
    parsed = parse_provider_settings(InternalMutationSettings, settings, NAME)
    keys = KeyRing.from_environment()
    keys.require_keys(NAME)
    return InternalMutationProvider(parsed.open_database(NAME), keys, parsed.timeout_seconds)


# -- executor side --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WrittenReceipt:
    receipt: dict[str, Any]
    evidence_digest: str
    """Pass this to `Completion(evidence_digest=...)` so a late completion replays exactly."""


def write_receipt(
    conn: psycopg.Connection[Any],
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
    _require_open_transaction(conn)
    row = dict(receipt_identity(conn, lease))
    now_ms = row.pop("db_now_ms")
    receipt = sign_receipt(
        DispatchIdentity(**row),
        outcome=outcome,
        result_code=result_code,
        finished_at_ms=now_ms,
        receipt_id=receipt_id,
        keys=keys,
    )
    receipt_write(conn, lease, receipt)
    return WrittenReceipt(receipt, sha256_hex(encode_receipt(receipt)))


def _require_open_transaction(conn: psycopg.Connection[Any]) -> None:
    # In autocommit mode outside a transaction block the insert would commit on its own,
    # and a receipt could then exist for a mutation that rolled back.
    if conn.autocommit and conn.info.transaction_status is TransactionStatus.IDLE:
        raise ValueError(
            "write_receipt needs the mutation's transaction: call it inside "
            "`with conn.transaction():` or on a connection with autocommit off"
        )
