-- Current definitions: dispatches, executions, recovery controls, resolutions and
-- authorizations; the database clock; the insert-only trigger of every fact table.
-- Applied in file-name order onto an empty schema, these files build what the migrations build
-- step by step (tests/integration/schema/test_schema_files.py compares the two catalogs). A schema
-- change edits the definition here AND adds a migration under resolver/db/migrations/sql/.
-- Digests and codes are checked as a length and a negated character class, never as a
-- bounded repetition ('^[0-9a-f]{64}$'): the same strings pass, and the check costs about a
-- tenth (PostgreSQL's regex engine unrolls the count; migration 0017_check_char_classes).

-- The domain's sets, each spelled once here and once in resolver/core/domain.py
-- (tests/integration/schema/test_domain_sets.py compares the two). Every check, trigger
-- condition and function reads them from these functions. All are IMMUTABLE: the planner
-- folds a set (no arguments) to its value once per statement, and inlines a mapping (SQL,
-- one expression) into the expression that calls it, so a check or a trigger's WHEN costs
-- per row what the spelled-out list cost. The sets are plpgsql because the planner folds
-- them by calling them: a plpgsql function is compiled once per session, where a SQL one is
-- parsed and planned again at every fold (once per statement and check).

-- The states an execution never leaves once it reaches one.
CREATE FUNCTION resolver_terminal_states() RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN ARRAY['succeeded', 'failed', 'blocked'];
END
$$;

-- Every finding kind a provider may report.
CREATE FUNCTION resolver_finding_kinds() RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN ARRAY['verified_succeeded', 'verified_failed', 'still_running', 'missing',
                 'conflict', 'unsupported', 'unavailable'];
END
$$;

-- The terminal state verified evidence settles an execution as; NULL for a finding that
-- verifies nothing.
CREATE FUNCTION resolver_finding_outcome(p_finding text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_finding WHEN 'verified_succeeded' THEN 'succeeded'
                          WHEN 'verified_failed' THEN 'failed' END
$$;

-- The terminal state each human decision settles an execution as; NULL for anything that is
-- not a decision.
CREATE FUNCTION resolver_decision_settles(p_decision text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_decision WHEN 'confirm_succeeded' THEN 'succeeded'
                           WHEN 'confirm_failed' THEN 'failed'
                           WHEN 'abandon_unknown' THEN 'blocked' END
$$;

-- What was approved, for people (migration 0020): the optional summary an executor gives at
-- dispatch creation, {"title": ..., "facts": [{"label": ..., "value": ...}]}. Bounded and
-- low-sensitivity by rule: at most 2048 bytes as JSON, a 1-120 character title, at most 8
-- facts of a 1-40 character label and a 1-200 character value; no control, zero-width or
-- direction-override character; no label that names a secret and no value shaped like one
-- (a PEM block, an HTTP credential, a JWT, credentials in a URL, or 32 and more characters
-- of a key alphabet without a break: a token, a key or a digest; the action's digest has its
-- own field). No rule reads it. The answer is why a summary is refused, NULL when it is not.
CREATE FUNCTION resolver_action_summary_problem(p_summary jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    fact jsonb;
    part text;
BEGIN
    IF p_summary IS NULL THEN
        RETURN NULL;
    END IF;
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

CREATE TABLE approved_action_dispatches (
    dispatch_id TEXT NOT NULL,
    approval_request_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    action_type TEXT NOT NULL,
    action_digest TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    schema_version SMALLINT NOT NULL,
    supersedes_dispatch_id TEXT,
    created_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    action_summary JSONB,
    CONSTRAINT pk_approved_action_dispatches PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_approved_action_dispatches_action_digest_hex CHECK (length(action_digest) = 64 AND action_digest !~ '[^0-9a-f]'),
    CONSTRAINT ck_approved_action_dispatches_schema_version_positive CHECK (schema_version >= 1),
    CONSTRAINT ck_approved_action_dispatches_bounded_ids CHECK (length(dispatch_id) <= 128 AND length(approval_request_id) <= 128 AND length(project_id) <= 128 AND length(idempotency_key) <= 128 AND length(action_type) <= 64),
    CONSTRAINT ck_approved_action_dispatches_no_self_supersede CHECK (supersedes_dispatch_id <> dispatch_id),
    CONSTRAINT fk_approved_action_dispatches_supersedes_dispatch_id FOREIGN KEY(supersedes_dispatch_id) REFERENCES approved_action_dispatches (dispatch_id),
    CONSTRAINT uq_approved_action_dispatches_idempotency_key UNIQUE (idempotency_key),
    CONSTRAINT ck_approved_action_dispatches_action_summary_shape CHECK (resolver_action_summary_problem(action_summary) IS NULL)
);

CREATE TABLE approved_action_executions (
    dispatch_id TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    token UUID NOT NULL,
    version BIGINT NOT NULL,
    attempt INTEGER NOT NULL,
    lease_expires_at_ms BIGINT NOT NULL,
    started_at_ms BIGINT,
    finished_at_ms BIGINT,
    result_code TEXT,
    completion_mutation_id TEXT,
    evidence_digest TEXT,
    CONSTRAINT pk_approved_action_executions PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_approved_action_executions_state_known CHECK (state IN ('leased','executing') OR state = ANY (resolver_terminal_states())),
    CONSTRAINT ck_approved_action_executions_counters_positive CHECK (version >= 1 AND attempt >= 1),
    CONSTRAINT ck_approved_action_executions_started_after_barrier CHECK (state = 'leased' OR started_at_ms IS NOT NULL),
    CONSTRAINT ck_approved_action_executions_finished_iff_terminal CHECK ((state = ANY (resolver_terminal_states())) = (finished_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_executions_result_code_shape CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_executions_evidence_digest_hex CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT fk_approved_action_executions_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id)
)
-- Room for HOT updates: start, renewals and the terminal update change no indexed column
-- (migration 0008_hot_fillfactor).
WITH (fillfactor = 85);

CREATE TABLE approved_action_recovery_controls (
    dispatch_id TEXT NOT NULL,
    status TEXT NOT NULL,
    execution_version BIGINT NOT NULL,
    next_scan_at_ms BIGINT NOT NULL,
    recovery_owner TEXT,
    recovery_token UUID,
    recovery_version BIGINT DEFAULT 0 NOT NULL,
    recovery_lease_expires_at_ms BIGINT,
    last_finding TEXT,
    finding_count INTEGER DEFAULT 0 NOT NULL,
    armed_at_ms BIGINT NOT NULL,
    manual_at_ms BIGINT,
    closed_by TEXT,
    closed_at_ms BIGINT,
    completion_mutation_id TEXT,
    finding_counts JSONB DEFAULT '{}'::jsonb NOT NULL,
    first_inspected_at_ms BIGINT,
    last_inspected_at_ms BIGINT,
    last_failure_class TEXT,
    last_evidence_digest TEXT,
    manual_reason TEXT,
    last_reason TEXT,
    reason_counts JSONB DEFAULT '{}'::jsonb NOT NULL,
    -- When a waiting case goes to the manual queue if the evidence stays what it last was:
    -- the first inspection plus its action type's window for that finding, as the replica
    -- that inspected it last applied it (escalation happens at the first look from then on).
    -- NULL when that finding never escalates (migration 0026).
    escalates_at_ms BIGINT,
    CONSTRAINT pk_approved_action_recovery_controls PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_approved_action_recovery_controls_status_known CHECK (status IN ('armed','manual','resolved')),
    CONSTRAINT ck_approved_action_recovery_controls_finding_known CHECK (last_finding IS NULL OR last_finding = ANY (resolver_finding_kinds())),
    CONSTRAINT ck_approved_action_recovery_controls_closed_by_known CHECK (closed_by IS NULL OR closed_by IN ('completion','automatic','manual')),
    CONSTRAINT ck_approved_action_recovery_controls_closed_iff_resolved CHECK ((status = 'resolved') = (closed_by IS NOT NULL AND closed_at_ms IS NOT NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_recovery_lease_whole CHECK ((recovery_token IS NULL) = (recovery_lease_expires_at_ms IS NULL) AND (recovery_token IS NULL) = (recovery_owner IS NULL)),
    CONSTRAINT ck_approved_action_recovery_controls_lease_only_when_armed CHECK (status = 'armed' OR recovery_token IS NULL),
    CONSTRAINT ck_approved_action_recovery_controls_finding_counts_object CHECK (jsonb_typeof(finding_counts) = 'object'),
    CONSTRAINT ck_approved_action_recovery_controls_failure_class_known CHECK (last_failure_class IS NULL OR last_failure_class IN ('outage','timeout','configuration','error')),
    CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex CHECK (last_evidence_digest IS NULL OR (length(last_evidence_digest) = 64 AND last_evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape CHECK (manual_reason IS NULL OR (length(manual_reason) BETWEEN 1 AND 64 AND manual_reason !~ '[^a-z0-9_.-]')),
    CONSTRAINT fk_approved_action_recovery_controls_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_executions (dispatch_id),
    CONSTRAINT ck_approved_action_recovery_controls_last_reason_shape CHECK (last_reason IS NULL OR (length(last_reason) BETWEEN 1 AND 32 AND last_reason !~ '[^a-z0-9_]')),
    CONSTRAINT ck_approved_action_recovery_controls_reason_counts_object CHECK (jsonb_typeof(reason_counts) = 'object')
)
-- Room for a control's next version on its own page (migration 0008_hot_fillfactor).
WITH (fillfactor = 90);

CREATE INDEX ix_recovery_controls_due ON approved_action_recovery_controls (next_scan_at_ms, dispatch_id) WHERE status = 'armed';

CREATE INDEX ix_recovery_controls_manual ON approved_action_recovery_controls (manual_at_ms, dispatch_id) WHERE status = 'manual';

-- The API's waiting list: armed controls inspected at least once (migration 0012).
CREATE INDEX ix_recovery_controls_waiting ON approved_action_recovery_controls (first_inspected_at_ms, dispatch_id) WHERE status = 'armed' AND first_inspected_at_ms IS NOT NULL;

CREATE TABLE approved_action_recovery_resolutions (
    resolution_id BIGINT GENERATED BY DEFAULT AS IDENTITY,
    dispatch_id TEXT NOT NULL,
    mutation_id TEXT NOT NULL,
    source TEXT NOT NULL,
    outcome TEXT NOT NULL,
    finding TEXT,
    evidence_digest TEXT,
    result_code TEXT,
    expected_execution_version BIGINT NOT NULL,
    actor_user_id TEXT,
    reason_code TEXT,
    resolved_at_ms BIGINT NOT NULL,
    CONSTRAINT pk_approved_action_recovery_resolutions PRIMARY KEY (resolution_id),
    CONSTRAINT ck_approved_action_recovery_resolutions_source_known CHECK (source IN ('automatic','manual')),
    CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known CHECK (outcome = ANY (resolver_terminal_states())),
    CONSTRAINT ck_approved_action_recovery_resolutions_evidence_digest_hex CHECK (evidence_digest IS NULL OR (length(evidence_digest) = 64 AND evidence_digest !~ '[^0-9a-f]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_result_code_shape CHECK (result_code IS NULL OR (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_reason_code_shape CHECK (reason_code IS NULL OR (length(reason_code) BETWEEN 1 AND 64 AND reason_code !~ '[^a-z0-9_.-]')),
    CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified CHECK (source <> 'automatic' OR (resolver_finding_outcome(finding) IS NOT NULL AND evidence_digest IS NOT NULL AND result_code IS NOT NULL AND actor_user_id IS NULL AND outcome <> 'blocked')),
    CONSTRAINT ck_approved_action_recovery_resolutions_manual_has_actor CHECK (source <> 'manual' OR (actor_user_id IS NOT NULL AND reason_code IS NOT NULL)),
    CONSTRAINT fk_approved_action_recovery_resolutions_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id),
    CONSTRAINT uq_approved_action_recovery_resolutions_dispatch_id UNIQUE (dispatch_id),
    CONSTRAINT uq_approved_action_recovery_resolutions_mutation_id UNIQUE (mutation_id)
);

CREATE TABLE recovery_authorizations (
    authorization_id BIGINT GENERATED BY DEFAULT AS IDENTITY,
    mutation_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    permission TEXT NOT NULL,
    project_id TEXT NOT NULL,
    project_version BIGINT NOT NULL,
    role_binding_version BIGINT NOT NULL,
    auth_time_ms BIGINT NOT NULL,
    amr TEXT[] NOT NULL,
    authorized_at_ms BIGINT NOT NULL,
    issuer TEXT,
    token_kid TEXT,
    signing_kid TEXT,
    signature TEXT,
    CONSTRAINT pk_recovery_authorizations PRIMARY KEY (authorization_id),
    CONSTRAINT ck_recovery_authorizations_permission_known CHECK (permission = 'approval.recover'),
    CONSTRAINT ck_recovery_authorizations_signed_whole CHECK ((signature IS NULL) = (signing_kid IS NULL) AND (signature IS NULL) = (issuer IS NULL) AND (signature IS NULL) = (token_kid IS NULL)),
    CONSTRAINT ck_recovery_authorizations_signature_hex CHECK (signature IS NULL OR signature ~ '^[0-9a-f]{128}$'),
    CONSTRAINT ck_recovery_authorizations_signing_kid_shape CHECK (signing_kid IS NULL OR signing_kid ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'),
    CONSTRAINT ck_recovery_authorizations_issuer_printable CHECK (issuer IS NULL OR (length(issuer) BETWEEN 1 AND 512 AND issuer !~ '[[:cntrl:]]')),
    CONSTRAINT ck_recovery_authorizations_token_kid_printable CHECK (token_kid IS NULL OR (length(token_kid) BETWEEN 1 AND 256 AND token_kid !~ '[[:cntrl:]]')),
    CONSTRAINT fk_recovery_authorizations_mutation_id FOREIGN KEY(mutation_id) REFERENCES approved_action_recovery_resolutions (mutation_id),
    CONSTRAINT uq_recovery_authorizations_mutation_id_user_id UNIQUE (mutation_id, user_id)
);

-- The one clock every lease and due-time comparison uses. The override exists for tests
-- only; production passes NULL and gets the database's clock, never a replica's.
-- The one clock every lease and due-time comparison uses. The override exists for tests
-- only; production passes NULL and gets the database's clock, never a replica's.
CREATE FUNCTION resolver_now_ms(override_ms bigint) RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE AS
$$ SELECT COALESCE(override_ms, (extract(epoch from clock_timestamp()) * 1000)::bigint) $$;

-- The one shape of an identifier (dispatch, approval request, project, idempotency key,
-- mutation): 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric. The Python side
-- checks the same pattern, resolver.core.domain.ID_REGEX (test_schema_files.py proves the two
-- agree).
CREATE FUNCTION resolver_is_id(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_value ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'
$$;

-- Executable by PUBLIC by default; the protocol functions run it as the owner.
REVOKE EXECUTE ON FUNCTION resolver_is_id(text) FROM PUBLIC;

-- The one release of a recovery lease: a new recovery_version (the fence every holder of the
-- old lease fails on) and no owner, token or expiry. Every writer that ends a recovery lease
-- (a renewal, the three commits, a graceful hand-back) assigns these four columns from here:
--   SET (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
--       = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
-- A one-SELECT SQL function: the planner inlines it.
CREATE FUNCTION resolver_recovery_lease_released(p_recovery_version bigint)
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
CREATE FUNCTION resolver_reject_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE FUNCTION resolver_guard_definer_write() RETURNS trigger LANGUAGE plpgsql AS $$
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
