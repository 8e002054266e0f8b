-- After a real `resolver run` pass: c was resolved from its receipt, d is still armed
-- (`missing`), e (alive) was never touched. Then the executors' late calls:
--   c: late completion that replays the resolution exactly -> replayed; drift -> RS001.
--   d: the executor was alive after all: renew re-arms, complete commits.
--     psql ... -v run=<prefix> -f 03_after_recovery.sql
\ir lib.sql
\set c :run '-c'
\set d :run '-d'
\set e :run '-e'
SELECT owner AS c_owner, token AS c_token, version AS c_version
FROM psql_executor_leases WHERE dispatch_id = :'c' \gset
SELECT owner AS d_owner, token AS d_token, version AS d_version
FROM psql_executor_leases WHERE dispatch_id = :'d' \gset
SELECT owner AS e_owner, token AS e_token, version AS e_version
FROM psql_executor_leases WHERE dispatch_id = :'e' \gset

SELECT pg_temp.expect(e.state || ' ' || c.status || ' ' || c.closed_by || ' ' || r.source,
                      'succeeded resolved automatic automatic', 'c resolved from its receipt')
FROM approved_action_executions AS e
JOIN approved_action_recovery_controls AS c USING (dispatch_id)
JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
WHERE dispatch_id = :'c';
SELECT pg_temp.expect(e.state || ' ' || c.status || ' ' || c.last_finding,
                      'executing armed missing', 'd had no evidence: still waiting')
FROM approved_action_executions AS e
JOIN approved_action_recovery_controls AS c USING (dispatch_id) WHERE dispatch_id = :'d';
SELECT pg_temp.expect(e.state || ' ' || c.recovery_version || ' ' || coalesce(c.last_finding, '-'),
                      'executing 0 -', 'e (a live lease) was never claimed')
FROM approved_action_executions AS e
JOIN approved_action_recovery_controls AS c USING (dispatch_id) WHERE dispatch_id = :'e';

-- c: the late completion carries the digest of the receipt it wrote (sha256 of canonical
-- JSON), the same evidence the resolution recorded, so it is the same fact.
SELECT encode(sha256(convert_to(pg_temp.canonical(receipt), 'UTF8')), 'hex') AS c_digest
FROM action_receipts WHERE dispatch_id = :'c' \gset
SELECT result FROM resolver_execution_complete(:'c', :'c_owner', :'c_token', :c_version,
    'succeeded', 'applied', 'late-' || :'c', :'c_digest') \gset
SELECT pg_temp.expect(:'result', 'replayed', 'a late completion replaying the resolution');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_complete(:'c', :'c_owner', :'c_token', :c_version,
    'failed', 'declined', 'late-' || :'c', :'c_digest');
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS001',
    'by an automatic resolution', 'a late completion that drifts from the resolution');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_renew(:'c', :'c_owner', :'c_token', :c_version, 30000);
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS001',
    'now succeeded', 'a renew after the resolution');

-- d: alive after all. Renew revokes any recovery lease and pushes the scan; complete wins.
SELECT version AS d_renewed, lease_expires_at_ms AS d_expiry FROM resolver_execution_renew(
    :'d', :'d_owner', :'d_token', :d_version, 30000) \gset
SELECT pg_temp.expect(status || ' ' || (next_scan_at_ms = :d_expiry) || ' '
                      || (recovery_token IS NULL), 'armed true true', 'renew pushed the scan')
FROM approved_action_recovery_controls WHERE dispatch_id = :'d';
SELECT result FROM resolver_execution_complete(:'d', :'d_owner', :'d_token', :d_renewed,
    'failed', 'declined', 'm-' || :'d') \gset
SELECT pg_temp.expect(:'result', 'committed', 'the live executor of d completes');

-- e: completes normally.
SELECT result FROM resolver_execution_complete(:'e', :'e_owner', :'e_token', :e_version,
    'succeeded', 'ok', 'm-' || :'e') \gset
SELECT pg_temp.expect(:'result', 'committed', 'e completes');
SELECT pg_temp.expect(count(*)::text, '1', 'one resolution in all (c)')
FROM approved_action_recovery_resolutions WHERE dispatch_id IN (:'c', :'d', :'e');
\echo 'after recovery: all checks passed'
