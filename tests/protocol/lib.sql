-- Helpers of the psql-only protocol test (session-local, in pg_temp): assertions, waiting on
-- the database clock, and receipt v1 signing (canonical JSON + HMAC-SHA256) in plain SQL.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset tuples_only on
\pset format unaligned

-- Fails the script (psql exits 3 under ON_ERROR_STOP) unless got = want; prints the check.
CREATE FUNCTION pg_temp.expect(got text, want text, what text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF got IS DISTINCT FROM want THEN
        RAISE EXCEPTION 'FAILED %: expected %, got %', what, want, coalesce(got, 'NULL');
    END IF;
    RETURN 'ok ' || what || ': ' || coalesce(got, 'NULL');
END
$$;

-- Waits (bounded) until the database clock has passed `until_ms`: leases end by time alone.
CREATE FUNCTION pg_temp.wait_past(until_ms bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    polls integer := 0;
BEGIN
    WHILE resolver_now_ms(NULL) <= until_ms LOOP
        polls := polls + 1;
        IF polls > 10000 THEN
            RAISE EXCEPTION 'FAILED: the database clock did not pass %', until_ms;
        END IF;
        PERFORM pg_sleep(0.005);
    END LOOP;
    RETURN 'ok clock past lease end';
END
$$;

-- Canonical JSON of receipt v1: keys sorted by code point, `,` and `:`, no whitespace.
-- (Receipt values are strings and integers, whose jsonb text form is already canonical.)
CREATE FUNCTION pg_temp.canonical(doc jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT '{' || string_agg(to_json(key)::text || ':' || value::text, ',' ORDER BY key COLLATE "C")
           || '}'
    FROM jsonb_each(doc)
$$;

-- HMAC-SHA256 (RFC 2104) with the built-in sha256(): no extension needed (keys up to 64 bytes).
CREATE FUNCTION pg_temp.hmac_sha256(key bytea, message bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    block bytea := key || decode(repeat('00', 64 - length(key)), 'hex');
    inner_pad bytea := block;
    outer_pad bytea := block;
    i integer;
BEGIN
    FOR i IN 0..63 LOOP
        inner_pad := set_byte(inner_pad, i, get_byte(block, i) # 54);
        outer_pad := set_byte(outer_pad, i, get_byte(block, i) # 92);
    END LOOP;
    RETURN encode(sha256(outer_pad || sha256(inner_pad || message)), 'hex');
END
$$;

-- Signs receipt v1 for an executing lease; the identity comes from resolver_receipt_identity
-- (which also locks the execution FOR SHARE until the caller's transaction ends).
CREATE FUNCTION pg_temp.signed_receipt(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_outcome text,
    p_result_code text, p_receipt_id text, p_kid text, p_secret_hex text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    i record;
    body jsonb;
BEGIN
    SELECT * INTO i FROM resolver_receipt_identity(p_dispatch_id, p_owner, p_token, p_version);
    body := jsonb_build_object(
        'v', 1, 'dispatch_id', i.dispatch_id, 'approval_request_id', i.approval_request_id,
        'project_id', i.project_id, 'action_type', i.action_type,
        'action_digest', i.action_digest, 'attempt', i.attempt,
        'started_at_ms', i.started_at_ms, 'idempotency_key', i.idempotency_key,
        'outcome', p_outcome, 'result_code', p_result_code, 'finished_at_ms', i.db_now_ms,
        'receipt_identity_digest', encode(sha256(convert_to(p_receipt_id, 'UTF8')), 'hex'),
        'kid', p_kid);
    RETURN body || jsonb_build_object('sig', pg_temp.hmac_sha256(
        decode(p_secret_hex, 'hex'), convert_to(pg_temp.canonical(body), 'UTF8')));
END
$$;

-- Checks the refusal psql just printed: the query failed with this SQLSTATE, and its message
-- names the fence. Call right after the refused statement (ON_ERROR_STOP is off around it).
CREATE FUNCTION pg_temp.refused(failed text, sqlstate text, message text, want_state text,
                                want_fragment text, what text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    IF failed IS DISTINCT FROM 'true' OR sqlstate IS DISTINCT FROM want_state
       OR position(want_fragment IN message) = 0 THEN
        RAISE EXCEPTION 'FAILED %: expected % naming "%", got failed=% % "%"',
            what, want_state, want_fragment, failed, sqlstate, message;
    END IF;
    RETURN 'ok refused ' || what || ': ' || sqlstate || ' ' || message;
END
$$;
\set QUIET 0
