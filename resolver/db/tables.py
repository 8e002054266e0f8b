"""The declared schema (SQLAlchemy Core); Alembic migrations must produce exactly this."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID

NOW_MS = text("(extract(epoch from clock_timestamp()) * 1000)::bigint")

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    }
)

_HEX64 = "~ '^[0-9a-f]{64}$'"
_CODE = "~ '^[a-z0-9_.-]{1,64}$'"


# The core tables' checks, evaluated on every resolution, accept the same strings as the two
# patterns above without a bounded repetition, which PostgreSQL's regex engine makes costly
# (migration 0017_check_cost).
def _hex64(column: str) -> str:
    return f"(length({column}) = 64 AND {column} !~ '[^0-9a-f]')"


def _code(column: str) -> str:
    return f"(length({column}) BETWEEN 1 AND 64 AND {column} !~ '[^a-z0-9_.-]')"


_FINDINGS = (
    "'verified_succeeded','verified_failed','still_running','missing',"
    "'conflict','unsupported','unavailable'"
)

dispatches = Table(
    "approved_action_dispatches",
    metadata,
    Column("dispatch_id", Text, primary_key=True),
    Column("approval_request_id", Text, nullable=False),
    Column("project_id", Text, nullable=False),
    Column("action_type", Text, nullable=False),
    Column("action_digest", Text, nullable=False),
    Column("idempotency_key", Text, nullable=False),
    Column("schema_version", SmallInteger, nullable=False),
    Column(
        "supersedes_dispatch_id",
        Text,
        ForeignKey("approved_action_dispatches.dispatch_id"),
        nullable=True,
    ),
    Column("created_at_ms", BigInteger, nullable=False, server_default=NOW_MS),
    # What was approved, for people (migration 0020): the executor's optional, bounded,
    # low-sensitivity summary; shape-checked by resolver_action_summary_problem, read by no rule.
    Column("action_summary", JSONB, nullable=True),
    CheckConstraint(_hex64("action_digest"), name="action_digest_hex"),
    CheckConstraint("schema_version >= 1", name="schema_version_positive"),
    CheckConstraint(
        "length(dispatch_id) <= 128 AND length(approval_request_id) <= 128"
        " AND length(project_id) <= 128 AND length(idempotency_key) <= 128"
        " AND length(action_type) <= 64",
        name="bounded_ids",
    ),
    CheckConstraint("supersedes_dispatch_id <> dispatch_id", name="no_self_supersede"),
    UniqueConstraint("idempotency_key"),
    CheckConstraint(
        "resolver_action_summary_problem(action_summary) IS NULL", name="action_summary_shape"
    ),
)

executions = Table(
    "approved_action_executions",
    metadata,
    Column(
        "dispatch_id",
        Text,
        ForeignKey("approved_action_dispatches.dispatch_id"),
        primary_key=True,
    ),
    Column("state", Text, nullable=False),
    Column("owner", Text, nullable=False),
    Column("token", UUID(as_uuid=False), nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("lease_expires_at_ms", BigInteger, nullable=False),
    Column("started_at_ms", BigInteger, nullable=True),
    Column("finished_at_ms", BigInteger, nullable=True),
    Column("result_code", Text, nullable=True),
    Column("completion_mutation_id", Text, nullable=True),
    # Beyond the original design's columns: the evidence digest the terminal state rests on,
    # so a late completion can be compared with a resolution (exact replay vs drift).
    Column("evidence_digest", Text, nullable=True),
    CheckConstraint(
        "state IN ('leased','executing','succeeded','failed','blocked')", name="state_known"
    ),
    CheckConstraint("version >= 1 AND attempt >= 1", name="counters_positive"),
    CheckConstraint("state = 'leased' OR started_at_ms IS NOT NULL", name="started_after_barrier"),
    CheckConstraint(
        "(state IN ('succeeded','failed','blocked')) = (finished_at_ms IS NOT NULL)",
        name="finished_iff_terminal",
    ),
    CheckConstraint(f"result_code IS NULL OR {_code('result_code')}", name="result_code_shape"),
    CheckConstraint(
        f"evidence_digest IS NULL OR {_hex64('evidence_digest')}", name="evidence_digest_hex"
    ),
)

recovery_controls = Table(
    "approved_action_recovery_controls",
    metadata,
    Column(
        "dispatch_id",
        Text,
        ForeignKey("approved_action_executions.dispatch_id"),
        primary_key=True,
    ),
    Column("status", Text, nullable=False),
    Column("execution_version", BigInteger, nullable=False),
    Column("next_scan_at_ms", BigInteger, nullable=False),
    Column("recovery_owner", Text, nullable=True),
    Column("recovery_token", UUID(as_uuid=False), nullable=True),
    Column("recovery_version", BigInteger, nullable=False, server_default=text("0")),
    Column("recovery_lease_expires_at_ms", BigInteger, nullable=True),
    Column("last_finding", Text, nullable=True),
    Column("finding_count", Integer, nullable=False, server_default=text("0")),
    Column("armed_at_ms", BigInteger, nullable=False),
    # Added: when the control entered the manual queue (oldest-manual-age metric).
    Column("manual_at_ms", BigInteger, nullable=True),
    Column("closed_by", Text, nullable=True),
    Column("closed_at_ms", BigInteger, nullable=True),
    # Added: binds a completion-closed control to the execution's completion mutation id.
    Column("completion_mutation_id", Text, nullable=True),
    # Bounded finding statistics (migration 0008), written by the page commit: counts per
    # finding kind, first and last inspection, the last provider failure class and evidence
    # digest, and why the control is manual. A few columns per dispatch, never a row per
    # inspection.
    Column("finding_counts", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("first_inspected_at_ms", BigInteger, nullable=True),
    Column("last_inspected_at_ms", BigInteger, nullable=True),
    Column("last_failure_class", Text, nullable=True),
    Column("last_evidence_digest", Text, nullable=True),
    Column("manual_reason", Text, nullable=True),
    # Why the evidence says what it says (migration 0020): the last inspection's bounded
    # reason code and the count of each (at most 16 codes by name, the rest as `other`).
    Column("last_reason", Text, nullable=True),
    Column("reason_counts", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    CheckConstraint("status IN ('armed','manual','resolved')", name="status_known"),
    CheckConstraint(f"last_finding IS NULL OR last_finding IN ({_FINDINGS})", name="finding_known"),
    CheckConstraint(
        "closed_by IS NULL OR closed_by IN ('completion','automatic','manual')",
        name="closed_by_known",
    ),
    CheckConstraint(
        "(status = 'resolved') = (closed_by IS NOT NULL AND closed_at_ms IS NOT NULL)",
        name="closed_iff_resolved",
    ),
    CheckConstraint(
        "(recovery_token IS NULL) = (recovery_lease_expires_at_ms IS NULL)"
        " AND (recovery_token IS NULL) = (recovery_owner IS NULL)",
        name="recovery_lease_whole",
    ),
    CheckConstraint("status = 'armed' OR recovery_token IS NULL", name="lease_only_when_armed"),
    CheckConstraint("jsonb_typeof(finding_counts) = 'object'", name="finding_counts_object"),
    CheckConstraint(
        "last_failure_class IS NULL"
        " OR last_failure_class IN ('outage','timeout','configuration','error')",
        name="failure_class_known",
    ),
    CheckConstraint(
        f"last_evidence_digest IS NULL OR {_hex64('last_evidence_digest')}",
        name="last_evidence_digest_hex",
    ),
    CheckConstraint(
        f"manual_reason IS NULL OR {_code('manual_reason')}", name="manual_reason_shape"
    ),
    CheckConstraint(
        "last_reason IS NULL OR (length(last_reason) BETWEEN 1 AND 32"
        " AND last_reason !~ '[^a-z0-9_]')",
        name="last_reason_shape",
    ),
    CheckConstraint("jsonb_typeof(reason_counts) = 'object'", name="reason_counts_object"),
)

Index(
    "ix_recovery_controls_due",
    recovery_controls.c.next_scan_at_ms,
    recovery_controls.c.dispatch_id,
    postgresql_where=text("status = 'armed'"),
)
Index(
    "ix_recovery_controls_manual",
    recovery_controls.c.manual_at_ms,
    recovery_controls.c.dispatch_id,
    postgresql_where=text("status = 'manual'"),
)

# Retention (migration 0005): the prune reads settled controls oldest first.
Index(
    "ix_recovery_controls_settled",
    recovery_controls.c.closed_at_ms,
    recovery_controls.c.dispatch_id,
    postgresql_where=text("status = 'resolved'"),
)
# The waiting list of the API (migration 0008): armed controls inspected at least once.
Index(
    "ix_recovery_controls_waiting",
    recovery_controls.c.first_inspected_at_ms,
    recovery_controls.c.dispatch_id,
    postgresql_where=text("status = 'armed' AND first_inspected_at_ms IS NOT NULL"),
)
# Looking a case up by the approval it executes.
Index("ix_approved_action_dispatches_approval_request_id", dispatches.c.approval_request_id)
# Deleting an identity makes its foreign key look for dispatches superseding it.
Index(
    "ix_approved_action_dispatches_supersedes_dispatch_id",
    dispatches.c.supersedes_dispatch_id,
    postgresql_where=text("supersedes_dispatch_id IS NOT NULL"),
)

resolutions = Table(
    "approved_action_recovery_resolutions",
    metadata,
    Column("resolution_id", BigInteger, Identity(), primary_key=True),
    Column(
        "dispatch_id",
        Text,
        ForeignKey("approved_action_dispatches.dispatch_id"),
        nullable=False,
    ),
    Column("mutation_id", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("finding", Text, nullable=True),
    Column("evidence_digest", Text, nullable=True),
    Column("result_code", Text, nullable=True),
    Column("expected_execution_version", BigInteger, nullable=False),
    Column("actor_user_id", Text, nullable=True),
    Column("reason_code", Text, nullable=True),
    Column("resolved_at_ms", BigInteger, nullable=False),
    UniqueConstraint("dispatch_id"),
    UniqueConstraint("mutation_id"),
    CheckConstraint("source IN ('automatic','manual')", name="source_known"),
    CheckConstraint("outcome IN ('succeeded','failed','blocked')", name="outcome_known"),
    CheckConstraint(
        f"evidence_digest IS NULL OR {_hex64('evidence_digest')}", name="evidence_digest_hex"
    ),
    CheckConstraint(f"result_code IS NULL OR {_code('result_code')}", name="result_code_shape"),
    CheckConstraint(f"reason_code IS NULL OR {_code('reason_code')}", name="reason_code_shape"),
    # Invariant 1 in the schema: an automatic resolution rests on a verified, digested finding.
    CheckConstraint(
        "source <> 'automatic' OR (finding IN ('verified_succeeded','verified_failed')"
        " AND evidence_digest IS NOT NULL AND result_code IS NOT NULL"
        " AND actor_user_id IS NULL AND outcome <> 'blocked')",
        name="automatic_is_verified",
    ),
    CheckConstraint(
        "source <> 'manual' OR (actor_user_id IS NOT NULL AND reason_code IS NOT NULL)",
        name="manual_has_actor",
    ),
)

# The decisions list of the API, newest first (migration 0008).
Index(
    "ix_recovery_resolutions_manual",
    resolutions.c.resolved_at_ms,
    resolutions.c.resolution_id,
    postgresql_where=text("source = 'manual'"),
)

recovery_authorizations = Table(
    "recovery_authorizations",
    metadata,
    Column("authorization_id", BigInteger, Identity(), primary_key=True),
    Column(
        "mutation_id",
        Text,
        ForeignKey("approved_action_recovery_resolutions.mutation_id"),
        nullable=False,
    ),
    Column("user_id", Text, nullable=False),
    Column("permission", Text, nullable=False),
    Column("project_id", Text, nullable=False),
    Column("project_version", BigInteger, nullable=False),
    Column("role_binding_version", BigInteger, nullable=False),
    Column("auth_time_ms", BigInteger, nullable=False),
    Column("amr", ARRAY(Text), nullable=False),
    Column("authorized_at_ms", BigInteger, nullable=False),
    # One fact per person: a two-person decision (migration 0013) has two.
    UniqueConstraint("mutation_id", "user_id"),
    CheckConstraint("permission = 'approval.recover'", name="permission_known"),
)

# The access-policy mirror the manual path fences on. The platform owns projects and role
# bindings; it keeps these rows in step (or replaces the tables with views of the same shape).
# Every change to a project or binding must bump its version: that is what a decision fences on.
recovery_projects = Table(
    "recovery_projects",
    metadata,
    Column("project_id", Text, primary_key=True),
    Column("version", BigInteger, nullable=False),
    CheckConstraint("version >= 1", name="version_positive"),
)

recovery_role_bindings = Table(
    "recovery_role_bindings",
    metadata,
    Column("project_id", Text, ForeignKey("recovery_projects.project_id"), primary_key=True),
    Column("user_id", Text, primary_key=True),
    Column("permission", Text, primary_key=True),
    Column("version", BigInteger, nullable=False),
    CheckConstraint("version >= 1", name="version_positive"),
)

# -- evidence of the built-in providers (migration 0002) ---------------------------------

_VERSION = "~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$'"


def _dispatch_fk(primary_key: bool = True) -> Column[str]:
    return Column(
        "dispatch_id",
        Text,
        ForeignKey("approved_action_dispatches.dispatch_id"),
        primary_key=primary_key,
        nullable=False,
    )


# internal_mutation: the executor inserts the signed receipt v1 in its mutation's transaction.
action_receipts = Table(
    "action_receipts",
    metadata,
    _dispatch_fk(),
    Column("receipt", JSONB, nullable=False),
    Column("written_at_ms", BigInteger, nullable=False, server_default=NOW_MS),
    CheckConstraint("jsonb_typeof(receipt) = 'object'", name="receipt_is_object"),
    # Storage bound only; the provider enforces the 4 KiB canonical limit itself.
    CheckConstraint("octet_length(receipt::text) <= 16384", name="receipt_bounded"),
)

# run_create: the run repository's origin fact. Origin columns never change; the state moves
# once from running to succeeded/failed (a trigger enforces both).
run_origin_facts = Table(
    "run_origin_facts",
    metadata,
    Column("run_id", Text, primary_key=True),
    _dispatch_fk(primary_key=False),
    Column("idempotency_key", Text, nullable=False),
    Column("project_id", Text, nullable=False),
    Column("action_digest", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("state", Text, nullable=False),
    Column("result_code", Text, nullable=True),
    Column("created_at_ms", BigInteger, nullable=False, server_default=NOW_MS),
    Column("finished_at_ms", BigInteger, nullable=True),
    UniqueConstraint("dispatch_id"),
    UniqueConstraint("idempotency_key"),
    CheckConstraint("length(run_id) <= 128", name="run_id_bounded"),
    CheckConstraint(f"action_digest {_HEX64}", name="action_digest_hex"),
    CheckConstraint("attempt >= 1", name="attempt_positive"),
    CheckConstraint("state IN ('running','succeeded','failed')", name="state_known"),
    CheckConstraint(
        "(state = 'running') = (result_code IS NULL)"
        " AND (state = 'running') = (finished_at_ms IS NULL)",
        name="settled_iff_finished",
    ),
    CheckConstraint(f"result_code IS NULL OR result_code {_CODE}", name="result_code_shape"),
)

# package_install: three facts, all required for success (a directory proves nothing).
package_install_records = Table(
    "package_install_records",
    metadata,
    _dispatch_fk(),
    Column("idempotency_key", Text, nullable=False),
    Column("action_digest", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("target_version", Text, nullable=False),
    Column("content_digest", Text, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("result_code", Text, nullable=False),
    Column("recorded_at_ms", BigInteger, nullable=False, server_default=NOW_MS),
    UniqueConstraint("idempotency_key"),
    CheckConstraint(f"action_digest {_HEX64}", name="action_digest_hex"),
    CheckConstraint(f"content_digest {_HEX64}", name="content_digest_hex"),
    CheckConstraint(f"target_version {_VERSION}", name="target_version_shape"),
    CheckConstraint("attempt >= 1", name="attempt_positive"),
    CheckConstraint("outcome IN ('succeeded','failed')", name="outcome_known"),
    CheckConstraint(f"result_code {_CODE}", name="result_code_shape"),
)

package_install_targets = Table(
    "package_install_targets",
    metadata,
    _dispatch_fk(),
    Column("installed_version", Text, nullable=False),
    Column("content_digest", Text, nullable=False),
    Column("observed_at_ms", BigInteger, nullable=False, server_default=NOW_MS),
    CheckConstraint(f"content_digest {_HEX64}", name="content_digest_hex"),
    CheckConstraint(f"installed_version {_VERSION}", name="installed_version_shape"),
)

package_commit_markers = Table(
    "package_commit_markers",
    metadata,
    _dispatch_fk(),
    Column("content_digest", Text, nullable=False),
    Column("committed_at_ms", BigInteger, nullable=False, server_default=NOW_MS),
    CheckConstraint(f"content_digest {_HEX64}", name="content_digest_hex"),
)

# Retention (migration 0005): one row per `resolver prune` run, written only by the prune
# functions. Counts grow batch by batch in the batch's own transaction, so a killed run
# still says exactly what it removed.
recovery_prune_runs = Table(
    "recovery_prune_runs",
    metadata,
    Column("run_id", BigInteger, Identity(), primary_key=True),
    Column("started_at_ms", BigInteger, nullable=False),
    Column("finished_at_ms", BigInteger, nullable=True),
    Column("last_batch_at_ms", BigInteger, nullable=True),
    Column("cutoff_ms", BigInteger, nullable=False),
    Column("include_audit", Boolean, nullable=False),
    Column("export_digest", Text, nullable=True),
    Column("batches", BigInteger, nullable=False, server_default=text("0")),
    Column("dispatches_pruned", BigInteger, nullable=False, server_default=text("0")),
    Column("audit_pruned", BigInteger, nullable=False, server_default=text("0")),
    Column("evidence_pruned", BigInteger, nullable=False, server_default=text("0")),
    Column("db_user", Text, nullable=False),
    Column("actor", Text, nullable=True),
    CheckConstraint(f"export_digest IS NULL OR export_digest {_HEX64}", name="export_digest_hex"),
    CheckConstraint("NOT include_audit OR export_digest IS NOT NULL", name="audit_needs_export"),
    CheckConstraint("length(actor) <= 128", name="actor_bounded"),
)

# The audit chain over manual decisions (migration 0008): each link holds the canonical
# content of one decision and hash = sha256(prev_hash || content). No foreign key: an
# --include-audit prune deletes a link with its decision once the export carries it.
recovery_audit_chain = Table(
    "recovery_audit_chain",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("mutation_id", Text, nullable=False),
    Column("dispatch_id", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("prev_hash", Text, nullable=False),
    Column("hash", Text, nullable=False),
    Column("recorded_at_ms", BigInteger, nullable=False),
    UniqueConstraint("mutation_id"),
    CheckConstraint("seq >= 1", name="seq_positive"),
    CheckConstraint(f"prev_hash {_HEX64} AND hash {_HEX64}", name="hashes_hex"),
    CheckConstraint("octet_length(content) <= 8192", name="content_bounded"),
)

# The chain's head, one row: a decision updates it before inserting its link, so concurrent
# decisions queue on its row lock and each links to the head committed before it.
recovery_audit_head = Table(
    "recovery_audit_head",
    metadata,
    Column("id", SmallInteger, primary_key=True, autoincrement=False),
    Column("seq", BigInteger, nullable=False),
    Column("hash", Text, nullable=False),
    Column("prev_hash", Text, nullable=False),
    CheckConstraint("id = 1", name="one_row"),
    CheckConstraint(f"prev_hash {_HEX64} AND hash {_HEX64}", name="hashes_hex"),
)

# Two people where it matters (migration 0013): the rules the manual commit reads, and one
# proposal per first decision on a case that needs a second person (closed once, never
# edited; pruned with its dispatch).
recovery_two_person_rules = Table(
    "recovery_two_person_rules",
    metadata,
    Column("action_type_pattern", Text, primary_key=True),
    Column("decision", Text, primary_key=True),
    CheckConstraint(
        "action_type_pattern ~ '^([a-z][a-z0-9_.-]{0,63}[*]?|[*])$'", name="pattern_shape"
    ),
    CheckConstraint(
        "decision IN ('confirm_succeeded','confirm_failed','abandon_unknown')",
        name="decision_known",
    ),
)

recovery_proposals = Table(
    "recovery_proposals",
    metadata,
    Column("proposal_id", BigInteger, Identity(), primary_key=True),
    Column(
        "dispatch_id",
        Text,
        ForeignKey("approved_action_dispatches.dispatch_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("mutation_id", Text, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("expected_execution_version", BigInteger, nullable=False),
    Column("reason_code", Text, nullable=False),
    Column("evidence_digest", Text, nullable=True),
    Column("proposed_by", Text, nullable=False),
    Column("project_id", Text, nullable=False),
    Column("project_version", BigInteger, nullable=False),
    Column("role_binding_version", BigInteger, nullable=False),
    Column("auth_time_ms", BigInteger, nullable=False),
    Column("amr", ARRAY(Text), nullable=False),
    Column("proposed_at_ms", BigInteger, nullable=False),
    Column("expires_at_ms", BigInteger, nullable=False),
    Column("closed_as", Text, nullable=True),
    Column("closed_at_ms", BigInteger, nullable=True),
    Column("closed_by", Text, nullable=True),
    Column("closed_mutation_id", Text, nullable=True),
    Column("close_reason_code", Text, nullable=True),
    Column("closed_auth_time_ms", BigInteger, nullable=True),
    Column("closed_amr", ARRAY(Text), nullable=True),
    UniqueConstraint("mutation_id"),
    UniqueConstraint("closed_mutation_id"),
    CheckConstraint("outcome IN ('succeeded','failed','blocked')", name="outcome_known"),
    CheckConstraint(f"reason_code {_CODE}", name="reason_code_shape"),
    CheckConstraint(
        f"evidence_digest IS NULL OR evidence_digest {_HEX64}", name="evidence_digest_hex"
    ),
    CheckConstraint(
        f"close_reason_code IS NULL OR close_reason_code {_CODE}", name="close_reason_code_shape"
    ),
    CheckConstraint("expires_at_ms > proposed_at_ms", name="expires_after_proposed"),
    CheckConstraint(
        "closed_as IN ('confirmed','withdrawn','rejected','voided','expired')",
        name="closed_as_known",
    ),
    CheckConstraint(
        "(closed_as IS NULL) = (closed_at_ms IS NULL)", name="closed_at_with_closed_as"
    ),
    CheckConstraint(
        "closed_as NOT IN ('confirmed','withdrawn','rejected') OR (closed_by IS NOT NULL"
        " AND closed_mutation_id IS NOT NULL AND close_reason_code IS NOT NULL)",
        name="closed_by_person",
    ),
    CheckConstraint(
        "(closed_as <> 'withdrawn' OR closed_by = proposed_by)"
        " AND (closed_as NOT IN ('confirmed','rejected') OR closed_by <> proposed_by)",
        name="second_person",
    ),
)
Index(
    "ix_recovery_proposals_open",
    recovery_proposals.c.dispatch_id,
    unique=True,
    postgresql_where=text("closed_as IS NULL"),
)
Index("ix_recovery_proposals_dispatch_id", recovery_proposals.c.dispatch_id)
# Late evidence after a manual decision (migration 0014). A watch per decision that claims
# an outcome, open while closed_at_ms is NULL (the partial index holds open ones only).
recovery_late_watches = Table(
    "recovery_late_watches",
    metadata,
    Column(
        "dispatch_id",
        Text,
        ForeignKey("approved_action_recovery_resolutions.dispatch_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("decision_mutation_id", Text, nullable=False),
    Column("decided_outcome", Text, nullable=False),
    Column("decided_at_ms", BigInteger, nullable=False),
    Column("next_scan_at_ms", BigInteger, nullable=False),
    Column("watch_owner", Text),
    Column("watch_token", UUID(as_uuid=False)),
    Column("observations", BigInteger, nullable=False, server_default=text("0")),
    Column("last_observed_at_ms", BigInteger),
    Column("closed_at_ms", BigInteger),
    Column("closed_reason", Text),
    CheckConstraint("decided_outcome IN ('succeeded', 'failed')", name="outcome_claimed"),
    CheckConstraint(
        "(closed_at_ms IS NULL AND closed_reason IS NULL) OR (closed_at_ms IS NOT NULL"
        " AND closed_reason IN ('observed', 'window_elapsed', 'unsupported'))",
        name="closed_reason_known",
    ),
)
Index(
    "ix_recovery_late_watches_open",
    recovery_late_watches.c.next_scan_at_ms,
    recovery_late_watches.c.dispatch_id,
    postgresql_where=text("closed_at_ms IS NULL"),
)
Index(
    "ix_recovery_late_watches_open_decided",
    recovery_late_watches.c.decided_at_ms,
    recovery_late_watches.c.dispatch_id,
    postgresql_where=text("closed_at_ms IS NULL"),
)

# The verified finding observed after the decision: one per dispatch, insert-only.
recovery_late_evidence = Table(
    "recovery_late_evidence",
    metadata,
    Column("observation_id", Text, primary_key=True),
    Column(
        "dispatch_id",
        Text,
        ForeignKey("approved_action_recovery_resolutions.dispatch_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("decision_mutation_id", Text, nullable=False),
    Column("finding", Text, nullable=False),
    Column("agrees", Boolean, nullable=False),
    Column("evidence_digest", Text, nullable=False),
    Column("result_code", Text, nullable=False),
    Column("observer", Text, nullable=False),
    Column("observed_at_ms", BigInteger, nullable=False),
    UniqueConstraint("dispatch_id"),
    CheckConstraint(
        "finding IN ('verified_succeeded', 'verified_failed')", name="finding_verified"
    ),
    CheckConstraint(f"evidence_digest {_HEX64}", name="digest_hex"),
    CheckConstraint(f"result_code {_CODE}", name="result_code_shape"),
    CheckConstraint(
        "observation_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'", name="observation_id_shape"
    ),
)

# Tables whose rows are facts: a trigger rejects UPDATE and DELETE on each.
IMMUTABLE_TABLES: tuple[str, ...] = (
    dispatches.name,
    resolutions.name,
    recovery_authorizations.name,
    action_receipts.name,
    package_install_records.name,
    package_install_targets.name,
    package_commit_markers.name,
    recovery_audit_chain.name,
    recovery_late_evidence.name,
)
