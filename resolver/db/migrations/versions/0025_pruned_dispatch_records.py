"""Retention: a compact record of each pruned dispatch, for find.

The SQL is ../sql/0025_pruned_dispatch_records.up.sql and .down.sql, run as it is.

Revision ID: 0025_pruned_dispatch_records
Revises: 0024_decisions_index_dispatch_id
Create Date: 2026-12-03

A pruned dispatch left nothing the console could find: /v1/find answered nothing for its ids.
recovery_pruned_dispatches keeps, per dispatch a prune took, its dispatch id, approval id,
the sha256 of its idempotency key, project, action type, state and closure, and the run (with
its export digest) that pruned it, written by resolver_prune_batch in the same transaction;
the records live one retention period. Downgrade restores the batch without them and drops
the table.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0025_pruned_dispatch_records"
down_revision = "0024_decisions_index_dispatch_id"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
