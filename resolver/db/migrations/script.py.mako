"""${message}

The SQL is ../sql/${up_revision}.up.sql and .down.sql, run as it is: tables, columns,
constraints, indexes, privileges and data only. Functions and triggers are not migrated: they
are defined once in resolver/db/schema/functions/ (resolver/db/README.md). Change the tables'
current definition in resolver/db/schema/tables/ to match (test_schema_files.py diffs them).

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
