"""The audit port: what `resolver audit verify` reads of the chain."""

from __future__ import annotations

from resolver.core.domain import AuditLink, PruneRunRecord
from resolver.db.store.handle import PortStore


class PostgresAuditReader(PortStore):
    """The chain page by page, its head, stray decisions, recorded exports."""

    def audit_links(self, after_seq: int, limit: int) -> list[AuditLink]:
        """One page of the audit chain in order, each link with its facts' content."""
        rows = self._db.all("audit_links_page", {"after_seq": after_seq, "limit": limit})
        return [AuditLink(**row) for row in rows]

    def audit_head(self) -> tuple[int, str] | None:
        """The head row, or None when it is gone (the verifier names that `head`)."""
        row = self._db.one("audit_head", {})
        return None if row is None else (int(row["seq"]), str(row["hash"]))

    def audit_export_recorded(self, export_digest: str) -> bool:
        """Whether a prune run recorded an export with this sha256."""
        return self.audit_prune_run(export_digest) is not None

    def audit_prune_run(self, export_digest: str) -> PruneRunRecord | None:
        """The prune run that recorded an export with this sha256, with its audit range."""
        row = self._db.one("audit_export_recorded", {"export_digest": export_digest})
        return None if row is None else PruneRunRecord(**row)

    def audit_unlinked(self, acts_since_ms: int | None = None) -> tuple[str, str] | None:
        """The first act without a link, if any: a manual resolution since the chain began, or
        a reject or withdrawal with a signed fact or at or after `acts_since_ms`."""
        row = self._db.one("audit_unlinked", {"acts_since_ms": acts_since_ms})
        return None if row is None else (row["mutation_id"], row["dispatch_id"])
