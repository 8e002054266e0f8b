"""The human decision: bounded finding statistics, escalation in the page commit, the audit chain.

The SQL is ../sql/0012_human_decision.up.sql and .down.sql, run as it is.

Revision ID: 0012_human_decision
Revises: 0011_commit_skip_locked
Create Date: 2026-12-01

Controls gain bounded finding statistics (counts per kind, first and last inspection, last
failure class and evidence digest, why manual), written by the automatic commit, which now
also escalates a finding that would re-arm once its window elapsed (`manual_reason =
'evidence_window_elapsed'`). Manual decisions form a hash chain (`recovery_audit_chain`,
serialised by the one-row `recovery_audit_head`), appended by resolver_commit_manual.
Indexes serve the API's waiting list, approval lookup and decisions list. Downgrade restores
the 0007 commits and drops the rest.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0012_human_decision"
down_revision = "0011_commit_skip_locked"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
