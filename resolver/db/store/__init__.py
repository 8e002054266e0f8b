"""Storage split by port over one shared handle: each port of `resolver.core.ports` has its
store here, and a face builds one `PostgresHandle` and hands each component the store of the
port it needs (`Stores` holds them all, for the composition root)."""

from __future__ import annotations

from dataclasses import dataclass

from resolver.db.store.audit import PostgresAuditReader
from resolver.db.store.backlog import PostgresBacklogReader
from resolver.db.store.cases import PostgresCaseReader
from resolver.db.store.execution import PostgresExecutionStore
from resolver.db.store.handle import PortStore, PostgresHandle
from resolver.db.store.late_evidence import PostgresLateEvidenceStore
from resolver.db.store.manual import PostgresManualStore
from resolver.db.store.outcomes import OutcomeListener, PostgresOutcomeReader
from resolver.db.store.recovery import PostgresRecoveryStore


class PostgresHumanStore(PostgresManualStore, PostgresCaseReader):
    """The manual-resolution API's two ports (decisions and the read routes) on one handle."""


@dataclass(frozen=True)
class Stores:
    """One store per port, all on one handle; closing the bundle closes the handle."""

    handle: PostgresHandle
    recovery: PostgresRecoveryStore
    execution: PostgresExecutionStore
    human: PostgresHumanStore
    audit: PostgresAuditReader
    late_evidence: PostgresLateEvidenceStore
    backlog: PostgresBacklogReader

    @classmethod
    def over(cls, handle: PostgresHandle) -> Stores:
        return cls(
            handle,
            PostgresRecoveryStore(handle),
            PostgresExecutionStore(handle),
            PostgresHumanStore(handle),
            PostgresAuditReader(handle),
            PostgresLateEvidenceStore(handle),
            PostgresBacklogReader(handle),
        )

    def at(self, now_ms: int) -> Stores:
        """Every store at an overridden clock (the table owner only: tests and tools)."""
        return Stores.over(self.handle.at(now_ms))

    def close(self) -> None:
        self.handle.close()


__all__ = [
    "OutcomeListener",
    "PortStore",
    "PostgresAuditReader",
    "PostgresBacklogReader",
    "PostgresCaseReader",
    "PostgresExecutionStore",
    "PostgresHandle",
    "PostgresHumanStore",
    "PostgresLateEvidenceStore",
    "PostgresManualStore",
    "PostgresOutcomeReader",
    "PostgresRecoveryStore",
    "Stores",
]
