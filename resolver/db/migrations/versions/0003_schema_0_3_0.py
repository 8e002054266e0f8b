"""From the tables of release 0.2.0 to those of release 0.3.0, in one step.

The SQL is ../sql/0003_schema_0_3_0.up.sql and .down.sql, run as it is. Until 0.3.0 is
released, every table change of the release goes into this one pair.

Revision ID: 0003_schema_0_3_0
Revises: 0002_schema_0_2_0
Create Date: 2026-12-06
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0003_schema_0_3_0"
down_revision = "0002_schema_0_2_0"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
