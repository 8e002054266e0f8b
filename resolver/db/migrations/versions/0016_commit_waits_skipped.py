"""Performance: the automatic commit waits briefly for rows its SKIP LOCKED passes skipped.

The SQL is ../sql/0016_commit_waits_skipped.up.sql and .down.sql, run as it is.

Revision ID: 0016_commit_waits_skipped
Revises: 0015_audit_export
Create Date: 2026-12-02

A concurrent claim holds, for the rest of its statement, the lock of every control it found
claimed since its snapshot; a page commit that skipped those rows left its whole page to wait
a recovery lease. The commit now waits for skipped rows at most 50 ms each pass, in the same
lock order, through two helpers (resolver_commit_wait_executions, _controls). Downgrade
restores the 0012 commit and drops the helpers.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0016_commit_waits_skipped"
down_revision = "0015_audit_export"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
