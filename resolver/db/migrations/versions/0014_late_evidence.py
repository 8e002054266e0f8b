"""Late evidence after a human decision: watches, the late-evidence fact, the fenced record.

The SQL is ../sql/0014_late_evidence.up.sql and .down.sql, run as it is.

Revision ID: 0014_late_evidence
Revises: 0013_two_person
Create Date: 2026-12-02

A manual decision that claims an outcome opens a watch (`recovery_late_watches`, by a trigger
on the resolutions insert, so resolver_commit_manual is untouched). Replicas claim open
watches (partial index, SKIP LOCKED), ask the action type's provider read-only, and record a
verified finding as `recovery_late_evidence` (insert-only, agreeing or contradicting the
decision) through resolver_record_late_evidence, fenced on the watch token and the window on
the database clock. Downgrade drops them.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0014_late_evidence"
down_revision = "0013_two_person"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
