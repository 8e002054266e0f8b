"""The retention export carries the audit chain: each pruned decision's link and late evidence.

The SQL is ../sql/0015_audit_export.up.sql and .down.sql, run as it is.

Revision ID: 0015_audit_export
Revises: 0014_late_evidence
Create Date: 2026-12-02

resolver_prune_candidates adds `audit_link` (the decision's link of the audit chain) and
`late_evidence` to each exported record; resolver_prune_batch, pruning audit facts, deletes
the links of the decisions it prunes, so `resolver audit verify --export` walks a pruned range
through the exported links. Downgrade restores both functions as they were.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0015_audit_export"
down_revision = "0014_late_evidence"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
