"""Each domain set spelled once: the terminal states, the finding kinds, what verified evidence
and what each human decision settles, read by every check, trigger condition and function.

The SQL is ../sql/0019_domain_sets.up.sql and .down.sql, run as it is.

Revision ID: 0019_domain_sets
Revises: 0018_late_expire_index
Create Date: 2026-12-03

Four IMMUTABLE functions (resolver_terminal_states, resolver_finding_kinds,
resolver_finding_outcome, resolver_decision_settles) replace the lists spelled inline. The
planner folds a call with constant arguments to its value, so a check or a trigger condition
costs what the list cost. Eight CHECK constraints are replaced (each checks its table's rows
once, under an ACCESS EXCLUSIVE lock); two triggers are recreated; nine functions are
replaced (owners, grants, SECURITY DEFINER and pinned search_path kept). Nothing stored
changes; downgrade restores the inline lists and drops the four functions.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0019_domain_sets"
down_revision = "0018_late_expire_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
