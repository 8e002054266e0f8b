-- The domain's sets, the database clock and identifier shape, and the insert-only trigger of
-- every fact table.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

-- The domain's sets, each spelled once here and once in resolver/core/domain/sets.py
-- (tests/integration/schema/test_domain_sets.py compares the two). Every check, trigger
-- condition and function reads them from these functions. All are IMMUTABLE: the planner
-- folds a set (no arguments) to its value once per statement, and inlines a mapping (SQL,
-- one expression) into the expression that calls it, so a check or a trigger's WHEN costs
-- per row what the spelled-out list cost. The sets are plpgsql because the planner folds
-- them by calling them: a plpgsql function is compiled once per session, where a SQL one is
-- parsed and planned again at every fold (once per statement and check).

-- The states an execution never leaves once it reaches one.
CREATE OR REPLACE FUNCTION resolver_terminal_states() RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN ARRAY['succeeded', 'failed', 'blocked'];
END
$$;

-- Every finding kind a provider may report.
CREATE OR REPLACE FUNCTION resolver_finding_kinds() RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN ARRAY['verified_succeeded', 'verified_failed', 'still_running', 'missing',
                 'conflict', 'unsupported', 'unavailable'];
END
$$;

-- The terminal state verified evidence settles an execution as; NULL for a finding that
-- verifies nothing.
CREATE OR REPLACE FUNCTION resolver_finding_outcome(p_finding text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_finding WHEN 'verified_succeeded' THEN 'succeeded'
                          WHEN 'verified_failed' THEN 'failed' END
$$;

-- The terminal state each human decision settles an execution as; NULL for anything that is
-- not a decision.
CREATE OR REPLACE FUNCTION resolver_decision_settles(p_decision text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_decision WHEN 'confirm_succeeded' THEN 'succeeded'
                           WHEN 'confirm_failed' THEN 'failed'
                           WHEN 'abandon_unknown' THEN 'blocked' END
$$;

-- What was approved, for people: the optional summary an executor gives at
-- dispatch creation, {"title": ..., "facts": [{"label": ..., "value": ...}]}. Bounded and
-- low-sensitivity by rule: at most 2048 bytes as JSON, a 1-120 character title, at most 8
-- facts of a 1-40 character label and a 1-200 character value; no control, zero-width or
-- direction-override character; no label that names a secret and no value shaped like one
-- (a PEM block, an HTTP credential, a JWT, credentials in a URL, or 32 and more characters
-- of a key alphabet without a break: a token, a key or a digest; the action's digest has its
-- own field). No rule reads it. The answer is why a summary is refused, NULL when it is not.
-- STRICT: no summary (nearly every dispatch) is no problem, answered without a call, in the
-- table's CHECK and in resolver_dispatch_create_v2 alike.
CREATE OR REPLACE FUNCTION resolver_action_summary_problem(p_summary jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    fact jsonb;
    part text;
BEGIN
    IF jsonb_typeof(p_summary) <> 'object' THEN
        RETURN 'must be a JSON object';
    END IF;
    IF octet_length(p_summary::text) > 2048 THEN
        RETURN 'must be at most 2048 bytes as JSON';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(p_summary) AS k WHERE k NOT IN ('title', 'facts')) THEN
        RETURN 'takes the keys title and facts only';
    END IF;
    IF jsonb_typeof(p_summary -> 'title') IS DISTINCT FROM 'string'
       OR char_length(p_summary ->> 'title') NOT BETWEEN 1 AND 120 THEN
        RETURN 'title must be a string of 1-120 characters';
    END IF;
    IF p_summary ? 'facts' AND (jsonb_typeof(p_summary -> 'facts') <> 'array'
                               OR jsonb_array_length(p_summary -> 'facts') > 8) THEN
        RETURN 'facts must be an array of at most 8 facts';
    END IF;
    FOR fact IN SELECT f FROM jsonb_array_elements(coalesce(p_summary -> 'facts', '[]')) AS f LOOP
        IF jsonb_typeof(fact) <> 'object' THEN
            RETURN 'each fact must be an object {"label": ..., "value": ...}';
        END IF;
        IF (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(fact) AS k)
               IS DISTINCT FROM ARRAY['label', 'value']
           OR jsonb_typeof(fact -> 'label') <> 'string' OR jsonb_typeof(fact -> 'value') <> 'string'
           OR char_length(fact ->> 'label') NOT BETWEEN 1 AND 40
           OR char_length(fact ->> 'value') NOT BETWEEN 1 AND 200 THEN
            RETURN 'each fact must be {"label": 1-40 characters, "value": 1-200 characters}';
        END IF;
        IF (fact ->> 'label') ~* '(passw|secret|token|api.?key|private.?key|credential|authori[sz]ation|cookie)' THEN
            RETURN 'a fact''s label names a secret: secrets never go in the summary';
        END IF;
    END LOOP;
    FOR part IN
        SELECT p_summary ->> 'title'
        UNION ALL
        SELECT x FROM jsonb_array_elements(coalesce(p_summary -> 'facts', '[]')) AS f,
                      LATERAL (VALUES (f ->> 'label'), (f ->> 'value')) AS v(x)
    LOOP
        IF part ~ '[[:cntrl:]\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]' THEN
            RETURN 'takes no control, zero-width or direction-override character';
        END IF;
        IF part ~* '(-----BEGIN|^(bearer|basic)\s|eyJ[A-Za-z0-9_-]+\.|://[^/@\s]*:[^/@\s]*@|[A-Za-z0-9+/=_]{32})' THEN
            RETURN 'a value looks like a secret or a digest (a key, token, credential or 32+ character code): never put one in the summary';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
-- EXECUTE stays with PUBLIC: it reads nothing, and the table's CHECK calls it as whoever
-- inserts a dispatch.

-- The one clock every lease and due-time comparison uses. The override exists for tests
-- only; production passes NULL and gets the database's clock, never a replica's.
CREATE OR REPLACE FUNCTION resolver_now_ms(override_ms bigint) RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE AS
$$ SELECT COALESCE(override_ms, (extract(epoch from clock_timestamp()) * 1000)::bigint) $$;

-- The one shape of an identifier (dispatch, approval request, project, idempotency key,
-- mutation): 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric. The Python side
-- checks the same pattern, resolver.core.domain.ID_REGEX (test_schema_files.py proves the two
-- agree).
-- Each shape below is a length and character classes, never a bounded repetition
-- (`{0,127}`), which PostgreSQL's regex engine unrolls: 17 µs a call against 1.3 for an id.
CREATE OR REPLACE FUNCTION resolver_is_id(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT resolver_is_identifier(p_value, 128)
$$;

-- The identifier's character rule at a given length, for the shapes that share it (an id, a
-- key id). A one-expression SQL function: the planner inlines it, and whatever inlines it.
CREATE OR REPLACE FUNCTION resolver_is_identifier(p_value text, p_max_length integer)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT length(p_value) BETWEEN 1 AND p_max_length AND p_value ~ '^[A-Za-z0-9]'
       AND p_value !~ '[^A-Za-z0-9_.:-]'
$$;

-- An action type: `[a-z][a-z0-9_.-]{0,63}`.
CREATE OR REPLACE FUNCTION resolver_is_action_type(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT length(p_value) BETWEEN 1 AND 64 AND p_value ~ '^[a-z]'
       AND p_value !~ '[^a-z0-9_.-]'
$$;

-- A lowercase hex sha256 (an action digest, an evidence digest).
CREATE OR REPLACE FUNCTION resolver_is_sha256_hex(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT length(p_value) = 64 AND p_value !~ '[^0-9a-f]'
$$;

-- A result or reason code: `[a-z0-9_.-]{1,64}`.
CREATE OR REPLACE FUNCTION resolver_is_code(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT length(p_value) BETWEEN 1 AND 64 AND p_value !~ '[^a-z0-9_.-]'
$$;

-- A signature: 128 lowercase hex digits (an Ed25519 signature).
CREATE OR REPLACE FUNCTION resolver_is_signature_hex(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT length(p_value) = 128 AND p_value !~ '[^0-9a-f]'
$$;

-- The key id a signed fact names: an identifier of at most 64 characters.
CREATE OR REPLACE FUNCTION resolver_is_signing_kid(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT resolver_is_identifier(p_value, 64)
$$;

-- Executable by PUBLIC by default; the protocol functions run them as the owner. The digest,
-- code, signature and key id shapes are also the checks of their domains (resolver_sha256_hex,
-- resolver_code, resolver_signature_hex, resolver_signing_kid), which run as whoever writes the
-- row, as the domain sets above do: executable by everyone, stated (a database upgraded from a
-- release that had them closed opens them too), and so is the identifier's rule the key id's
-- check calls. The id shape is the check of resolver_id too, but stays closed as it always
-- was: grants.sql lets the one role that writes such a column directly, the policy writer,
-- execute it.
REVOKE EXECUTE ON FUNCTION resolver_is_id(text), resolver_is_action_type(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION resolver_is_sha256_hex(text), resolver_is_code(text),
    resolver_is_signature_hex(text), resolver_is_signing_kid(text),
    resolver_is_identifier(text, integer) TO PUBLIC;

-- The one release of a recovery lease: a new recovery_version (the fence every holder of the
-- old lease fails on) and no owner, token or expiry. Every writer that ends a recovery lease
-- (a renewal, the three commits, a graceful hand-back) assigns these four columns from here:
--   SET (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
--       = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
-- A one-SELECT SQL function: the planner inlines it.
CREATE OR REPLACE FUNCTION resolver_recovery_lease_released(p_recovery_version bigint)
RETURNS TABLE (
    recovery_version bigint, recovery_owner text, recovery_token uuid,
    recovery_lease_expires_at_ms bigint
)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_recovery_version + 1, NULL::text, NULL::uuid, NULL::bigint
$$;

-- Executable by PUBLIC by default; resolver/db/grants.sql grants it to the runtime role (the
-- protocol functions run it as the owner).
REVOKE EXECUTE ON FUNCTION resolver_recovery_lease_released(bigint) FROM PUBLIC;

-- Facts are insert-only: the database itself refuses to rewrite history. A DELETE passes only
-- inside resolver_prune_batch (07_retention.sql): the function must be on the call stack of
-- the statement, which no setting a session can change fakes. A table owner can still
-- disable the trigger (DDL, in the server log): the audit chain's head kept outside the
-- database is what notices that. Inline in each trigger: a helper function would need
-- EXECUTE for every role that fires it.
CREATE OR REPLACE FUNCTION resolver_reject_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stack text;
BEGIN
    -- Nested, so an UPDATE never evaluates the check (plpgsql does not short-circuit AND).
    IF TG_OP = 'DELETE' THEN
        GET DIAGNOSTICS stack = PG_CONTEXT;
        IF stack ~ ('(^|\n)PL/pgSQL function (' || TG_TABLE_SCHEMA
                    || '\.)?resolver_prune_batch\(') THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION '% is insert-only: % rejected', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;

-- The facts a decision records are written only by the SECURITY DEFINER functions that check
-- them (TG_ARGV names them): no role holds INSERT or UPDATE on these tables, and the table
-- owner's own hand-written statement is refused too, since the named function is not on its
-- call stack. AFTER and per statement: the row's CHECK constraints answer first, and a page
-- of 64 rows pays for one look at the stack. The owner's bulk import of history (a restore,
-- a benchmark's seed: `resolver.import_history`, 04_executor_protocol.sql) may insert; it
-- is the owner's own, explicit path, like the prune.
CREATE OR REPLACE FUNCTION resolver_guard_definer_write() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stack text;
BEGIN
    IF TG_OP = 'INSERT' AND resolver_importing_history(TG_RELID) THEN
        RETURN NULL;
    END IF;
    GET DIAGNOSTICS stack = PG_CONTEXT;
    IF NOT EXISTS (
        SELECT 1 FROM unnest(TG_ARGV) AS f
        WHERE stack ~ ('(^|\n)(PL/pgSQL function (' || TG_TABLE_SCHEMA || '\.)?' || f
                       || '\(|SQL function "' || f || '")')
    ) THEN
        RAISE EXCEPTION '% of % only through %', TG_OP, TG_TABLE_NAME,
            array_to_string(TG_ARGV, ' or ')
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER approved_action_dispatches_immutable
    BEFORE UPDATE OR DELETE ON approved_action_dispatches
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER approved_action_recovery_resolutions_immutable
    BEFORE UPDATE OR DELETE ON approved_action_recovery_resolutions
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER recovery_authorizations_immutable
    BEFORE UPDATE OR DELETE ON recovery_authorizations
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

CREATE TRIGGER approved_action_recovery_resolutions_definer_write
    AFTER INSERT ON approved_action_recovery_resolutions
    FOR EACH STATEMENT
    EXECUTE FUNCTION resolver_guard_definer_write('resolver_commit_automatic', 'resolver_commit_manual');

CREATE TRIGGER recovery_authorizations_definer_write
    AFTER INSERT ON recovery_authorizations
    FOR EACH STATEMENT EXECUTE FUNCTION resolver_guard_definer_write('resolver_commit_manual');

REVOKE EXECUTE ON FUNCTION resolver_guard_definer_write() FROM PUBLIC;
