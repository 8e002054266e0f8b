"""`ledger`: a provider written outside the product, with its own table in the resolver's
database, its own reason codes and its own escalation windows; installed by the test-support
distribution only, to prove such a provider is treated exactly like a built-in.

The ledger service books a refund in `ledger_entries` (this package's own migration) with a
digest over the entry's fields; the provider reads it READ ONLY and accepts it only when the
entry names this dispatch and attempt and its digest still matches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, LiteralString

from pydantic import BaseModel, ConfigDict

from resolver.evidence import (
    SQL_SOURCE_REASONS,
    Capability,
    DispatchIdentity,
    Finding,
    FindingKind,
    Outcome,
    ProviderFailure,
    ProviderSchema,
    ReadOnlyDatabase,
    Reason,
    RetainedTable,
    Row,
    SourceMisconfigured,
    StorageUnavailable,
    canonical_json,
    declare,
    parse_provider_settings,
    sha256_hex,
)

NAME = "ledger"
SELECT_ENTRIES: LiteralString = """
SELECT dispatch_id, idempotency_key, action_digest, attempt, amount_cents, state, entry_digest
FROM ledger_entries WHERE dispatch_id = ANY (%(dispatch_ids)s::text[])
"""
# Ten minutes for an entry that is not there yet, half an hour for one still pending: the
# ledger's own service levels, not the built-ins' hour.
WINDOWS = {FindingKind.MISSING: 600.0, FindingKind.STILL_RUNNING: 1800.0}

_MISSING = Finding(FindingKind.MISSING, cause="no_ledger_entry")
_PENDING = Finding(FindingKind.STILL_RUNNING)
_ALTERED = Finding(FindingKind.CONFLICT, cause="ledger_entry_altered")
_FOREIGN = Finding(FindingKind.CONFLICT, cause="ledger_entry_foreign")


def entry_digest(row: Mapping[str, Any]) -> str:
    """What the ledger service signs an entry with: its fields, canonical."""
    fields = ("dispatch_id", "idempotency_key", "action_digest", "attempt", "amount_cents", "state")
    return sha256_hex(canonical_json({name: row[name] for name in fields}))


class LedgerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    database_url: str
    timeout_seconds: float = 5.0


class LedgerProvider:
    """One READ ONLY query per page."""

    capability = Capability.AUTOMATIC
    bounds_own_time = True

    def __init__(self, database: ReadOnlyDatabase, timeout_seconds: float) -> None:
        self._database = database
        self.timeout_seconds = timeout_seconds

    def inspect(self, identity: DispatchIdentity) -> Finding:
        return self.inspect_page([identity])[identity.dispatch_id]

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        ids = [i.dispatch_id for i in identities]
        try:
            rows = self._database.fetch(SELECT_ENTRIES, {"dispatch_ids": ids})
        except StorageUnavailable:
            return dict.fromkeys(
                ids, Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.OUTAGE)
            )
        except SourceMisconfigured as exc:
            unavailable = Finding(
                FindingKind.UNAVAILABLE, failure=ProviderFailure.CONFIGURATION, cause=exc.cause
            )
            return dict.fromkeys(ids, unavailable)
        by_id = {row["dispatch_id"]: row for row in rows}
        return {i.dispatch_id: judge(i, by_id.get(i.dispatch_id)) for i in identities}

    def close(self) -> None:
        self._database.close()


def judge(identity: DispatchIdentity, row: Row | None) -> Finding:
    if row is None:
        return _MISSING
    if row["entry_digest"] != entry_digest(row):
        return _ALTERED
    bound = (
        row["idempotency_key"] == identity.idempotency_key
        and row["action_digest"] == identity.action_digest
        and row["attempt"] == identity.attempt
    )
    if not bound:
        return _FOREIGN
    if row["state"] == "pending":
        return _PENDING
    outcome = Outcome.SUCCEEDED if row["state"] == "booked" else Outcome.FAILED
    return Finding.verified(outcome, row["entry_digest"], f"ledger_{row['state']}")


@declare(
    reasons=(
        Reason("no_ledger_entry", "the refund ledger has no entry for this refund yet"),
        Reason(
            "ledger_entry_altered",
            "the ledger entry no longer matches its digest: it was changed after booking",
            suggests_tampering=True,
        ),
        Reason(
            "ledger_entry_foreign",
            "the ledger entry was booked for another refund or attempt",
            suggests_tampering=True,
        ),
        *SQL_SOURCE_REASONS,
    ),
    escalate_after_seconds=WINDOWS,
    schema=ProviderSchema(__name__, retained=(RetainedTable("ledger_entries"),)),
)
def create(settings: Mapping[str, Any]) -> LedgerProvider:
    """The `resolver.providers` entry point."""
    parsed = parse_provider_settings(LedgerSettings, settings, NAME)
    database = ReadOnlyDatabase(parsed.database_url, timeout_seconds=parsed.timeout_seconds)
    database.open()
    return LedgerProvider(database, parsed.timeout_seconds)
