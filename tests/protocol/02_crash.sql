-- Three executions cross the barrier and their executor "crashes" (never completes):
--   :run-c  did its internal mutation and wrote a signed receipt in the same transaction;
--   :run-d  crashed before its mutation (no receipt: recovery finds `missing`);
--   :run-e  is alive (a long lease): recovery must never claim it.
-- The executor's leases are kept in psql_executor_leases for 03 (its memory, not protocol).
--     psql ... -v run=<prefix> -v kid=<kid> -v secret=<hex> -f 02_crash.sql
\ir lib.sql
CREATE TABLE IF NOT EXISTS psql_executor_leases (
    dispatch_id text PRIMARY KEY, owner text, token uuid, version bigint, expires bigint);
CREATE TABLE IF NOT EXISTS psql_mutations (dispatch_id text PRIMARY KEY, done_at_ms bigint);

SELECT string_agg(format('%s', x), ' ') AS created FROM (
    SELECT (resolver_dispatch_create_v2(id, 'ar-' || id, 'proj-psql', 'proto.internal',
            encode(sha256(convert_to(id, 'UTF8')), 'hex'), 'idem-' || id)).created AS x
    FROM unnest(ARRAY[:'run' || '-c', :'run' || '-d', :'run' || '-e']) AS id) AS s \gset
SELECT pg_temp.expect(:'created', 't t t', 'three dispatches created');

-- lease + start each; c and d with a short execution lease (they are about to crash).
INSERT INTO psql_executor_leases
SELECT s.dispatch_id, s.owner, s.token, s.version, s.lease_expires_at_ms
FROM unnest(ARRAY[:'run' || '-c', :'run' || '-d', :'run' || '-e'],
            ARRAY[300, 300, 3600000]) AS w(id, ms),
     LATERAL resolver_execution_lease(w.id, 'psql-executor', 30000) AS l,
     LATERAL resolver_execution_start(l.dispatch_id, l.owner, l.token, l.version, w.ms) AS s;
SELECT pg_temp.expect(count(*)::text, '3', 'three executions past the barrier')
FROM approved_action_recovery_controls AS c JOIN psql_executor_leases USING (dispatch_id)
WHERE c.status = 'armed';

-- c: the mutation and its receipt commit together (or not at all).
BEGIN;
SELECT dispatch_id AS c, owner AS c_owner, token AS c_token, version AS c_version
FROM psql_executor_leases WHERE dispatch_id = :'run' || '-c' \gset
INSERT INTO psql_mutations VALUES (:'c', resolver_now_ms(NULL));
SELECT written_at_ms FROM resolver_receipt_write(:'c', :'c_owner', :'c_token', :c_version,
    pg_temp.signed_receipt(:'c', :'c_owner', :'c_token', :c_version, 'succeeded', 'applied',
                           'rcpt-' || :'c', :'kid', :'secret')) \gset
COMMIT;
SELECT pg_temp.expect(count(*)::text, '1', 'the receipt committed with the mutation')
FROM action_receipts WHERE dispatch_id = :'c';

-- A receipt that names another execution is refused, and the mutation rolls back with it.
BEGIN;
INSERT INTO psql_mutations VALUES (:'run' || '-d', resolver_now_ms(NULL));
\set ON_ERROR_STOP 0
SELECT * FROM resolver_receipt_write(:'run' || '-d', 'psql-executor',
    (SELECT token FROM psql_executor_leases WHERE dispatch_id = :'run' || '-d'),
    (SELECT version FROM psql_executor_leases WHERE dispatch_id = :'run' || '-d'),
    pg_temp.signed_receipt(:'c', :'c_owner', :'c_token', :c_version, 'succeeded', 'applied',
                           'rcpt-x', :'kid', :'secret'));
\set ON_ERROR_STOP 1
\set failed :ERROR
ROLLBACK;
SELECT pg_temp.refused(:'failed', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS005',
    'does not match dispatch', 'a receipt bound to another dispatch');
SELECT pg_temp.expect(count(*)::text, '0', 'the refused mutation rolled back')
FROM psql_mutations WHERE dispatch_id = :'run' || '-d';

-- The crash: nobody completes c or d. Wait (on the database clock) until their leases lapse.
SELECT max(expires) AS crashed_until FROM psql_executor_leases
WHERE dispatch_id IN (:'run' || '-c', :'run' || '-d') \gset
SELECT pg_temp.wait_past(:crashed_until);
\echo 'crash: all checks passed'
