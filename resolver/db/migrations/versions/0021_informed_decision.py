"""The informed decision: what was approved, and why the evidence says what it says.

The SQL is ../sql/0021_informed_decision.up.sql and .down.sql, run as it is.

Revision ID: 0021_informed_decision
Revises: 0020_face_roles
Create Date: 2026-12-03

A dispatch may carry a bounded, low-sensitivity summary of the approved action for people
(a new optional last argument of resolver_dispatch_create; executors that do not pass it keep
working), shape-checked in the database. A control keeps the provider's reason code of its
last inspection and a bounded count of each. A closed case keeps when it reached the manual
queue (manual_at_ms is no longer cleared). Downgrade drops the columns (their content is lost)
and clears manual_at_ms on close again.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0021_informed_decision"
down_revision = "0020_face_roles"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
