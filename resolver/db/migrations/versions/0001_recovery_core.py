"""Recovery core: dispatches, executions, recovery controls, resolutions, authorizations.

Revision ID: 0001_recovery_core
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001_recovery_core"
down_revision = None
branch_labels = None
depends_on = None

NOW_MS = sa.text("(extract(epoch from clock_timestamp()) * 1000)::bigint")
HEX64 = "~ '^[0-9a-f]{64}$'"
CODE = "~ '^[a-z0-9_.-]{1,64}$'"
FINDINGS = (
    "'verified_succeeded','verified_failed','still_running','missing',"
    "'conflict','unsupported','unavailable'"
)
IMMUTABLE = (
    "approved_action_dispatches",
    "approved_action_recovery_resolutions",
    "recovery_authorizations",
)


def upgrade() -> None:
    op.create_table(
        "approved_action_dispatches",
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("approval_request_id", sa.Text(), nullable=False),
        sa.Column("project_id", sa.Text(), nullable=False),
        sa.Column("action_type", sa.Text(), nullable=False),
        sa.Column("action_digest", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("schema_version", sa.SmallInteger(), nullable=False),
        sa.Column("supersedes_dispatch_id", sa.Text(), nullable=True),
        sa.Column("created_at_ms", sa.BigInteger(), server_default=NOW_MS, nullable=False),
        sa.CheckConstraint(f"action_digest {HEX64}", name="action_digest_hex"),
        sa.CheckConstraint("schema_version >= 1", name="schema_version_positive"),
        sa.CheckConstraint(
            "length(dispatch_id) <= 128 AND length(approval_request_id) <= 128"
            " AND length(project_id) <= 128 AND length(idempotency_key) <= 128"
            " AND length(action_type) <= 64",
            name="bounded_ids",
        ),
        sa.CheckConstraint("supersedes_dispatch_id <> dispatch_id", name="no_self_supersede"),
        sa.ForeignKeyConstraint(
            ["supersedes_dispatch_id"],
            ["approved_action_dispatches.dispatch_id"],
            name="fk_approved_action_dispatches_supersedes_dispatch_id",
        ),
        sa.PrimaryKeyConstraint("dispatch_id", name="pk_approved_action_dispatches"),
        sa.UniqueConstraint(
            "idempotency_key", name="uq_approved_action_dispatches_idempotency_key"
        ),
    )
    op.create_table(
        "approved_action_executions",
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("token", postgresql.UUID(as_uuid=False), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("lease_expires_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("started_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("finished_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("result_code", sa.Text(), nullable=True),
        sa.Column("completion_mutation_id", sa.Text(), nullable=True),
        sa.Column("evidence_digest", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "state IN ('leased','executing','succeeded','failed','blocked')", name="state_known"
        ),
        sa.CheckConstraint("version >= 1 AND attempt >= 1", name="counters_positive"),
        sa.CheckConstraint(
            "state = 'leased' OR started_at_ms IS NOT NULL", name="started_after_barrier"
        ),
        sa.CheckConstraint(
            "(state IN ('succeeded','failed','blocked')) = (finished_at_ms IS NOT NULL)",
            name="finished_iff_terminal",
        ),
        sa.CheckConstraint(f"result_code IS NULL OR result_code {CODE}", name="result_code_shape"),
        sa.CheckConstraint(
            f"evidence_digest IS NULL OR evidence_digest {HEX64}", name="evidence_digest_hex"
        ),
        sa.ForeignKeyConstraint(
            ["dispatch_id"],
            ["approved_action_dispatches.dispatch_id"],
            name="fk_approved_action_executions_dispatch_id",
        ),
        sa.PrimaryKeyConstraint("dispatch_id", name="pk_approved_action_executions"),
    )
    op.create_table(
        "approved_action_recovery_controls",
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("execution_version", sa.BigInteger(), nullable=False),
        sa.Column("next_scan_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("recovery_owner", sa.Text(), nullable=True),
        sa.Column("recovery_token", postgresql.UUID(as_uuid=False), nullable=True),
        sa.Column("recovery_version", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("recovery_lease_expires_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("last_finding", sa.Text(), nullable=True),
        sa.Column("finding_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("armed_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("manual_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("closed_by", sa.Text(), nullable=True),
        sa.Column("closed_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("completion_mutation_id", sa.Text(), nullable=True),
        sa.CheckConstraint("status IN ('armed','manual','resolved')", name="status_known"),
        sa.CheckConstraint(
            f"last_finding IS NULL OR last_finding IN ({FINDINGS})", name="finding_known"
        ),
        sa.CheckConstraint(
            "closed_by IS NULL OR closed_by IN ('completion','automatic','manual')",
            name="closed_by_known",
        ),
        sa.CheckConstraint(
            "(status = 'resolved') = (closed_by IS NOT NULL AND closed_at_ms IS NOT NULL)",
            name="closed_iff_resolved",
        ),
        sa.CheckConstraint(
            "(recovery_token IS NULL) = (recovery_lease_expires_at_ms IS NULL)"
            " AND (recovery_token IS NULL) = (recovery_owner IS NULL)",
            name="recovery_lease_whole",
        ),
        sa.CheckConstraint(
            "status = 'armed' OR recovery_token IS NULL", name="lease_only_when_armed"
        ),
        sa.ForeignKeyConstraint(
            ["dispatch_id"],
            ["approved_action_executions.dispatch_id"],
            name="fk_approved_action_recovery_controls_dispatch_id",
        ),
        sa.PrimaryKeyConstraint("dispatch_id", name="pk_approved_action_recovery_controls"),
    )
    op.create_index(
        "ix_recovery_controls_due",
        "approved_action_recovery_controls",
        ["next_scan_at_ms", "dispatch_id"],
        postgresql_where=sa.text("status = 'armed'"),
    )
    op.create_index(
        "ix_recovery_controls_manual",
        "approved_action_recovery_controls",
        ["manual_at_ms", "dispatch_id"],
        postgresql_where=sa.text("status = 'manual'"),
    )
    op.create_table(
        "approved_action_recovery_resolutions",
        sa.Column("resolution_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("dispatch_id", sa.Text(), nullable=False),
        sa.Column("mutation_id", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("finding", sa.Text(), nullable=True),
        sa.Column("evidence_digest", sa.Text(), nullable=True),
        sa.Column("result_code", sa.Text(), nullable=True),
        sa.Column("expected_execution_version", sa.BigInteger(), nullable=False),
        sa.Column("actor_user_id", sa.Text(), nullable=True),
        sa.Column("reason_code", sa.Text(), nullable=True),
        sa.Column("resolved_at_ms", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("source IN ('automatic','manual')", name="source_known"),
        sa.CheckConstraint("outcome IN ('succeeded','failed','blocked')", name="outcome_known"),
        sa.CheckConstraint(
            f"evidence_digest IS NULL OR evidence_digest {HEX64}", name="evidence_digest_hex"
        ),
        sa.CheckConstraint(f"result_code IS NULL OR result_code {CODE}", name="result_code_shape"),
        sa.CheckConstraint(f"reason_code IS NULL OR reason_code {CODE}", name="reason_code_shape"),
        sa.CheckConstraint(
            "source <> 'automatic' OR (finding IN ('verified_succeeded','verified_failed')"
            " AND evidence_digest IS NOT NULL AND result_code IS NOT NULL"
            " AND actor_user_id IS NULL AND outcome <> 'blocked')",
            name="automatic_is_verified",
        ),
        sa.CheckConstraint(
            "source <> 'manual' OR (actor_user_id IS NOT NULL AND reason_code IS NOT NULL)",
            name="manual_has_actor",
        ),
        sa.ForeignKeyConstraint(
            ["dispatch_id"],
            ["approved_action_dispatches.dispatch_id"],
            name="fk_approved_action_recovery_resolutions_dispatch_id",
        ),
        sa.PrimaryKeyConstraint("resolution_id", name="pk_approved_action_recovery_resolutions"),
        sa.UniqueConstraint(
            "dispatch_id", name="uq_approved_action_recovery_resolutions_dispatch_id"
        ),
        sa.UniqueConstraint(
            "mutation_id", name="uq_approved_action_recovery_resolutions_mutation_id"
        ),
    )
    op.create_table(
        "recovery_authorizations",
        sa.Column("authorization_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("mutation_id", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("permission", sa.Text(), nullable=False),
        sa.Column("project_id", sa.Text(), nullable=False),
        sa.Column("project_version", sa.BigInteger(), nullable=False),
        sa.Column("role_binding_version", sa.BigInteger(), nullable=False),
        sa.Column("auth_time_ms", sa.BigInteger(), nullable=False),
        sa.Column("amr", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("authorized_at_ms", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("permission = 'approval.recover'", name="permission_known"),
        sa.ForeignKeyConstraint(
            ["mutation_id"],
            ["approved_action_recovery_resolutions.mutation_id"],
            name="fk_recovery_authorizations_mutation_id",
        ),
        sa.PrimaryKeyConstraint("authorization_id", name="pk_recovery_authorizations"),
        sa.UniqueConstraint("mutation_id", name="uq_recovery_authorizations_mutation_id"),
    )
    # The one clock every lease and due-time comparison uses. The override exists for tests
    # only; production passes NULL and gets the database's clock, never a replica's.
    op.execute(
        """
        CREATE FUNCTION resolver_now_ms(override_ms bigint) RETURNS bigint
        LANGUAGE sql VOLATILE PARALLEL SAFE AS
        $$ SELECT COALESCE(override_ms, (extract(epoch from clock_timestamp()) * 1000)::bigint) $$
        """
    )
    # Facts are insert-only: the database itself refuses to rewrite history.
    op.execute(
        """
        CREATE FUNCTION resolver_reject_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION '% is insert-only: % rejected', TG_TABLE_NAME, TG_OP
                USING ERRCODE = 'restrict_violation';
        END
        $$
        """
    )
    for table in IMMUTABLE:
        op.execute(
            f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation()"
        )


def downgrade() -> None:
    for table in reversed(IMMUTABLE):
        op.execute(f"DROP TRIGGER IF EXISTS {table}_immutable ON {table}")
    op.execute("DROP FUNCTION IF EXISTS resolver_reject_mutation()")
    op.execute("DROP FUNCTION IF EXISTS resolver_now_ms(bigint)")
    op.drop_table("recovery_authorizations")
    op.drop_table("approved_action_recovery_resolutions")
    op.drop_index("ix_recovery_controls_manual", table_name="approved_action_recovery_controls")
    op.drop_index("ix_recovery_controls_due", table_name="approved_action_recovery_controls")
    op.drop_table("approved_action_recovery_controls")
    op.drop_table("approved_action_executions")
    op.drop_table("approved_action_dispatches")
