"""Performance: the core tables' CHECK constraints without bounded regex repetitions.

The SQL is ../sql/0017_check_char_classes.up.sql and .down.sql, run as it is.

Revision ID: 0017_check_char_classes
Revises: 0016_commit_waits_skipped
Create Date: 2026-12-02

'^[0-9a-f]{64}$' and '^[a-z0-9_.-]{1,64}$' cost 5 to 20 us per evaluation, five of them per
automatic resolution. The constraints keep their names and accept exactly the same strings,
now spelled as a length and a negated character class. Downgrade restores the patterns.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0017_check_char_classes"
down_revision = "0016_commit_waits_skipped"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
