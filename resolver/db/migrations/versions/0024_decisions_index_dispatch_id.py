"""Performance: the decisions index carries the dispatch id.

The SQL is ../sql/0024_decisions_index_dispatch_id.up.sql and .down.sql, run as it is.

Revision ID: 0024_decisions_index_dispatch_id
Revises: 0023_commit_reports_escalations
Create Date: 2026-12-03

The decisions list's total counts the newest decisions up to its cap, each checked against
its dispatch's project: with the dispatch id in the partial index of manual decisions the walk
is index-only and never reads a resolution row. Downgrade rebuilds the index without it.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0024_decisions_index_dispatch_id"
down_revision = "0023_commit_reports_escalations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
