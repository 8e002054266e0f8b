"""The automatic commit skips rows another transaction holds instead of waiting for them.

The SQL is ../sql/0011_commit_skip_locked.up.sql and .down.sql, run as it is.

Revision ID: 0011_commit_skip_locked
Revises: 0010_id_shape_function
Create Date: 2026-12-01

An operator's open `SELECT ... FOR UPDATE` on one execution made every page that carried it
wait for the lock and fail whole on lock_timeout, and the page's other items came back
together after their recovery leases lapsed: head-of-line blocking for as long as the
operator's transaction lived. Now the held item is left out as a lost fence and the rest
commits. Nothing stored changes; downgrade restores the waiting commit.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0011_commit_skip_locked"
down_revision = "0010_id_shape_function"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
