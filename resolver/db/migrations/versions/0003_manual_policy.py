"""Manual resolution: the access-policy mirror (projects, role bindings) decisions fence on.

Revision ID: 0003_manual_policy
Revises: 0002_provider_evidence
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_manual_policy"
down_revision = "0002_provider_evidence"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recovery_projects",
        sa.Column("project_id", sa.Text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("version >= 1", name="version_positive"),
        sa.PrimaryKeyConstraint("project_id", name="pk_recovery_projects"),
    )
    op.create_table(
        "recovery_role_bindings",
        sa.Column("project_id", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("permission", sa.Text(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("version >= 1", name="version_positive"),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["recovery_projects.project_id"],
            name="fk_recovery_role_bindings_project_id",
        ),
        sa.PrimaryKeyConstraint(
            "project_id", "user_id", "permission", name="pk_recovery_role_bindings"
        ),
    )


def downgrade() -> None:
    op.drop_table("recovery_role_bindings")
    op.drop_table("recovery_projects")
