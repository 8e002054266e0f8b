"""The tables of release 0.1.0: where an empty database starts.

The SQL is ../sql/0001_schema_0_1_0.up.sql and .down.sql, run as it is. A database release
0.1.0 migrated carries its own id for this revision (`0018_late_expire_index`), which
`resolver migrate` moves to this one (resolver/db/migrate.py, RELEASED_REVISIONS).

Revision ID: 0001_schema_0_1_0
Revises:
Create Date: 2026-12-06
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0001_schema_0_1_0"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
