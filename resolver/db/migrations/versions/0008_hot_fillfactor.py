"""Room on each page of the two versioned hot tables, so their updates can stay HOT.

The SQL is ../sql/0008_hot_fillfactor.up.sql and .down.sql, run as it is. Write both files, and
change the current definition in resolver/db/schema/ to match (test_schema_files.py diffs them).

Revision ID: 0008_hot_fillfactor
Revises: 0007_sibling_commits
Create Date: 2026-12-01
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0008_hot_fillfactor"
down_revision = "0007_sibling_commits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
