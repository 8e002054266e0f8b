"""Each face its own role: writes of decision facts through checking SECURITY DEFINER functions.

The SQL is ../sql/0020_face_roles.up.sql and .down.sql, run as it is.

Revision ID: 0020_face_roles
Revises: 0019_domain_sets
Create Date: 2026-12-03

The replicas and the API logged in as one role that could INSERT resolutions, authorization
facts and audit links and move the chain's head, so a compromised pod could commit a
two-person decision with an invented second person. Now the automatic commit, the manual
commit, the proposal close and the late-evidence record run as the owner (SECURITY DEFINER,
search_path pinned) and a trigger on each fact table refuses a write that none of them made,
the owner's own statements included. Authorization facts and proposals gain the API's Ed25519
signature with the verified token's issuer and key id; a manual resolution commits only with
signed facts of enough different, currently bound, strongly authenticated people. The delete
guards look for resolver_prune_batch on the call stack instead of a session flag, and each
prune run records the range of audit links it removed. The upgrade revokes the writes the
previous grants.sql gave resolver_runtime; grants.sql grants the new resolver_api role its
functions. Downgrade restores the previous definitions; run the previous release's grants.sql.
"""

from __future__ import annotations

from resolver.db.schema_files import apply_migration

revision = "0020_face_roles"
down_revision = "0019_domain_sets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    apply_migration(revision, "up")


def downgrade() -> None:
    apply_migration(revision, "down")
