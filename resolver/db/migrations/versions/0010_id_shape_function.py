"""One identifier shape: resolver_is_id, used by the dispatch and completion checks.

The SQL is ../sql/0010_id_shape_function.up.sql and .down.sql, run as it is.

Revision ID: 0010_id_shape_function
Revises: 0009_protocol_fences
Create Date: 2026-12-01
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0010_id_shape_function"
down_revision = "0009_protocol_fences"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
