"""`internal_mutation`: a signed receipt v1 written in the same transaction as the mutation.

The executor calls `resolver.executor.write_receipt` inside the transaction of its own
mutation, so the receipt exists if and only if the mutation committed. The provider reads the
receipt in a READ ONLY transaction and verifies it against the whole dispatch identity.

| evidence                                        | finding              |
|-------------------------------------------------|----------------------|
| no receipt row                                  | missing              |
| valid receipt, outcome succeeded / failed       | verified_succeeded / verified_failed |
| any shape, size, key, signature, identity issue | conflict             |
| database unreachable, timeout, not migrated     | unavailable          |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, LiteralString

import msgspec

from providers._sql import SqlPageProvider, SqlSourceSettings
from resolver.evidence import (
    RECEIPT_REASONS,
    SQL_SOURCE_REASONS,
    DispatchIdentity,
    Finding,
    FindingKind,
    KeyRing,
    ReadOnlyDatabase,
    Reason,
    declare,
    parse_provider_settings,
    receipt_finding,
)

NAME = "internal_mutation"

# The page's ids travel as one JSON array: the driver adapts a list to text[] element by
# element in Python, more than half of this read's client time for a page of 64.
SELECT_RECEIPTS: LiteralString = """
SELECT dispatch_id, receipt::text AS receipt
FROM action_receipts
WHERE dispatch_id IN (SELECT json_array_elements_text(%(dispatch_ids)s::json))
"""

_MISSING = Finding(FindingKind.MISSING, cause="no_receipt")


class InternalMutationSettings(SqlSourceSettings):
    pass


class InternalMutationProvider(SqlPageProvider):
    """Reads `action_receipts` for a whole page in one READ ONLY query."""

    def __init__(self, database: ReadOnlyDatabase, keys: KeyRing, timeout_seconds: float) -> None:
        super().__init__(database, timeout_seconds)
        self._keys = keys.require_keys(NAME)

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        ids = [i.dispatch_id for i in identities]
        rows = self._fetch(SELECT_RECEIPTS, {"dispatch_ids": _json_array(ids)})
        if isinstance(rows, Finding):
            return dict.fromkeys(ids, rows)
        receipts = {row["dispatch_id"]: row["receipt"] for row in rows}
        return {i.dispatch_id: self._finding(i, receipts.get(i.dispatch_id)) for i in identities}

    def _finding(self, identity: DispatchIdentity, receipt: str | None) -> Finding:
        if receipt is None:
            return _MISSING
        return receipt_finding(receipt, identity, self._keys, source=NAME)


def _json_array(values: list[str]) -> str:
    return msgspec.json.encode(values).decode()


@declare(
    reasons=(
        Reason("no_receipt", "no receipt was found"),
        *RECEIPT_REASONS,
        *SQL_SOURCE_REASONS,
    ),
)
def create(settings: Mapping[str, Any]) -> InternalMutationProvider:
    """The `resolver.providers` entry point: settings from the YAML config."""
    parsed = parse_provider_settings(InternalMutationSettings, settings, NAME)
    keys = KeyRing.from_environment()
    keys.require_keys(NAME)
    return InternalMutationProvider(parsed.open_database(NAME), keys, parsed.timeout_seconds)
