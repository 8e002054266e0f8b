"""Every port's store on one handle, as one object: what a test drives the database through.

The product hands each component only its port's store (resolver/app/composition.py); a test
plays every part at once, so it holds them all. `store.at(t)` runs the calls at `t` on the
database clock (the tests connect as the table owner, who alone may override it).
"""

from __future__ import annotations

from typing import Any

from resolver.db.store import (
    PostgresAuditReader,
    PostgresBacklogReader,
    PostgresExecutionStore,
    PostgresHandle,
    PostgresHumanStore,
    PostgresLateEvidenceStore,
    PostgresRecoveryStore,
)


class Storage(
    PostgresRecoveryStore,
    PostgresExecutionStore,
    PostgresHumanStore,
    PostgresAuditReader,
    PostgresLateEvidenceStore,
    PostgresBacklogReader,
):
    """Built like the handle (`Storage(url, max_connections=8)`), or over one (`over`)."""

    def __init__(self, database_url: str | PostgresHandle, **options: Any) -> None:
        if isinstance(database_url, PostgresHandle):
            super().__init__(database_url)
        else:
            super().__init__(PostgresHandle(database_url, **options))

    def open(self) -> None:
        self.handle.open()

    def close(self) -> None:
        self.handle.close()
