"""Executor protocol in the database: fenced SQL functions and state-machine triggers.

Every executor transition is a `resolver_…` function (SECURITY DEFINER, pinned search_path)
that fences inside the database on the database clock and refuses with a SQLSTATE of class
`RS` (docs/executor-protocol.md). Triggers reject any write outside the state machine, even
from the table owner. Existing rows are untouched; downgrade drops everything added here.

The SQL is ../sql/0004_executor_protocol.up.sql and .down.sql, run as it is.

Revision ID: 0004_executor_protocol
Revises: 0003_manual_policy
Create Date: 2026-12-01
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0004_executor_protocol"
down_revision = "0003_manual_policy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
