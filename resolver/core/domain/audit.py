"""The audit chain of manual decisions and the prune runs that removed links of it."""

from __future__ import annotations

import msgspec


class AuditLink(msgspec.Struct, frozen=True):
    """One link of the audit chain of manual decisions, with its content rebuilt from the
    stored facts (`facts_content`, None when the resolution was pruned)."""

    seq: int
    mutation_id: str
    dispatch_id: str
    content: str
    prev_hash: str
    hash: str
    recorded_at_ms: int
    facts_content: str | None


class PruneRunRecord(msgspec.Struct, frozen=True):
    """The prune run that recorded an export: the range of audit links it removed (None for
    a run before the range was recorded)."""

    run_id: int
    audit_first_seq: int | None
    audit_last_seq: int | None

    def covers(self, seq: int) -> bool:
        if self.audit_first_seq is None or self.audit_last_seq is None:
            return True
        return self.audit_first_seq <= seq <= self.audit_last_seq
