-- The protocol in the fewest transactions it allows, psql alone (docs/executor-protocol.md,
-- "Two transactions"): the dispatch, its lease and the start barrier commit together; then
-- the mutation, its receipt and the completion commit together, so no crash can fall between
-- the receipt and the terminal state. A refusal in either rolls back all of it.
--     psql ... -v run=<prefix> -v kid=<kid> -v secret=<hex> -f 04_two_transactions.sql
\ir lib.sql
CREATE TABLE IF NOT EXISTS psql_mutations (dispatch_id text PRIMARY KEY, done_at_ms bigint);
\set f :run '-f'
\set g :run '-g'

-- 1. the dispatch, its lease and the barrier: one transaction (the side effect may begin
--    once its COMMIT has returned).
BEGIN;
SELECT created FROM resolver_dispatch_create_v2(:'f', 'ar-' || :'f', 'proj-psql', 'proto.internal',
    encode(sha256(convert_to(:'f', 'UTF8')), 'hex'), 'idem-' || :'f') \gset
SELECT owner, token, version FROM resolver_execution_lease(:'f', 'psql-executor', 30000) \gset
SELECT version FROM resolver_execution_start(:'f', :'owner', :'token', :version, 30000) \gset
COMMIT;
SELECT pg_temp.expect(state || ' ' || c.status, 'executing armed', 'the barrier committed')
FROM approved_action_executions JOIN approved_action_recovery_controls AS c USING (dispatch_id)
WHERE dispatch_id = :'f';

-- 2. the mutation, its receipt and the completion: one transaction.
BEGIN;
SELECT * FROM resolver_receipt_identity(:'f', :'owner', :'token', :version) \gset
INSERT INTO psql_mutations VALUES (:'f', resolver_now_ms(NULL));
SELECT pg_temp.signed_receipt(:'f', :'owner', :'token', :version, 'succeeded', 'applied',
                              'rcpt-' || :'f', :'kid', :'secret') AS receipt \gset
SELECT written_at_ms FROM resolver_receipt_write(:'f', :'owner', :'token', :version,
    :'receipt') \gset
SELECT result FROM resolver_execution_complete(:'f', :'owner', :'token', :version,
    'succeeded', 'applied', 'm-' || :'f',
    encode(sha256(convert_to(pg_temp.canonical(:'receipt'::jsonb), 'UTF8')), 'hex')) \gset
COMMIT;
SELECT pg_temp.expect(:'result', 'committed', 'the completion committed with the receipt');
SELECT pg_temp.expect(e.state || ' ' || c.status || ' ' || c.closed_by
                      || ' ' || (e.xmin::text = r.xmin::text),
                      'succeeded resolved completion true',
                      'mutation, receipt and terminal state are one transaction')
FROM approved_action_executions AS e
JOIN approved_action_recovery_controls AS c USING (dispatch_id)
JOIN action_receipts AS r USING (dispatch_id)
WHERE e.dispatch_id = :'f';

-- A refused completion (here with a stale version) rolls back the mutation and the receipt.
BEGIN;
SELECT created FROM resolver_dispatch_create_v2(:'g', 'ar-' || :'g', 'proj-psql', 'proto.internal',
    encode(sha256(convert_to(:'g', 'UTF8')), 'hex'), 'idem-' || :'g') \gset
SELECT owner AS g_owner, token AS g_token, version AS g_leased
FROM resolver_execution_lease(:'g', 'psql-executor', 30000) \gset
SELECT version AS g_version FROM resolver_execution_start(:'g', :'g_owner', :'g_token',
    :g_leased, 30000) \gset
COMMIT;
BEGIN;
INSERT INTO psql_mutations VALUES (:'g', resolver_now_ms(NULL));
SELECT written_at_ms FROM resolver_receipt_write(:'g', :'g_owner', :'g_token', :g_version,
    pg_temp.signed_receipt(:'g', :'g_owner', :'g_token', :g_version, 'succeeded', 'applied',
                           'rcpt-' || :'g', :'kid', :'secret')) \gset
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_complete(:'g', :'g_owner', :'g_token', :g_leased,
    'succeeded', 'applied', 'm-' || :'g');
\set ON_ERROR_STOP 1
\set failed :ERROR
ROLLBACK;
SELECT pg_temp.refused(:'failed', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS001',
    'fence', 'a completion with a stale version');
SELECT pg_temp.expect(
    (SELECT count(*) FROM psql_mutations WHERE dispatch_id = :'g')
    || ' ' || (SELECT count(*) FROM action_receipts WHERE dispatch_id = :'g')
    || ' ' || (SELECT state FROM approved_action_executions WHERE dispatch_id = :'g'),
    '0 0 executing', 'the refused completion rolled back the mutation and its receipt');

\echo two transactions: all checks passed
