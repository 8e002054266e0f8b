"""Provider evidence: internal receipts, run origin facts, package install facts.

Revision ID: 0002_provider_evidence
Revises: 0001_recovery_core
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002_provider_evidence"
down_revision = "0001_recovery_core"
branch_labels = None
depends_on = None

NOW_MS = sa.text("(extract(epoch from clock_timestamp()) * 1000)::bigint")
HEX64 = "~ '^[0-9a-f]{64}$'"
CODE = "~ '^[a-z0-9_.-]{1,64}$'"
VERSION = "~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$'"
INSERT_ONLY = (
    "action_receipts",
    "package_install_records",
    "package_install_targets",
    "package_commit_markers",
)


def _dispatch_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["dispatch_id"], ["approved_action_dispatches.dispatch_id"], name=f"fk_{table}_dispatch_id"
    )


def upgrade() -> None:
    op.create_table(
        "action_receipts",
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("receipt", postgresql.JSONB(), nullable=False),
        sa.Column("written_at_ms", sa.BigInteger(), server_default=NOW_MS, nullable=False),
        sa.CheckConstraint("jsonb_typeof(receipt) = 'object'", name="receipt_is_object"),
        sa.CheckConstraint("octet_length(receipt::text) <= 16384", name="receipt_bounded"),
        _dispatch_fk("action_receipts"),
        sa.PrimaryKeyConstraint("dispatch_id", name="pk_action_receipts"),
    )
    op.create_table(
        "run_origin_facts",
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("project_id", sa.Text(), nullable=False),
        sa.Column("action_digest", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("result_code", sa.Text(), nullable=True),
        sa.Column("created_at_ms", sa.BigInteger(), server_default=NOW_MS, nullable=False),
        sa.Column("finished_at_ms", sa.BigInteger(), nullable=True),
        sa.CheckConstraint("length(run_id) <= 128", name="run_id_bounded"),
        sa.CheckConstraint(f"action_digest {HEX64}", name="action_digest_hex"),
        sa.CheckConstraint("attempt >= 1", name="attempt_positive"),
        sa.CheckConstraint("state IN ('running','succeeded','failed')", name="state_known"),
        sa.CheckConstraint(
            "(state = 'running') = (result_code IS NULL)"
            " AND (state = 'running') = (finished_at_ms IS NULL)",
            name="settled_iff_finished",
        ),
        sa.CheckConstraint(f"result_code IS NULL OR result_code {CODE}", name="result_code_shape"),
        _dispatch_fk("run_origin_facts"),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_origin_facts"),
        sa.UniqueConstraint("dispatch_id", name="uq_run_origin_facts_dispatch_id"),
        sa.UniqueConstraint("idempotency_key", name="uq_run_origin_facts_idempotency_key"),
    )
    op.create_table(
        "package_install_records",
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("action_digest", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("target_version", sa.Text(), nullable=False),
        sa.Column("content_digest", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("result_code", sa.Text(), nullable=False),
        sa.Column("recorded_at_ms", sa.BigInteger(), server_default=NOW_MS, nullable=False),
        sa.CheckConstraint(f"action_digest {HEX64}", name="action_digest_hex"),
        sa.CheckConstraint(f"content_digest {HEX64}", name="content_digest_hex"),
        sa.CheckConstraint(f"target_version {VERSION}", name="target_version_shape"),
        sa.CheckConstraint("attempt >= 1", name="attempt_positive"),
        sa.CheckConstraint("outcome IN ('succeeded','failed')", name="outcome_known"),
        sa.CheckConstraint(f"result_code {CODE}", name="result_code_shape"),
        _dispatch_fk("package_install_records"),
        sa.PrimaryKeyConstraint("dispatch_id", name="pk_package_install_records"),
        sa.UniqueConstraint("idempotency_key", name="uq_package_install_records_idempotency_key"),
    )
    op.create_table(
        "package_install_targets",
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("installed_version", sa.Text(), nullable=False),
        sa.Column("content_digest", sa.Text(), nullable=False),
        sa.Column("observed_at_ms", sa.BigInteger(), server_default=NOW_MS, nullable=False),
        sa.CheckConstraint(f"content_digest {HEX64}", name="content_digest_hex"),
        sa.CheckConstraint(f"installed_version {VERSION}", name="installed_version_shape"),
        _dispatch_fk("package_install_targets"),
        sa.PrimaryKeyConstraint("dispatch_id", name="pk_package_install_targets"),
    )
    op.create_table(
        "package_commit_markers",
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("content_digest", sa.Text(), nullable=False),
        sa.Column("committed_at_ms", sa.BigInteger(), server_default=NOW_MS, nullable=False),
        sa.CheckConstraint(f"content_digest {HEX64}", name="content_digest_hex"),
        _dispatch_fk("package_commit_markers"),
        sa.PrimaryKeyConstraint("dispatch_id", name="pk_package_commit_markers"),
    )
    # Evidence is history: resolver_reject_mutation() (0001) refuses UPDATE and DELETE.
    for table in INSERT_ONLY:
        op.execute(
            f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation()"
        )
    # A run's origin never changes and its state settles once: running -> succeeded/failed.
    op.execute(
        """
        CREATE FUNCTION resolver_guard_run_origin() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE'
               OR (NEW.run_id, NEW.dispatch_id, NEW.idempotency_key, NEW.project_id,
                   NEW.action_digest, NEW.attempt, NEW.created_at_ms)
                  IS DISTINCT FROM
                  (OLD.run_id, OLD.dispatch_id, OLD.idempotency_key, OLD.project_id,
                   OLD.action_digest, OLD.attempt, OLD.created_at_ms)
               OR OLD.state <> 'running' THEN
                RAISE EXCEPTION 'run_origin_facts: origin is immutable and state settles once'
                    USING ERRCODE = 'restrict_violation';
            END IF;
            RETURN NEW;
        END
        $$
        """
    )
    op.execute(
        "CREATE TRIGGER run_origin_facts_guard BEFORE UPDATE OR DELETE ON run_origin_facts"
        " FOR EACH ROW EXECUTE FUNCTION resolver_guard_run_origin()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS run_origin_facts_guard ON run_origin_facts")
    op.execute("DROP FUNCTION IF EXISTS resolver_guard_run_origin()")
    for table in reversed(INSERT_ONLY):
        op.execute(f"DROP TRIGGER IF EXISTS {table}_immutable ON {table}")
    op.drop_table("package_commit_markers")
    op.drop_table("package_install_targets")
    op.drop_table("package_install_records")
    op.drop_table("run_origin_facts")
    op.drop_table("action_receipts")
