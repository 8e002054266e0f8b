"""Two people where it matters: rules, proposals, and the two-person manual commit.

The SQL is ../sql/0013_two_person.up.sql and .down.sql, run as it is.

Revision ID: 0013_two_person
Revises: 0012_human_decision
Create Date: 2026-12-02

`recovery_two_person_rules` names the action types (exact, a `prefix*` or `*`) and
decisions that need a second person. resolver_commit_manual records the first decision on
such a case as a proposal (`recovery_proposals`, fenced on the execution version, with a
TTL); a different user's same decision confirms it and settles with both authorization
facts (now unique per mutation and user). A new execution version voids an open proposal
(trigger); a deferred trigger refuses a manual resolution the rules require two people for
with fewer than two. resolver_proposal_close withdraws or rejects one. Downgrade restores
the 0012 commit and drops the rest.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0013_two_person"
down_revision = "0012_human_decision"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
