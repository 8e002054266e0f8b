"""The console: a waiting case's escalation time, on its control.

The SQL is ../sql/0026_controls_escalate_at.up.sql and .down.sql, run as it is.

Revision ID: 0026_controls_escalate_at
Revises: 0025_pruned_dispatch_records
Create Date: 2026-12-03

The escalation windows live in the replicas' provider configuration, which the API does not
load: the automatic commit now records on the control when an armed case escalates if its
evidence stays as it is (escalates_at_ms), so the case and the waiting list show it. Cases
inspected before the upgrade get it at their next look. Downgrade restores the commit without
it and drops the column.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0026_controls_escalate_at"
down_revision = "0025_pruned_dispatch_records"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
