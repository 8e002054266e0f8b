-- Least-privilege roles of the approved-action resolver: step 1 of 2.
--
-- Run as an administrator (a superuser, or a role with CREATEROLE that may create schemas in
-- the database, such as its owner: what managed services give) connected to the application
-- database, once, BEFORE the first `resolver migrate`:
--
--     psql "$ADMIN_URL" -v ON_ERROR_STOP=1 -f deploy/sql/roles.sql
--
-- Then `resolver migrate --grants` as resolver_migrator (step 2: resolver/db/grants.sql). Both are
-- idempotent. No password is set here: give the LOGIN roles theirs out of band
-- (ALTER ROLE ... PASSWORD, your secret manager, or IAM authentication) and store each URL
-- in the Kubernetes Secret the chart references. tests/deploy/test_database_roles.py runs
-- both files against PostgreSQL and proves what each role can and cannot do.

DO $$
BEGIN
    -- Owns the schema and every object in it; the only role with DDL. Used by the migration
    -- Job alone, never by the long-running replicas.
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'resolver_migrator') THEN
        CREATE ROLE resolver_migrator LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
    -- The resolver replicas: claim, inspect, commit. DML on the tables they need, no DDL.
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'resolver_runtime') THEN
        CREATE ROLE resolver_runtime LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
    -- The platform's executors (resolver.executor.client: create dispatch, lease, start, renew,
    -- complete). Kept apart from the resolver so neither can do the other's writes.
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'resolver_executor') THEN
        CREATE ROLE resolver_executor LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
    -- SQL evidence providers: SELECT on evidence tables only, in read-only transactions.
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'resolver_evidence_reader') THEN
        CREATE ROLE resolver_evidence_reader LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
    -- `resolver prune` (the retention CronJob): EXECUTE on the prune functions, which check
    -- the retention rules themselves; no privilege on any table.
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'resolver_retention') THEN
        CREATE ROLE resolver_retention LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
    -- The platform that owns projects and role bindings: keeps the access-policy mirror
    -- (recovery_projects, recovery_role_bindings) in step, and nothing else.
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'resolver_policy_writer') THEN
        CREATE ROLE resolver_policy_writer LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
END
$$;

-- Creating a schema for another role takes membership in it. A superuser has it; an
-- administrator with CREATEROLE only (what managed services give) grants it to itself here
-- (PostgreSQL 16 and later already gave it when the role was created).
GRANT resolver_migrator TO CURRENT_USER;

-- A schema of its own: nobody else can create objects in it, and the roles below need no
-- privilege on `public`.
CREATE SCHEMA IF NOT EXISTS resolver AUTHORIZATION resolver_migrator;
REVOKE ALL ON SCHEMA resolver FROM PUBLIC;
GRANT USAGE ON SCHEMA resolver
    TO resolver_runtime, resolver_executor, resolver_evidence_reader, resolver_retention,
       resolver_policy_writer;

-- Unqualified names in the resolver's SQL and in Alembic resolve to this schema.
ALTER ROLE resolver_migrator SET search_path = resolver;
ALTER ROLE resolver_runtime SET search_path = resolver;
ALTER ROLE resolver_executor SET search_path = resolver;
ALTER ROLE resolver_evidence_reader SET search_path = resolver;
ALTER ROLE resolver_retention SET search_path = resolver;
ALTER ROLE resolver_policy_writer SET search_path = resolver;
-- A login of your own that is granted one of these roles (e.g. your platform's executor login,
-- `GRANT resolver_executor TO platform_app`) does not get this search_path: set it for that
-- login too, or call the functions schema-qualified (docs/executor-protocol.md, "Your login").

-- Belt and braces for the evidence reader: even a privilege granted by mistake cannot write.
ALTER ROLE resolver_evidence_reader SET default_transaction_read_only = on;

-- The API's own role: the manual-resolution API and console log in as resolver_api, never as
-- the replicas' resolver_runtime, so neither face holds the other's writes (the replicas
-- cannot record a human decision, the API cannot settle a dispatch automatically). It reads
-- cases and records decisions only through resolver_commit_manual and
-- resolver_proposal_close (resolver/db/grants.sql). Upgrading an installation that ran an
-- earlier roles.sql: run this file again before `resolver migrate --grants`.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'resolver_api') THEN
        CREATE ROLE resolver_api LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA resolver TO resolver_api;
ALTER ROLE resolver_api SET search_path = resolver;

-- The runtime that issued an action follows its outcomes (docs/outcomes.md): EXECUTE on the
-- outcome feed's reads, nothing else. A login of this role (or one granted it) reads only the
-- projects that recovery_outcome_reader_scopes lists for it; the executor role reads every
-- project. Upgrading an installation that ran an earlier roles.sql: run this file again before
-- `resolver migrate --grants`.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'resolver_outcome_reader') THEN
        CREATE ROLE resolver_outcome_reader LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA resolver TO resolver_outcome_reader;
ALTER ROLE resolver_outcome_reader SET search_path = resolver;
