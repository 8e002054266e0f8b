"""Adoption fixes in the executor protocol: receipts fenced on the live lease, exact refusals.

The SQL is ../sql/0009_protocol_fences.up.sql and .down.sql, run as it is.

Revision ID: 0009_protocol_fences
Revises: 0008_hot_fillfactor
Create Date: 2026-12-01

What an outside adopter found: a lease on a settled dispatch answered 23001 instead of RS003;
a stale version was reported as a takeover; renew counted an armed control as re-armed; a
receipt could commit after its execution lease expired (beside a human's decision on the same
version); a receipt integer sent as a string was refused without saying so. Replaced functions
keep their owner and grants; one deferred trigger is added on action_receipts. Nothing stored
changes; downgrade restores the previous definitions.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0009_protocol_fences"
down_revision = "0008_hot_fillfactor"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
