"""The pods decide on the database clock.

The SQL is ../sql/0022_pods_use_database_clock.up.sql and .down.sql, run as it is.

Revision ID: 0022_pods_use_database_clock
Revises: 0021_informed_decision
Create Date: 2026-12-03

The commit functions the replicas and the API may call (the automatic commit, the manual
commit, the proposal close, the late-evidence record) refuse a non-NULL clock override
`p_now_ms` (RS005) unless the session user is a member of the schema owner, the executor
protocol's rule. No signature changes. Downgrade accepts the override from any caller again.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0022_pods_use_database_clock"
down_revision = "0021_informed_decision"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
