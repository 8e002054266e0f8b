"""Performance: an index of open late-evidence watches by decision time, for the expire.

The SQL is ../sql/0018_late_expire_index.up.sql and .down.sql, run as it is.

Revision ID: 0018_late_expire_index
Revises: 0017_check_char_classes
Create Date: 2026-12-02

late_watch_expire filtered open watches on decided_at_ms, which no index held: each watcher
cycle read the whole table (every watch ever opened, until retention). The partial index of
open watches by decided_at_ms bounds it to the watches it closes. Downgrade drops it.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0018_late_expire_index"
down_revision = "0017_check_char_classes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
