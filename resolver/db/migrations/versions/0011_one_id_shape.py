"""One identifier shape: resolver_is_id, used by the dispatch and completion checks.

The SQL is ../sql/0011_one_id_shape.up.sql and .down.sql, run as it is.

Revision ID: 0011_one_id_shape
Revises: 0010_adoption_fixes
Create Date: 2026-12-01
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0011_one_id_shape"
down_revision = "0010_adoption_fixes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
