"""Retention: prune settled dispatches through one rule-checking function, record every run.

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

import sqlalchemy as sa
from alembic import op

revision = "0005_retention"
down_revision = "0004_executor_protocol"
branch_labels = None
depends_on = None

HEX64 = "~ '^[0-9a-f]{64}$'"
TERMINAL = "('succeeded','failed','blocked')"

# Whether a DELETE under a fact trigger runs inside resolver_prune_batch (see docstring).
# Inline in each trigger: a helper function would need EXECUTE for every role that fires it.
PRUNE_ACTIVE = (
    "coalesce(current_setting('resolver.prune_active', true), '') = 'on'"
    " AND (SELECT relowner FROM pg_class WHERE oid = TG_RELID)"
    " = (SELECT oid FROM pg_roles WHERE rolname = current_user)"
)

REJECT_MUTATION = f"""
CREATE OR REPLACE FUNCTION resolver_reject_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Nested, so an UPDATE never evaluates the check (plpgsql does not short-circuit AND).
    IF TG_OP = 'DELETE' THEN
        IF {PRUNE_ACTIVE} THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION '% is insert-only: % rejected', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$
"""

REJECT_MUTATION_0001 = """
CREATE OR REPLACE FUNCTION resolver_reject_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is insert-only: % rejected', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$
"""

_GUARD_RUN_ORIGIN = """
CREATE OR REPLACE FUNCTION resolver_guard_run_origin() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {prune_exit}
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
GUARD_RUN_ORIGIN = _GUARD_RUN_ORIGIN.format(
    prune_exit=f"IF TG_OP = 'DELETE' THEN IF {PRUNE_ACTIVE} THEN RETURN OLD; END IF; END IF;"
)
GUARD_RUN_ORIGIN_0002 = _GUARD_RUN_ORIGIN.format(prune_exit="")

# A resolution outlives its execution under retention: an identity that was settled must never
# get a new execution (a lease, whatever writes it), or an approved action could run twice.
SETTLED_NEVER_RELEASED = """
CREATE FUNCTION resolver_refuse_settled_lease() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS r
               WHERE r.dispatch_id = NEW.dispatch_id) THEN
        RAISE EXCEPTION 'dispatch % was settled by a resolution (its execution was pruned): it is never leased again; a new action needs a new dispatch',
            quote_literal(NEW.dispatch_id)
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$
"""
SETTLED_NEVER_RELEASED_TRIGGER = (
    "CREATE TRIGGER approved_action_executions_settled_identity BEFORE INSERT"
    " ON approved_action_executions FOR EACH ROW EXECUTE FUNCTION resolver_refuse_settled_lease()"
)

PRUNE_BEGIN = f"""
CREATE FUNCTION resolver_prune_begin(
    p_cutoff_ms bigint, p_include_audit boolean, p_export_digest text, p_actor text)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_run_id bigint;
BEGIN
    IF p_cutoff_ms IS NULL OR p_cutoff_ms > resolver_now_ms(NULL) THEN
        RAISE EXCEPTION 'prune cut-off must be a time in the past'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_export_digest IS NOT NULL AND NOT p_export_digest {HEX64} THEN
        RAISE EXCEPTION 'an export digest is a lowercase hex sha256'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(p_include_audit, true) AND p_export_digest IS NULL THEN
        RAISE EXCEPTION 'pruning audit facts requires the sha256 of their export'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO recovery_prune_runs (started_at_ms, cutoff_ms, include_audit, export_digest,
                                     db_user, actor)
    VALUES (resolver_now_ms(NULL), p_cutoff_ms, p_include_audit, p_export_digest,
            session_user, left(p_actor, 128))
    RETURNING run_id INTO v_run_id;
    RETURN v_run_id;
END
$$
"""

# One batch: lock what it may take (SKIP LOCKED, never waits on a row another transaction
# holds), re-check every rule under the lock, delete, count. All or nothing per dispatch.
PRUNE_BATCH = f"""
CREATE FUNCTION resolver_prune_batch(p_run_id bigint, p_limit integer, p_dispatch_ids text[])
RETURNS TABLE (dispatches bigint, audit bigint, evidence bigint, remnants bigint)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    r recovery_prune_runs;
    v_settled text[];
    v_remnants text[] := '{{}}';
    v_rows text[];
    v_audit text[];
    v_evidence bigint := 0;
    v_n bigint;
BEGIN
    SELECT * INTO r FROM recovery_prune_runs WHERE run_id = p_run_id FOR NO KEY UPDATE;
    IF NOT FOUND OR r.finished_at_ms IS NOT NULL THEN
        RAISE EXCEPTION 'prune run % is not open', p_run_id USING ERRCODE = 'no_data_found';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'prune batch size must be between 1 and 10000'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Deleting only what was exported: a run with an export names its dispatches.
    IF r.export_digest IS NOT NULL AND p_dispatch_ids IS NULL THEN
        RAISE EXCEPTION 'a run with an export prunes only the dispatches it exported'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_dispatch_ids) > p_limit THEN
        RAISE EXCEPTION 'more dispatch ids than the batch size'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Settled: terminal execution, resolved control, both older than the cut-off. Locks the
    -- execution, the control and the identity; anything held elsewhere waits for a later run.
    IF p_dispatch_ids IS NULL THEN
        SELECT coalesce(array_agg(s.dispatch_id), '{{}}') INTO v_settled FROM (
            SELECT c.dispatch_id
            FROM approved_action_recovery_controls AS c
            JOIN approved_action_executions AS e USING (dispatch_id)
            JOIN approved_action_dispatches AS d USING (dispatch_id)
            WHERE c.status = 'resolved' AND c.closed_at_ms < r.cutoff_ms
              AND e.state IN {TERMINAL} AND e.finished_at_ms < r.cutoff_ms
            ORDER BY c.closed_at_ms, c.dispatch_id
            LIMIT p_limit
            FOR UPDATE OF e, c, d SKIP LOCKED) AS s;
    ELSE
        SELECT coalesce(array_agg(s.dispatch_id), '{{}}') INTO v_settled FROM (
            SELECT c.dispatch_id
            FROM approved_action_recovery_controls AS c
            JOIN approved_action_executions AS e USING (dispatch_id)
            JOIN approved_action_dispatches AS d USING (dispatch_id)
            WHERE c.dispatch_id = ANY (p_dispatch_ids)
              AND c.status = 'resolved' AND c.closed_at_ms < r.cutoff_ms
              AND e.state IN {TERMINAL} AND e.finished_at_ms < r.cutoff_ms
            FOR UPDATE OF e, c, d SKIP LOCKED) AS s;
    END IF;

    -- Audit remnants (include-audit only): identity and resolution left by an earlier prune.
    -- A resolution proves the dispatch was settled; no execution means nothing can run it.
    IF r.include_audit THEN
        SELECT coalesce(array_agg(s.dispatch_id), '{{}}') INTO v_remnants FROM (
            SELECT d.dispatch_id
            FROM approved_action_dispatches AS d
            JOIN approved_action_recovery_resolutions AS res USING (dispatch_id)
            WHERE d.dispatch_id = ANY (p_dispatch_ids)
              AND res.resolved_at_ms < r.cutoff_ms
              AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                              WHERE e.dispatch_id = d.dispatch_id)
            FOR UPDATE OF d SKIP LOCKED) AS s;
    END IF;

    -- Opens the fact triggers for this function's deletes only (they also require the owner
    -- as current user); closed again below, and discarded with the transaction on any error.
    PERFORM set_config('resolver.prune_active', 'on', true);
    DELETE FROM approved_action_recovery_controls WHERE dispatch_id = ANY (v_settled);
    DELETE FROM approved_action_executions WHERE dispatch_id = ANY (v_settled);
    DELETE FROM action_receipts WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM run_origin_facts WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM package_install_records WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM package_install_targets WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM package_commit_markers WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;

    -- Identity rows go when nothing audits them (closed by the executor's own completion) or
    -- when the audit facts go too; a dispatch a newer one supersedes keeps its identity.
    SELECT coalesce(array_agg(d.dispatch_id), '{{}}') INTO v_rows
    FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = ANY (v_settled || v_remnants)
      AND (r.include_audit OR NOT EXISTS (
              SELECT 1 FROM approved_action_recovery_resolutions AS res
              WHERE res.dispatch_id = d.dispatch_id))
      AND NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS n
                      WHERE n.supersedes_dispatch_id = d.dispatch_id);
    SELECT coalesce(array_agg(res.dispatch_id), '{{}}') INTO v_audit
    FROM approved_action_recovery_resolutions AS res
    WHERE res.dispatch_id = ANY (v_rows);

    DELETE FROM recovery_authorizations AS a
    USING approved_action_recovery_resolutions AS res
    WHERE a.mutation_id = res.mutation_id AND res.dispatch_id = ANY (v_audit);
    DELETE FROM approved_action_recovery_resolutions WHERE dispatch_id = ANY (v_audit);
    DELETE FROM approved_action_dispatches WHERE dispatch_id = ANY (v_rows);
    PERFORM set_config('resolver.prune_active', 'off', true);

    dispatches := cardinality(v_settled);
    audit := cardinality(v_audit);
    evidence := v_evidence;
    remnants := cardinality(ARRAY(SELECT unnest(v_remnants) INTERSECT SELECT unnest(v_rows)));
    UPDATE recovery_prune_runs
    SET batches = batches + 1,
        dispatches_pruned = dispatches_pruned + dispatches,
        audit_pruned = audit_pruned + audit,
        evidence_pruned = evidence_pruned + evidence,
        last_batch_at_ms = resolver_now_ms(NULL)
    WHERE run_id = p_run_id;
    RETURN NEXT;
END
$$
"""

PRUNE_FINISH = """
CREATE FUNCTION resolver_prune_finish(p_run_id bigint)
RETURNS TABLE (dispatches_pruned bigint, audit_pruned bigint, evidence_pruned bigint)
LANGUAGE sql SECURITY DEFINER AS $$
    UPDATE recovery_prune_runs
    SET finished_at_ms = resolver_now_ms(NULL)
    WHERE run_id = p_run_id AND finished_at_ms IS NULL
    RETURNING dispatches_pruned, audit_pruned, evidence_pruned
$$
"""

# What a run would take, for --dry-run and the export: one JSON document per dispatch with
# its identity, terminal state, resolution and authorization (no evidence, no secrets).
PRUNE_CANDIDATES = f"""
CREATE FUNCTION resolver_prune_candidates(
    p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer)
RETURNS TABLE (dispatch_id text, audited boolean, record jsonb)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    WITH ids AS (
        (SELECT c.dispatch_id
         FROM approved_action_recovery_controls AS c
         JOIN approved_action_executions AS e USING (dispatch_id)
         WHERE c.dispatch_id > p_after
           AND c.status = 'resolved' AND c.closed_at_ms < p_cutoff_ms
           AND e.state IN {TERMINAL} AND e.finished_at_ms < p_cutoff_ms
         ORDER BY c.dispatch_id
         LIMIT least(p_limit, 10000))
        UNION ALL
        (SELECT res.dispatch_id
         FROM approved_action_recovery_resolutions AS res
         WHERE p_include_audit AND res.dispatch_id > p_after
           AND res.resolved_at_ms < p_cutoff_ms
           AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                           WHERE e.dispatch_id = res.dispatch_id)
         ORDER BY res.dispatch_id
         LIMIT least(p_limit, 10000))
    ),
    page AS (SELECT i.dispatch_id FROM ids AS i ORDER BY i.dispatch_id
             LIMIT least(p_limit, 10000))
    SELECT d.dispatch_id, res.dispatch_id IS NOT NULL,
           jsonb_build_object(
               'v', 1,
               'dispatch', to_jsonb(d),
               'execution', CASE WHEN e.dispatch_id IS NOT NULL THEN jsonb_build_object(
                   'state', e.state, 'attempt', e.attempt, 'version', e.version,
                   'started_at_ms', e.started_at_ms, 'finished_at_ms', e.finished_at_ms,
                   'result_code', e.result_code,
                   'completion_mutation_id', e.completion_mutation_id,
                   'evidence_digest', e.evidence_digest,
                   'closed_by', c.closed_by, 'closed_at_ms', c.closed_at_ms) END,
               'resolution', to_jsonb(res),
               'authorization', to_jsonb(a))
    FROM page AS p
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_resolutions AS res ON res.dispatch_id = d.dispatch_id
    LEFT JOIN recovery_authorizations AS a ON a.mutation_id = res.mutation_id
    ORDER BY d.dispatch_id
$$
"""

FUNCTIONS = (
    "resolver_refuse_settled_lease()",
    "resolver_prune_candidates(bigint, boolean, text, integer)",
    "resolver_prune_finish(bigint)",
    "resolver_prune_batch(bigint, integer, text[])",
    "resolver_prune_begin(bigint, boolean, text, text)",
)
# A definer function resolves names through a pinned path, the migration's own schema first
# and pg_temp last, so no caller can shadow a table or a function with an object of its own.
PIN_SEARCH_PATH = """
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', '{function}',
                   current_schema());
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', '{function}');
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "recovery_prune_runs",
        sa.Column("run_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("started_at_ms", sa.BigInteger(), nullable=False),
        sa.Column("finished_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("last_batch_at_ms", sa.BigInteger(), nullable=True),
        sa.Column("cutoff_ms", sa.BigInteger(), nullable=False),
        sa.Column("include_audit", sa.Boolean(), nullable=False),
        sa.Column("export_digest", sa.Text(), nullable=True),
        sa.Column("batches", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "dispatches_pruned", sa.BigInteger(), server_default=sa.text("0"), nullable=False
        ),
        sa.Column("audit_pruned", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("evidence_pruned", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("db_user", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=True),
        sa.CheckConstraint(
            f"export_digest IS NULL OR export_digest {HEX64}", name="export_digest_hex"
        ),
        sa.CheckConstraint(
            "NOT include_audit OR export_digest IS NOT NULL", name="audit_needs_export"
        ),
        sa.CheckConstraint("length(actor) <= 128", name="actor_bounded"),
        sa.PrimaryKeyConstraint("run_id", name="pk_recovery_prune_runs"),
    )
    # The prune scans settled controls oldest first, and deleting an identity makes the
    # foreign key look for dispatches superseding it: both need an index at 10^6 rows.
    op.create_index(
        "ix_recovery_controls_settled",
        "approved_action_recovery_controls",
        ["closed_at_ms", "dispatch_id"],
        postgresql_where=sa.text("status = 'resolved'"),
    )
    op.create_index(
        "ix_approved_action_dispatches_supersedes_dispatch_id",
        "approved_action_dispatches",
        ["supersedes_dispatch_id"],
        postgresql_where=sa.text("supersedes_dispatch_id IS NOT NULL"),
    )
    op.execute(REJECT_MUTATION)
    op.execute(GUARD_RUN_ORIGIN)
    for ddl in (SETTLED_NEVER_RELEASED, PRUNE_BEGIN, PRUNE_BATCH, PRUNE_FINISH, PRUNE_CANDIDATES):
        op.execute(ddl)
    for function in FUNCTIONS:
        op.execute(PIN_SEARCH_PATH.format(function=function))
    op.execute(SETTLED_NEVER_RELEASED_TRIGGER)


def downgrade() -> None:
    op.execute(
        "DROP TRIGGER IF EXISTS approved_action_executions_settled_identity"
        " ON approved_action_executions"
    )
    for function in FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {function}")
    op.execute(GUARD_RUN_ORIGIN_0002)
    op.execute(REJECT_MUTATION_0001)
    op.drop_index(
        "ix_approved_action_dispatches_supersedes_dispatch_id",
        table_name="approved_action_dispatches",
    )
    op.drop_index("ix_recovery_controls_settled", table_name="approved_action_recovery_controls")
    op.drop_table("recovery_prune_runs")
