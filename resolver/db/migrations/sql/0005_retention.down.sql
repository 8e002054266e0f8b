-- Migration 0005_retention (down): undoes 0005_retention.up.sql, newest object first.

DROP TRIGGER IF EXISTS approved_action_executions_settled_identity ON approved_action_executions;

DROP FUNCTION IF EXISTS resolver_refuse_settled_lease();

DROP FUNCTION IF EXISTS resolver_prune_candidates(bigint, boolean, text, integer);

DROP FUNCTION IF EXISTS resolver_prune_finish(bigint);

DROP FUNCTION IF EXISTS resolver_prune_batch(bigint, integer, text[]);

DROP FUNCTION IF EXISTS resolver_prune_begin(bigint, boolean, text, text);

CREATE OR REPLACE FUNCTION resolver_guard_run_origin() RETURNS trigger LANGUAGE plpgsql AS $$
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
$$;

CREATE OR REPLACE FUNCTION resolver_reject_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is insert-only: % rejected', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;

DROP INDEX ix_approved_action_dispatches_supersedes_dispatch_id;

DROP INDEX ix_recovery_controls_settled;

DROP TABLE recovery_prune_runs;
