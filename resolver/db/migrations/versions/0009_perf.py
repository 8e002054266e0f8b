"""Room on each page of the two versioned hot tables, so their updates can stay HOT.

The SQL is ../sql/0009_perf.up.sql and .down.sql, run as it is. Write both files, and
change the current definition in resolver/db/schema/ to match (test_schema_files.py diffs them).

Revision ID: 0009_perf
Revises: 0007_each_rule_once
Create Date: 2026-12-01
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0009_perf"
down_revision = "0007_each_rule_once"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
