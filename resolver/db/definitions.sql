-- The steps `resolver migrate` takes around the table migrations to apply the schema's
-- functions and triggers (resolver/db/definitions.py says when each runs and why). They read the
-- catalog, so the same text works online and in the script `resolver migrate --sql` prints.
-- The resolver's functions are those of the migrated schema named resolver_…; its triggers are
-- those that call one of them.

-- name: bookkeeping
-- The definitions applied (or found) at each table revision: what a downgrade to that revision
-- restores. `checksum` is that of the definition files applied; NULL when captured from the
-- catalog of a release that kept no record (0.1.0). Only the schema owner reads it.
CREATE TABLE IF NOT EXISTS resolver_definitions (
    revision TEXT NOT NULL,
    checksum TEXT,
    script TEXT NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT pk_resolver_definitions PRIMARY KEY (revision)
);

-- name: recorded_checksum
SELECT checksum FROM resolver_definitions WHERE revision = %(revision)s;

-- name: capture
-- Before this release replaces them, the definitions a database has at its revision, as a
-- script that re-creates them: functions, triggers, comments and the privileges on functions.
-- Kept only when nothing is recorded for that revision yet (a release that kept no record).
INSERT INTO resolver_definitions (revision, checksum, script)
SELECT v.version_num, NULL, coalesce(string_agg(d.definition, E'\n' ORDER BY d.part, d.name), '')
FROM alembic_version AS v
CROSS JOIN LATERAL (
    SELECT 1 AS part, p.oid::regprocedure::text AS name,
           pg_get_functiondef(p.oid) || ';' AS definition
    FROM pg_proc AS p
    WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'resolver\_%'
    UNION ALL
    SELECT 2, p.oid::regprocedure::text,
           format('COMMENT ON FUNCTION %s IS %L;', p.oid::regprocedure,
                  obj_description(p.oid, 'pg_proc'))
    FROM pg_proc AS p
    WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'resolver\_%'
      AND obj_description(p.oid, 'pg_proc') IS NOT NULL
    UNION ALL
    SELECT 3, p.oid::regprocedure::text,
           format('REVOKE ALL ON FUNCTION %s FROM PUBLIC;', p.oid::regprocedure)
    FROM pg_proc AS p
    WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'resolver\_%'
      AND p.proacl IS NOT NULL
      AND NOT EXISTS (SELECT FROM aclexplode(p.proacl) AS a WHERE a.grantee = 0)
    UNION ALL
    SELECT 4, p.oid::regprocedure::text || a.grantee::regrole::text,
           format('GRANT %s ON FUNCTION %s TO %I%s;', a.privilege_type, p.oid::regprocedure,
                  a.grantee::regrole::text,
                  CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
    FROM pg_proc AS p
    CROSS JOIN LATERAL aclexplode(p.proacl) AS a
    WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'resolver\_%'
      AND a.grantee <> 0 AND a.grantee <> p.proowner
    UNION ALL
    SELECT 5, c.relname || '.' || t.tgname, pg_get_triggerdef(t.oid) || ';'
    FROM pg_trigger AS t
    JOIN pg_class AS c ON c.oid = t.tgrelid
    JOIN pg_proc AS p ON p.oid = t.tgfoid
    WHERE NOT t.tgisinternal
      AND p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'resolver\_%'
) AS d
GROUP BY v.version_num
ON CONFLICT (revision) DO NOTHING;

-- name: script_guard_empty
-- The first statement of a script `resolver migrate --sql` prints to build an empty schema: it
-- refuses a database that has one, before anything changes.
DO $guard$
BEGIN
    IF to_regclass('alembic_version') IS NOT NULL THEN
        RAISE EXCEPTION 'this script builds an empty schema; the database is at revision %%: print one with resolver migrate --sql --from %%',
            (SELECT version_num FROM alembic_version), (SELECT version_num FROM alembic_version);
    END IF;
END
$guard$;

-- name: script_guard_at
-- The first statement of a script printed `--from` a revision: it refuses a database at any
-- other, before anything changes (`ids`: the revision and an earlier release's id of it).
DO $guard$
BEGIN
    IF to_regclass('alembic_version') IS NULL THEN
        RAISE EXCEPTION 'this script upgrades a database at revision %%; this one has no schema yet: print one without --from',
            %(revision)s;
    END IF;
    IF NOT EXISTS (SELECT FROM alembic_version WHERE version_num = ANY (%(ids)s)) THEN
        RAISE EXCEPTION 'this script upgrades a database at revision %%; this one is at %%',
            %(revision)s, (SELECT version_num FROM alembic_version);
    END IF;
END
$guard$;

-- name: clear
-- Every trigger that calls a resolver function goes, then every resolver function nothing but a
-- trigger depended on; a function a check constraint calls stays (a definition replaces it in
-- place). The privileges on each function are kept aside first, in a table that lives as long
-- as the transaction, so each function defined again under the same signature gets them back
-- (restore_privileges): a replica's role never loses a grant between two commits, and a
-- function grants.sql closed to PUBLIC is never open to it in between. Bodies are not checked
-- until called: a function may name a table a migration of this same transaction creates.
SET LOCAL check_function_bodies = off;
CREATE TEMPORARY TABLE IF NOT EXISTS resolver_function_privileges (
    identity TEXT NOT NULL, acl aclitem[] NOT NULL
) ON COMMIT DROP;
INSERT INTO resolver_function_privileges
SELECT p.oid::regprocedure::text, p.proacl
FROM pg_proc AS p
WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'resolver\_%'
  AND p.proacl IS NOT NULL;
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT t.tgname, t.tgrelid::regclass AS tbl
        FROM pg_trigger AS t
        JOIN pg_proc AS p ON p.oid = t.tgfoid
        WHERE NOT t.tgisinternal
          AND p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'resolver\_%'
    LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', r.tgname, r.tbl);
    END LOOP;
    FOR r IN
        SELECT p.oid::regprocedure AS fn
        FROM pg_proc AS p
        WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'resolver\_%'
          AND NOT EXISTS (
              SELECT FROM pg_depend AS d
              WHERE d.refclassid = 'pg_proc'::regclass AND d.refobjid = p.oid AND d.deptype = 'n')
    LOOP
        EXECUTE format('DROP FUNCTION %s', r.fn);
    END LOOP;
END
$$;

-- name: restore_privileges
-- The privileges kept aside by `clear`, back on every function defined again with the same
-- signature: each role's grant, and PUBLIC's absence where it had none (never PUBLIC's
-- presence: whether everybody may call a function is for its definition or grants.sql to say),
-- unless the definition just applied grants PUBLIC in so many words: a function a release
-- opens is open on a database upgraded from one that had it closed, as on a new one.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT k.identity
        FROM resolver_function_privileges AS k
        WHERE to_regprocedure(k.identity) IS NOT NULL
          AND NOT EXISTS (SELECT FROM aclexplode(k.acl) AS a WHERE a.grantee = 0)
          AND NOT EXISTS (
              SELECT FROM pg_proc AS p CROSS JOIN LATERAL aclexplode(p.proacl) AS a
              WHERE p.oid = to_regprocedure(k.identity) AND a.grantee = 0)
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', r.identity);
    END LOOP;
    FOR r IN
        SELECT DISTINCT k.identity, a.grantee, a.privilege_type, a.is_grantable
        FROM resolver_function_privileges AS k
        CROSS JOIN LATERAL aclexplode(k.acl) AS a
        WHERE to_regprocedure(k.identity) IS NOT NULL
          AND a.grantee <> 0 AND a.grantee <> a.grantor
          AND EXISTS (SELECT FROM pg_roles WHERE oid = a.grantee)
    LOOP
        EXECUTE format('GRANT %s ON FUNCTION %s TO %I%s', r.privilege_type, r.identity,
                       r.grantee::regrole::text,
                       CASE WHEN r.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;

-- name: record
-- What this release applied at its revision: a downgrade to it restores exactly this.
INSERT INTO resolver_definitions (revision, checksum, script)
VALUES (%(revision)s, %(checksum)s, %(script)s)
ON CONFLICT (revision) DO UPDATE
SET checksum = EXCLUDED.checksum, script = EXCLUDED.script, recorded_at = clock_timestamp();

-- name: recorded_script
SELECT script FROM resolver_definitions WHERE revision = %(revision)s;

-- name: forget
-- At base nothing is left to restore.
DROP TABLE IF EXISTS resolver_definitions;
