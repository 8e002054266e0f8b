-- Least-privilege roles of the approved-action resolver: step 2 of 2.
--
-- `resolver migrate --grants` (the chart's and kustomize's migration Job) runs this file, as
-- resolver_migrator (the owner of every object), right after the migrations. By hand:
--
--     psql "$MIGRATOR_URL" -v ON_ERROR_STOP=1 -f resolver/db/grants.sql
--
-- Idempotent. A migration that adds a table must add its grants here in the same change.
-- Privileges are per table and per verb. Each face logs in as its own role: the replicas as
-- resolver_runtime, the API as resolver_api. Neither holds INSERT, UPDATE or DELETE on what a
-- decision records (resolutions, authorization facts, proposals, audit links, the head, late
-- evidence, a control's escalation): each such write is a SECURITY DEFINER function that
-- checks what it records, and a trigger on each of those tables refuses a write no such
-- function made. The replicas' role cannot run the manual commit; the API's role cannot run
-- the automatic one. Neither can run DDL (they own nothing).

SET search_path = resolver;

-- What an earlier grants.sql gave the replicas' role, which the API pods used to log in as
-- too: writes on what a decision records. Revoked first (the 0.2.0 migration does the same), so
-- the column grants below are all that is left; idempotent.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE
    ON approved_action_recovery_resolutions, recovery_authorizations, recovery_proposals,
       recovery_audit_chain, recovery_audit_head, recovery_late_evidence,
       approved_action_executions, approved_action_recovery_controls, recovery_late_watches,
       recovery_projects, recovery_role_bindings
    FROM resolver_runtime, resolver_api;

-- Dispatches are immutable identities: the resolver reads them. Executors create them only
-- through resolver_dispatch_create_v2 (below) and read them.
GRANT SELECT ON approved_action_dispatches TO resolver_runtime, resolver_api;
GRANT SELECT ON approved_action_dispatches TO resolver_executor;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON approved_action_dispatches FROM resolver_executor;

-- Executions and recovery controls are versioned rows. The replicas claim a page and hand
-- recovery leases back by writing the lease columns of a control (and its next scan), nothing
-- else; they settle, re-arm and escalate only through resolver_commit_automatic. Executors
-- write them only through the protocol functions, so they get SELECT and no
-- write privilege at all; upgrading from an older grants.sql revokes what it used to give
-- (the 0.2.0 migration revokes the replicas' former table-wide UPDATE).
GRANT SELECT ON approved_action_executions TO resolver_runtime, resolver_api;
GRANT SELECT ON approved_action_recovery_controls TO resolver_runtime, resolver_api;
GRANT UPDATE (recovery_owner, recovery_token, recovery_version, recovery_lease_expires_at_ms,
              next_scan_at_ms)
    ON approved_action_recovery_controls TO resolver_runtime;
GRANT SELECT ON approved_action_executions, approved_action_recovery_controls TO resolver_executor;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE
    ON approved_action_executions, approved_action_recovery_controls FROM resolver_executor;

-- The executor protocol (docs/executor-protocol.md): SECURITY DEFINER
-- functions that fence inside the database, and the outcome feed's reads and consumer cursors
-- (docs/outcomes.md), how the runtime that issued an action learns its outcome. Executable by
-- the executor role (the feed's reads also by the outcome reader, below).
DO $$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN
        SELECT p.oid::regprocedure FROM pg_proc AS p
        WHERE p.pronamespace = 'resolver'::regnamespace
          AND p.proname IN ('resolver_dispatch_create_v2', 'resolver_execution_lease',
                            'resolver_execution_start', 'resolver_execution_renew',
                            'resolver_execution_complete', 'resolver_receipt_identity',
                            'resolver_receipt_write', 'resolver_outcomes_after',
                            'resolver_outcome_cursor_now', 'resolver_outcome_consumer_cursor',
                            'resolver_outcome_consumer_save', 'resolver_outcome_consumer_drop',
                            'resolver_outcome_listen', 'resolver_outcome_unlisten',
                            'resolver_dispatch_status', 'resolver_dispatch_history')
    LOOP
        EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', fn);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO resolver_executor', fn);
    END LOOP;
END
$$;

-- Resolutions and authorization facts: read by both faces, written only by the commits.
GRANT SELECT ON approved_action_recovery_resolutions, recovery_authorizations
    TO resolver_runtime, resolver_api;
-- Executors read a resolution that won the race against their completion (exact replay).
GRANT SELECT ON approved_action_recovery_resolutions TO resolver_executor;

-- The automatic commit (resolver/db/schema/functions/08_commits.sql): SECURITY DEFINER, the replicas'
-- one way to settle, re-arm or escalate.
REVOKE EXECUTE ON FUNCTION resolver_commit_automatic(json, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION resolver_commit_automatic(json, bigint) TO resolver_runtime;
REVOKE EXECUTE ON FUNCTION resolver_finding_status(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION resolver_finding_status(text) TO resolver_runtime;
-- The manual commit and the proposal close: SECURITY DEFINER, the API's one way to record a
-- person's act (a signed fact naming the act, consumed once; two people where the rules say
-- so; the bounds from the decision policy). The replicas' role may run neither.
REVOKE EXECUTE ON FUNCTION resolver_commit_manual(text, text, text, bigint, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint, bigint, boolean, text[]) FROM PUBLIC, resolver_runtime;
GRANT EXECUTE ON FUNCTION resolver_commit_manual(text, text, text, bigint, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint, bigint, boolean, text[]) TO resolver_api;
REVOKE EXECUTE ON FUNCTION resolver_proposal_close(text, text, text, bigint, text, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint) FROM PUBLIC, resolver_runtime;
GRANT EXECUTE ON FUNCTION resolver_proposal_close(text, text, text, bigint, text, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint) TO resolver_api;
-- Run only inside the commits, as the owner: nobody else may call them.
REVOKE EXECUTE ON FUNCTION
    resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json),
    resolver_audit_append(text, text, text, bigint),
    resolver_act_bounds(bigint, bigint),
    resolver_fact_shape(text[], text, text, text, text, bigint),
    resolver_fact_unused(text, text),
    resolver_fact_fresh(bigint, bigint, bigint),
    resolver_commit_wait_executions(text[]),
    resolver_commit_wait_controls(text[])
    FROM PUBLIC, resolver_runtime, resolver_api;
-- Two people where it matters: both faces read the rules (only the owner and
-- the policy writer write them) and the proposals (only the manual commit, the proposal
-- close and the void trigger write them).
GRANT SELECT ON recovery_two_person_rules, recovery_proposals TO resolver_runtime, resolver_api;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON recovery_two_person_rules, recovery_proposals
    FROM resolver_runtime, resolver_api;
REVOKE EXECUTE ON FUNCTION resolver_needs_two_people(text, text), resolver_strong_amr(text[])
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION resolver_needs_two_people(text, text), resolver_strong_amr(text[])
    TO resolver_api;

-- Readiness: `resolver run` and `resolver api` refuse to start unless the schema is at the
-- expected revision.
GRANT SELECT ON alembic_version TO resolver_runtime, resolver_api;

-- The database clock. Functions are executable by PUBLIC by default; narrow it to the
-- roles that compare leases and due times.
REVOKE EXECUTE ON FUNCTION resolver_now_ms(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION resolver_now_ms(bigint) TO resolver_runtime, resolver_executor, resolver_api;
-- The domain sets (resolver_terminal_states, resolver_finding_kinds, resolver_finding_outcome,
-- resolver_decision_settles) stay executable by PUBLIC: constants that checks and trigger
-- conditions read whoever writes the row.
-- The one recovery-lease release (a pure function): the runtime role's commits and hand-backs
-- run it; the protocol functions run it as the owner.
REVOKE EXECUTE ON FUNCTION resolver_recovery_lease_released(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION resolver_recovery_lease_released(bigint) TO resolver_runtime;
REVOKE EXECUTE ON FUNCTION resolver_reject_mutation(), resolver_guard_definer_write() FROM PUBLIC;

-- Internal receipts: executors write them through resolver_receipt_write (fenced on their
-- lease), in the same transaction as their mutation; providers only read. A provider's own
-- evidence tables get their grants from the provider's grants.sql, which
-- `resolver migrate --grants` applies after this file.
GRANT SELECT ON action_receipts TO resolver_executor;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON action_receipts FROM resolver_executor;
GRANT SELECT ON action_receipts TO resolver_evidence_reader;

-- The access-policy mirror of manual decisions. The platform's own role keeps
-- it in step. A decision locks the grant FOR SHARE so a concurrent revocation cannot slip
-- past it, and PostgreSQL requires an UPDATE privilege for that lock: the narrowest one is
-- UPDATE of the version column; the manual commit takes that lock as the owner now, so both
-- faces only read the mirror.
GRANT SELECT ON recovery_projects, recovery_role_bindings TO resolver_runtime, resolver_api;
-- The platform that owns projects and role bindings writes the mirror (deploy/sql/roles.sql's
-- resolver_policy_writer, or your platform's login granted it): every verb on these two tables,
-- nothing on any other. Deleting a binding is how a grant is revoked. It also keeps the
-- two-person rules: which decisions on which action types need two people.
GRANT SELECT, INSERT, UPDATE, DELETE ON recovery_projects, recovery_role_bindings TO resolver_policy_writer;
GRANT SELECT, INSERT, DELETE ON recovery_two_person_rules TO resolver_policy_writer;
-- And the bounds of a human act (one row: strong-authentication age, proposal lifetime, clock
-- leeway), which the decision functions read at every act; the API reads them to ask for no
-- more than they allow, and writes nothing.
GRANT SELECT, UPDATE ON recovery_decision_policy TO resolver_policy_writer;
GRANT SELECT ON recovery_decision_policy TO resolver_api;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON recovery_decision_policy
    FROM resolver_runtime, resolver_api;

-- Retention. The prune functions are SECURITY DEFINER: they run as the
-- owner, check the retention rules (settled and older than the cut-off, audit facts only with
-- an export digest) and are the only way past the insert-only triggers. The retention role may
-- call them and the database clock, nothing else: no table privilege at all.
REVOKE EXECUTE ON FUNCTION
    resolver_prune_begin(bigint, boolean, text, text, boolean),
    resolver_prune_batch(bigint, integer, text[]),
    resolver_prune_finish(bigint),
    resolver_prune_candidates(bigint, boolean, text, integer, boolean),
    resolver_prune_consumers(bigint)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    resolver_prune_begin(bigint, boolean, text, text, boolean),
    resolver_prune_batch(bigint, integer, text[]),
    resolver_prune_finish(bigint),
    resolver_prune_candidates(bigint, boolean, text, integer, boolean),
    resolver_prune_consumers(bigint)
    TO resolver_retention;
GRANT EXECUTE ON FUNCTION resolver_now_ms(bigint) TO resolver_retention;
-- The /metrics of both faces read the run history (resolver_pruned_dispatches_total), and
-- `resolver audit verify` the range of audit links each run removed.
GRANT SELECT ON recovery_prune_runs TO resolver_runtime, resolver_api;
-- What a prune leaves of each dispatch: the API's find reads it; only the
-- prune batch (its owner's function) writes it.
GRANT SELECT ON recovery_pruned_dispatches TO resolver_runtime, resolver_api;

-- The audit chain of manual decisions. The manual commit inserts a link and
-- moves the one-row head in the same statement, as the owner; links are insert-only (a
-- trigger refuses UPDATE and DELETE, for the owner too). `resolver audit verify` reads both,
-- as either face.
GRANT SELECT ON recovery_audit_chain, recovery_audit_head TO resolver_runtime, resolver_api;
-- The canonical content of a link, built by the act that writes it and rebuilt from the
-- stored facts by the verifier (the decision's, or a reject's or withdraw's).
REVOKE EXECUTE ON FUNCTION
    resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint,
                                 text, text, text, text, text, text, bigint, bigint),
    resolver_audit_proposal(bigint, text, text, bigint, text, text, text, bigint, bigint),
    resolver_audit_content(text, text, text, text, text, bigint, text, text, bigint, json, text,
                           json),
    resolver_audit_decision(text),
    resolver_audit_close(text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint,
                                 text, text, text, text, text, text, bigint, bigint),
    resolver_audit_proposal(bigint, text, text, bigint, text, text, text, bigint, bigint),
    resolver_audit_content(text, text, text, text, text, bigint, text, text, bigint, json, text,
                           json),
    resolver_audit_decision(text),
    resolver_audit_close(text)
    TO resolver_runtime, resolver_api;

-- Late evidence after a human decision. A manual decision's own statement
-- opens its watch (a SECURITY DEFINER trigger); the replicas claim watches and close elapsed
-- ones (the lease and closing columns, never DELETE) and record late evidence only through
-- resolver_record_late_evidence (SECURITY DEFINER); late evidence is insert-only.
GRANT SELECT ON recovery_late_watches, recovery_late_evidence TO resolver_runtime, resolver_api;
GRANT UPDATE (watch_owner, watch_token, next_scan_at_ms, closed_at_ms, closed_reason)
    ON recovery_late_watches TO resolver_runtime;
REVOKE EXECUTE ON FUNCTION resolver_open_late_watch() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION resolver_record_late_evidence(json, text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION resolver_record_late_evidence(json, text, bigint, bigint)
    TO resolver_runtime;

-- The outcome feed (resolver/db/schema/functions/10_outcome_feed.sql). Only the appends write
-- it, as triggers of the settling statements; nobody calls them, and nobody reads or writes
-- the feed's tables directly. The executor role (above) and the outcome reader read it through
-- the SECURITY DEFINER reads: a login in resolver_outcome_reader reads only the projects
-- recovery_outcome_reader_scopes lists for it, which the platform's policy writer keeps. The
-- reader may register, move and drop consumer cursors (what retention waits for), and register
-- its own LISTEN session (what makes settling commits notify).
REVOKE EXECUTE ON FUNCTION
    resolver_outcomes_append_settled(),
    resolver_outcomes_append_contradicted(),
    resolver_outcomes_append_superseded(),
    resolver_outcomes_notify()
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    resolver_outcomes_after(text, integer, text),
    resolver_outcome_cursor_now(),
    resolver_outcome_consumer_cursor(text),
    resolver_outcome_consumer_save(text, text),
    resolver_outcome_consumer_drop(text),
    resolver_outcome_listen(),
    resolver_outcome_unlisten(),
    resolver_dispatch_status(text),
    resolver_dispatch_history(text)
    TO resolver_outcome_reader;
GRANT SELECT, INSERT, DELETE ON recovery_outcome_reader_scopes TO resolver_policy_writer;
-- Its project_id is a resolver_id, whose check (resolver_is_id) runs as whoever writes the row.
GRANT EXECUTE ON FUNCTION resolver_is_id(text) TO resolver_policy_writer;
