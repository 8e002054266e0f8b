"""Each rule once: the three commits as sibling functions (automatic, manual, completion).

The SQL is ../sql/0007_sibling_commits.up.sql and .down.sql, run as it is.

Revision ID: 0007_sibling_commits
Revises: 0006_page_commit
Create Date: 2026-12-01
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0007_sibling_commits"
down_revision = "0006_page_commit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
