"""Manual resolution: the access-policy mirror (projects, role bindings) decisions fence on.

The SQL is ../sql/0003_manual_policy.up.sql and .down.sql, run as it is.

Revision ID: 0003_manual_policy
Revises: 0002_provider_evidence
Create Date: 2026-11-30
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0003_manual_policy"
down_revision = "0002_provider_evidence"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
