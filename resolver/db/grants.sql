-- Least-privilege roles of the approved-action resolver: step 2 of 2.
--
-- `resolver migrate --grants` (the chart's and kustomize's migration Job) runs this file, as
-- resolver_migrator (the owner of every object), right after the migrations. By hand:
--
--     psql "$MIGRATOR_URL" -v ON_ERROR_STOP=1 -f resolver/db/grants.sql
--
-- Idempotent. A migration that adds a table must add its grants here in the same change.
-- Privileges are per table and per verb: the runtime role cannot UPDATE or DELETE facts,
-- cannot delete anything, and cannot run DDL (it owns nothing).

SET search_path = resolver;

-- Dispatches are immutable identities: the resolver reads them, executors create them.
GRANT SELECT ON approved_action_dispatches TO resolver_runtime;
GRANT SELECT, INSERT ON approved_action_dispatches TO resolver_executor;

-- Executions and recovery controls are versioned rows: the resolver claims and commits
-- (SELECT ... FOR UPDATE needs UPDATE); executors also create them (lease, start barrier).
GRANT SELECT, UPDATE ON approved_action_executions TO resolver_runtime;
GRANT SELECT, UPDATE ON approved_action_recovery_controls TO resolver_runtime;
GRANT SELECT, INSERT, UPDATE ON approved_action_executions TO resolver_executor;
GRANT SELECT, INSERT, UPDATE ON approved_action_recovery_controls TO resolver_executor;

-- Resolutions and authorization facts are insert-only (a trigger refuses UPDATE/DELETE as
-- well). The identity columns need no sequence privilege.
GRANT SELECT, INSERT ON approved_action_recovery_resolutions TO resolver_runtime;
GRANT SELECT, INSERT ON recovery_authorizations TO resolver_runtime;
-- Executors read a resolution that won the race against their completion (exact replay).
GRANT SELECT ON approved_action_recovery_resolutions TO resolver_executor;

-- Readiness: `resolver run` refuses to start unless the schema is at the expected revision.
GRANT SELECT ON alembic_version TO resolver_runtime;

-- The database clock. Functions are executable by PUBLIC by default; narrow it to the
-- roles that compare leases and due times.
REVOKE EXECUTE ON FUNCTION resolver_now_ms(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION resolver_now_ms(bigint) TO resolver_runtime, resolver_executor;
REVOKE EXECUTE ON FUNCTION resolver_reject_mutation() FROM PUBLIC;

-- Evidence of the built-in SQL providers (migration 0002): executors (and the platform's
-- run service) write it in the same transaction as their side effect; providers only read.
GRANT SELECT, INSERT ON action_receipts, package_install_records, package_install_targets, package_commit_markers TO resolver_executor;
GRANT SELECT, INSERT, UPDATE ON run_origin_facts TO resolver_executor;
GRANT SELECT ON action_receipts, run_origin_facts, package_install_records, package_install_targets, package_commit_markers TO resolver_evidence_reader;

-- The access-policy mirror of manual decisions (migration 0003). The platform's own role keeps
-- it in step. A decision locks the grant FOR SHARE so a concurrent revocation cannot slip
-- past it, and PostgreSQL requires an UPDATE privilege for that lock: the narrowest one is
-- UPDATE of the version column (bumping it can only invalidate decisions, never grant one).
GRANT SELECT, UPDATE (version) ON recovery_projects, recovery_role_bindings TO resolver_runtime;
