"""Recovery core: dispatches, executions, recovery controls, resolutions, authorizations.

The SQL is ../sql/0001_recovery_core.up.sql and .down.sql, run as it is.

Revision ID: 0001_recovery_core
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0001_recovery_core"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
