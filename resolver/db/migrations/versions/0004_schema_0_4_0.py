"""From the tables of release 0.3.0 to those of release 0.4.0, in one step.

The SQL is ../sql/0004_schema_0_4_0.up.sql and .down.sql, run as it is. Until 0.4.0 is
released, every table change of the release goes into this one pair. The revision exists
before any table changes: `resolver migrate` records the functions and triggers it applies per
revision, and a downgrade to 0.3.0 restores that release's own only while this release's are
recorded at a revision of their own.

Revision ID: 0004_schema_0_4_0
Revises: 0003_schema_0_3_0
Create Date: 2026-12-07
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0004_schema_0_4_0"
down_revision = "0003_schema_0_3_0"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
