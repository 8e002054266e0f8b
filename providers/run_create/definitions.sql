-- A run's origin fact: applied again by `resolver migrate` whenever it must
-- (resolver/db/provider_schemas.py), so the trigger is dropped first. The function keeps the
-- name release 0.1.0 gave it, so that a downgrade to that release finds what it expects.

-- A run's origin never changes and its state settles once: running -> succeeded/failed.
CREATE OR REPLACE FUNCTION resolver_guard_run_origin() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stack text;
BEGIN
    -- Inside resolver_prune_batch only (see resolver_reject_mutation).
    IF TG_OP = 'DELETE' THEN
        GET DIAGNOSTICS stack = PG_CONTEXT;
        IF stack ~ ('(^|\n)PL/pgSQL function (' || TG_TABLE_SCHEMA
                    || '\.)?resolver_prune_batch\(') THEN
            RETURN OLD;
        END IF;
    END IF;
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

DROP TRIGGER IF EXISTS run_origin_facts_guard ON run_origin_facts;
CREATE TRIGGER run_origin_facts_guard
    BEFORE UPDATE OR DELETE ON run_origin_facts
    FOR EACH ROW EXECUTE FUNCTION resolver_guard_run_origin();
