"""Provider evidence: internal receipts, run origin facts, package install facts.

The SQL is ../sql/0002_provider_evidence.up.sql and .down.sql, run as it is.

Revision ID: 0002_provider_evidence
Revises: 0001_recovery_core
Create Date: 2026-11-30
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0002_provider_evidence"
down_revision = "0001_recovery_core"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
