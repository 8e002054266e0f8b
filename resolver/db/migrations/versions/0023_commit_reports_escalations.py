"""The automatic commit says why a control went to a person.

The SQL is ../sql/0023_commit_reports_escalations.up.sql and .down.sql, run as it is.

Revision ID: 0023_commit_reports_escalations
Revises: 0022_pods_use_database_clock
Create Date: 2026-12-03

`resolver_commit_automatic` answers `manual_reason` beside each dispatch's status (why its
control went to the manual queue: the finding, or `evidence_window_elapsed` for an
escalation), so replicas report escalations from the database's answer. Downgrade drops the
column from the answer again.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0023_commit_reports_escalations"
down_revision = "0022_pods_use_database_clock"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
