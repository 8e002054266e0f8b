"""Retention: prune settled dispatches through one rule-checking function, record every run.

The SQL is ../sql/0005_retention.up.sql and .down.sql, run as it is.

Revision ID: 0005_retention
Revises: 0004_executor_protocol
Create Date: 2026-12-01

Facts stay insert-only. The immutability triggers now let a DELETE through only when two
things hold at once: the transaction-local flag `resolver.prune_active` is `on`, and the
current user owns the table. A runtime, executor or retention session can set the flag
(any role may set a custom parameter), but its current user is itself, not the owner. The
only way to run as the owner is a SECURITY DEFINER function owned by it, and the only such
function that deletes is `resolver_prune_batch`, which checks the retention rules, sets the
flag around its own deletes and clears it before it returns (an error discards it with the
transaction).
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0005_retention"
down_revision = "0004_executor_protocol"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
