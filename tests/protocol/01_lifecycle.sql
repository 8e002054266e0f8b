-- The executor protocol end to end, psql alone: create, lease, start, renew, complete,
-- replay, and every refusal with its SQLSTATE. Run as:
--     psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -v run=<unique prefix> -f 01_lifecycle.sql
\ir lib.sql
\set a :run '-a'
\set b :run '-b'

-- create: recorded once; an exact re-create is the same fact; a changed identity is refused.
SELECT created FROM resolver_dispatch_create_v2(:'a', 'ar-' || :'a', 'proj-psql', 'proto.plain',
    encode(sha256(convert_to(:'a', 'UTF8')), 'hex'), 'idem-' || :'a') \gset
SELECT pg_temp.expect(:'created', 't', 'create records the dispatch');
SELECT created FROM resolver_dispatch_create_v2(:'a', 'ar-' || :'a', 'proj-psql', 'proto.plain',
    encode(sha256(convert_to(:'a', 'UTF8')), 'hex'), 'idem-' || :'a') \gset
SELECT pg_temp.expect(:'created', 'f', 'an exact re-create is idempotent');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_dispatch_create_v2(:'a', 'ar-' || :'a', 'proj-other', 'proto.plain',
    encode(sha256(convert_to(:'a', 'UTF8')), 'hex'), 'idem-' || :'a');
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS005',
    'different identity', 'create with a different identity');

-- lease: a live lease cannot be taken; an unknown dispatch is not found.
SELECT owner, token, version, attempt FROM resolver_execution_lease(:'a', 'psql-executor', 30000) \gset
SELECT pg_temp.expect(:'attempt', '1', 'first lease is attempt 1');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_lease(:'a', 'another-executor', 30000);
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS003',
    'is leased by', 'lease of a live lease');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_lease(:'run' || '-nothing', 'psql-executor', 30000);
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS004',
    'does not exist', 'lease of an unknown dispatch');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_lease(:'a', 'psql-executor', 0);
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS005',
    'p_lease_ms', 'lease for 0 ms');

-- start: the barrier; a second start with the old fence is refused.
SELECT state, version AS started_version FROM resolver_execution_start(
    :'a', :'owner', :'token', :version, 30000) \gset
SELECT pg_temp.expect(:'state', 'executing', 'start crosses the barrier');
SELECT pg_temp.expect(status || ' ' || execution_version, 'armed ' || :started_version,
    'start arms the control at the execution version')
FROM approved_action_recovery_controls WHERE dispatch_id = :'a';
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_start(:'a', :'owner', :'token', :version, 30000);
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS001',
    'already executing', 'second start');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_lease(:'a', 'another-executor', 30000);
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS003',
    'past the start barrier', 'lease past the barrier');

-- renew: version bump, control in step; the old fence no longer renews or completes.
SELECT version AS renewed_version, controls_rearmed FROM resolver_execution_renew(
    :'a', :'owner', :'token', :started_version, 30000) \gset
SELECT pg_temp.expect(:'controls_rearmed', '0', 'renew of an armed control re-arms nothing');
SELECT pg_temp.expect(execution_version::text, :'renewed_version', 'control follows the renew')
FROM approved_action_recovery_controls WHERE dispatch_id = :'a';
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_renew(:'a', :'owner', :'token', :started_version, 30000);
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS001',
    'version/state fence', 'renew with a stale version');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_renew(:'a', 'intruder', :'token', :renewed_version, 30000);
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS001',
    'owner/token fence', 'renew by another owner');

-- complete: committed once, an exact replay is idempotent, drift is refused.
SELECT result FROM resolver_execution_complete(:'a', :'owner', :'token', :renewed_version,
    'succeeded', 'ok', 'm-' || :'a') \gset
SELECT pg_temp.expect(:'result', 'committed', 'complete commits');
SELECT pg_temp.expect(status || ' ' || closed_by, 'resolved completion', 'complete closes the control')
FROM approved_action_recovery_controls WHERE dispatch_id = :'a';
SELECT result FROM resolver_execution_complete(:'a', :'owner', :'token', :renewed_version,
    'succeeded', 'ok', 'm-' || :'a') \gset
SELECT pg_temp.expect(:'result', 'replayed', 'an exact replay is idempotent');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_complete(:'a', :'owner', :'token', :renewed_version,
    'failed', 'ok', 'm-' || :'a');
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS001',
    'drifts', 'a drifted completion');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_complete(:'a', :'owner', :'token', :renewed_version,
    'blocked', 'ok', 'm-' || :'a');
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS005',
    'p_outcome', 'an outcome an executor may not report');

-- Even the table owner cannot rewrite a terminal execution by hand.
\set ON_ERROR_STOP 0
UPDATE approved_action_executions SET result_code = 'forged' WHERE dispatch_id = :'a';
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS006',
    'a terminal execution never changes', 'a hand-written UPDATE of a terminal execution');

-- A lease that lapses before the barrier: start is lease lost; after a takeover, so is the
-- old holder's start.
SELECT * FROM resolver_dispatch_create_v2(:'b', 'ar-' || :'b', 'proj-psql', 'proto.plain',
    encode(sha256(convert_to(:'b', 'UTF8')), 'hex'), 'idem-' || :'b') \g /dev/null
SELECT token AS b_token, version AS b_version, lease_expires_at_ms AS b_expiry
FROM resolver_execution_lease(:'b', 'psql-executor', 1) \gset
SELECT pg_temp.wait_past(:b_expiry);
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_start(:'b', 'psql-executor', :'b_token', :b_version, 30000);
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS002',
    'expired before the start barrier', 'start after the lease lapsed');
SELECT attempt AS b_attempt FROM resolver_execution_lease(:'b', 'second-executor', 30000) \gset
SELECT pg_temp.expect(:'b_attempt', '2', 'an expired leased execution is taken over');
\set ON_ERROR_STOP 0
SELECT * FROM resolver_execution_start(:'b', 'psql-executor', :'b_token', :b_version, 30000);
\set ON_ERROR_STOP 1
SELECT pg_temp.refused(:'ERROR', :'LAST_ERROR_SQLSTATE', :'LAST_ERROR_MESSAGE', 'RS002',
    'taken over (attempt 2)', 'start by the holder that was taken over');
\echo 'lifecycle: all checks passed'
