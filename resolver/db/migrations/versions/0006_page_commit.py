"""The fenced page commit as one function: one statement, one round trip, one transaction.

The SQL is ../sql/0006_page_commit.up.sql and .down.sql, run as it is.

Revision ID: 0006_page_commit
Revises: 0005_retention
Create Date: 2026-12-01

Until now a replica committed a page as BEGIN, two lock statements and the fenced write
(pipelined), then COMMIT: three round trips and five statements, and the page's nine
columns adapted by the driver as nine arrays. `resolver_commit_page` runs the same three
steps in the same lock order inside the database, on one JSON parameter (one C encode in the
replica, one parse in the server), planned once per session. Called alone on an autocommit
connection it is its own transaction, committed durably (only the claim commits
asynchronously).

SECURITY INVOKER: it runs with the caller's own privileges, so the runtime role needs
nothing it did not have (EXECUTE aside, granted in resolver/db/grants.sql). Nothing stored
changes; downgrade drops the function.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0006_page_commit"
down_revision = "0005_retention"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
