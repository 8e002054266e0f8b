-- Migration 0021_informed_decision (up): what the operator needs to decide.
--  * approved_action_dispatches.action_summary: what was approved, for people. An optional,
--    bounded, low-sensitivity summary (a title and up to 8 labelled facts) the executor gives
--    at creation: a new optional last argument of resolver_dispatch_create (executors that do
--    not pass it keep working), checked by resolver_action_summary_problem in the function
--    and in a CHECK constraint. No rule reads it; the console shows it as text.
--  * approved_action_recovery_controls.last_reason / reason_counts: why the evidence says
--    what it says. The provider's bounded reason code of each inspection (`unknown_kid`,
--    `http_404`), kept with the finding statistics by the automatic commit.
--  * A closed case keeps manual_at_ms, when it reached the manual queue: the manual settle
--    and the executor's completion no longer clear it (the queue reads open controls only).
-- Adding a nullable column and one with a constant default rewrites no table; each new CHECK
-- scans its table once (the new columns are NULL or '{}' in every existing row).
-- Applied as it is by versions/0021_informed_decision.py; never edited once released (the
-- current definitions live in resolver/db/schema/).

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

ALTER TABLE approved_action_dispatches
    ADD COLUMN action_summary JSONB,
    ADD CONSTRAINT ck_approved_action_dispatches_action_summary_shape
        CHECK (resolver_action_summary_problem(action_summary) IS NULL);

ALTER TABLE approved_action_recovery_controls
    ADD COLUMN last_reason TEXT,
    ADD COLUMN reason_counts JSONB DEFAULT '{}'::jsonb NOT NULL,
    ADD CONSTRAINT ck_approved_action_recovery_controls_last_reason_shape
        CHECK (last_reason IS NULL OR (length(last_reason) BETWEEN 1 AND 32 AND last_reason !~ '[^a-z0-9_]')),
    ADD CONSTRAINT ck_approved_action_recovery_controls_reason_counts_object
        CHECK (jsonb_typeof(reason_counts) = 'object');

-- A new argument is a new signature: the old one goes, so a call with eight arguments finds
-- exactly one function (the new one, its summary defaulting to NULL).
DROP FUNCTION resolver_dispatch_create(text, text, text, text, text, text, integer, text);
-- (resolver/db/grants.sql, run after every migration, grants the new one to the executor role.)

CREATE FUNCTION resolver_dispatch_create(
    p_dispatch_id text, p_approval_request_id text, p_project_id text, p_action_type text,
    p_action_digest text, p_idempotency_key text, p_schema_version integer DEFAULT 1,
    p_supersedes_dispatch_id text DEFAULT NULL, p_action_summary jsonb DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, created boolean, created_at_ms bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    field text;
    existing approved_action_dispatches%ROWTYPE;
    problem text;
BEGIN
    FOREACH field IN ARRAY ARRAY['p_dispatch_id', 'p_approval_request_id',
                                 'p_project_id', 'p_idempotency_key'] LOOP
        IF NOT coalesce(resolver_is_id(CASE field
                WHEN 'p_dispatch_id' THEN p_dispatch_id
                WHEN 'p_approval_request_id' THEN p_approval_request_id
                WHEN 'p_project_id' THEN p_project_id
                ELSE p_idempotency_key END), false) THEN
            RAISE EXCEPTION '% must be 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric', field
                USING ERRCODE = 'RS005';
        END IF;
    END LOOP;
    IF NOT coalesce(p_action_type ~ '^[a-z][a-z0-9_.-]{0,63}$', false) THEN
        RAISE EXCEPTION 'p_action_type must match [a-z][a-z0-9_.-]{0,63}'
            USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(p_action_digest ~ '^[0-9a-f]{64}$', false) THEN
        RAISE EXCEPTION 'p_action_digest must be a lowercase hex sha256'
            USING ERRCODE = 'RS005';
    END IF;
    IF p_schema_version IS NULL OR p_schema_version < 1 THEN
        RAISE EXCEPTION 'p_schema_version must be >= 1' USING ERRCODE = 'RS005';
    END IF;
    -- What was approved, for people (migration 0020): optional; an executor that does not
    -- pass it records none. Refused with the rule it breaks, never with its content.
    problem := resolver_action_summary_problem(p_action_summary);
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'p_action_summary %', problem
            USING ERRCODE = 'RS005',
                  HINT = 'a title and up to 8 labelled facts for people; never secrets, tool arguments or raw responses';
    END IF;
    IF p_supersedes_dispatch_id IS NOT NULL AND (
           p_supersedes_dispatch_id = p_dispatch_id
           OR NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS s
                          WHERE s.dispatch_id = p_supersedes_dispatch_id)) THEN
        RAISE EXCEPTION 'supersedes_dispatch_id % names no dispatch', quote_literal(p_supersedes_dispatch_id)
            USING ERRCODE = 'RS005';
    END IF;
    INSERT INTO approved_action_dispatches AS d (
        dispatch_id, approval_request_id, project_id, action_type, action_digest,
        idempotency_key, schema_version, supersedes_dispatch_id, action_summary)
    VALUES (p_dispatch_id, p_approval_request_id, p_project_id, p_action_type,
            p_action_digest, p_idempotency_key, p_schema_version, p_supersedes_dispatch_id,
            p_action_summary)
    ON CONFLICT DO NOTHING
    RETURNING d.dispatch_id, true, d.created_at_ms INTO dispatch_id, created, created_at_ms;
    IF FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    -- An exact re-create is the same fact; anything else reuses an id for a new action.
    SELECT * INTO existing FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = p_dispatch_id OR d.idempotency_key = p_idempotency_key
    ORDER BY d.dispatch_id = p_dispatch_id DESC
    LIMIT 1;
    IF (existing.dispatch_id, existing.approval_request_id, existing.project_id,
        existing.action_type, existing.action_digest, existing.idempotency_key,
        existing.schema_version::integer)
           IS NOT DISTINCT FROM
       (p_dispatch_id, p_approval_request_id, p_project_id, p_action_type,
        p_action_digest, p_idempotency_key, p_schema_version)
       AND existing.supersedes_dispatch_id IS NOT DISTINCT FROM p_supersedes_dispatch_id
       AND existing.action_summary IS NOT DISTINCT FROM p_action_summary THEN
        dispatch_id := existing.dispatch_id;
        created := false;
        created_at_ms := existing.created_at_ms;
        RETURN NEXT;
        RETURN;
    END IF;
    RAISE EXCEPTION 'dispatch % or idempotency key % is already recorded with a different identity; a new action needs a new dispatch id and idempotency key',
        quote_literal(p_dispatch_id), quote_literal(p_idempotency_key)
        USING ERRCODE = 'RS005';
END
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_dispatch_create(text, text, text, text, text, text, integer, text, jsonb) FROM PUBLIC;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION resolver_dispatch_create(text, text, text, text, text, text, integer, text, jsonb) '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

CREATE OR REPLACE FUNCTION resolver_commit_automatic(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, status text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    ids text[];
    verified_ids text[];
    locked_executions text[];
    locked_controls text[];
    now_ms bigint;
BEGIN
    SELECT array_agg(i.dispatch_id ORDER BY i.dispatch_id),
           array_agg(i.dispatch_id ORDER BY i.dispatch_id)
               FILTER (WHERE resolver_finding_status(i.finding) = 'resolved')
    INTO ids, verified_ids
    FROM json_to_recordset(p_items) AS i(dispatch_id text, finding text);
    -- Lock order, the same for every writer: executions (of verified items), then every
    -- control of the page, each in key order; then the fenced writes. SKIP LOCKED: a row
    -- another transaction holds (an operator's open SELECT ... FOR UPDATE, an executor's
    -- completion in flight) leaves its item out of this commit, as a lost fence; it is
    -- claimed again once its recovery lease lapses. The rest of the page commits at once
    -- instead of waiting (and failing whole on lock_timeout) behind one held row.
    SELECT coalesce(array_agg(e.dispatch_id), '{}') INTO locked_executions
    FROM (SELECT e.dispatch_id FROM approved_action_executions AS e
          WHERE e.dispatch_id = ANY(coalesce(verified_ids, '{}'))
          ORDER BY e.dispatch_id
          FOR UPDATE SKIP LOCKED) AS e;
    -- A row skipped above is most often held for an instant only: a concurrent claim whose
    -- snapshot still saw it due found it claimed since, locked its new version to recheck it
    -- and, the recheck failing, holds that lock to the end of its statement. Left out, the
    -- item would wait a whole recovery lease; so the skipped rows are waited for, briefly
    -- (migration 0016_commit_waits_skipped), and only what is still held after that is left out.
    IF cardinality(locked_executions) < cardinality(verified_ids) THEN
        locked_executions := locked_executions || resolver_commit_wait_executions(
            ARRAY(SELECT v FROM unnest(verified_ids) AS v
                  WHERE v <> ALL(locked_executions) ORDER BY v));
    END IF;
    SELECT coalesce(array_agg(c.dispatch_id), '{}') INTO locked_controls
    FROM (SELECT c.dispatch_id FROM approved_action_recovery_controls AS c
          WHERE c.dispatch_id = ANY(ids)
          ORDER BY c.dispatch_id
          FOR UPDATE SKIP LOCKED) AS c;
    IF cardinality(locked_controls) < cardinality(ids) THEN
        locked_controls := locked_controls || resolver_commit_wait_controls(
            ARRAY(SELECT v FROM unnest(ids) AS v WHERE v <> ALL(locked_controls) ORDER BY v));
    END IF;
    -- The database clock once the rows are ours: an execution lease is judged expired at
    -- the moment of the write, not before a lock wait.
    now_ms := resolver_now_ms(p_now_ms);
    -- With the rows locked (an item whose rows another transaction holds is left out),
    -- `fenced` is exactly the set whose recovery lease, open control,
    -- execution version and expired execution lease still hold; every write below applies
    -- to that set only, so each dispatch commits all-or-nothing and a stale item writes
    -- nothing. The answer: each fenced dispatch id and the status its control took.
    RETURN QUERY
    WITH item AS (
        -- Every key of an item is one column (the replica writes them).
        SELECT * FROM json_to_recordset(p_items) AS i(
            dispatch_id text, recovery_token uuid, recovery_version bigint,
            execution_version bigint, finding text, result_code text, evidence_digest text,
            mutation_id text, delay_ms bigint, failure text, escalate_after_ms bigint,
            reason text)
    ),
    fenced AS (
        SELECT i.*,
               CASE
                   -- Escalation, when evidence is missing: a finding that
                   -- would re-arm goes to a human once its action type's window, counted from
                   -- the case's first inspection, has elapsed. From the first inspection, not
                   -- from when this kind began, so alternating findings never restart it.
                   WHEN resolver_finding_status(i.finding) = 'armed'
                        AND i.escalate_after_ms IS NOT NULL
                        AND now_ms - coalesce(c.first_inspected_at_ms, now_ms)
                            >= i.escalate_after_ms
                   THEN 'manual'
                   ELSE resolver_finding_status(i.finding)
               END AS status
        FROM item AS i
        JOIN approved_action_recovery_controls AS c
          ON i.dispatch_id = ANY(locked_controls)
         AND (resolver_finding_status(i.finding) <> 'resolved'
              OR i.dispatch_id = ANY(locked_executions))
         AND c.dispatch_id = i.dispatch_id AND c.status = 'armed'
         AND c.recovery_token = i.recovery_token AND c.recovery_version = i.recovery_version
         AND c.execution_version = i.execution_version
        JOIN approved_action_executions AS e
          ON e.dispatch_id = i.dispatch_id AND e.state = 'executing'
         AND e.version = i.execution_version
         -- Defence in depth: the version fence already excludes a renewed execution; this
         -- one holds even if a writer extended a lease without bumping the version.
         AND e.lease_expires_at_ms <= now_ms
    ),
    terminal AS (
        UPDATE approved_action_executions AS e
        SET state = resolver_finding_outcome(f.finding),
            version = e.version + 1,
            finished_at_ms = now_ms,
            result_code = f.result_code,
            evidence_digest = f.evidence_digest
        FROM fenced AS f
        WHERE e.dispatch_id = f.dispatch_id AND f.status = 'resolved'
    ),
    control AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = f.status,
            execution_version = c.execution_version
                                + CASE WHEN f.status = 'resolved' THEN 1 ELSE 0 END,
            closed_by = CASE WHEN f.status = 'resolved' THEN 'automatic' END,
            closed_at_ms = CASE WHEN f.status = 'resolved' THEN now_ms END,
            manual_at_ms = CASE WHEN f.status = 'manual' THEN now_ms END,
            manual_reason = CASE WHEN f.status <> 'manual' THEN NULL
                                 WHEN resolver_finding_status(f.finding) = 'manual'
                                     THEN f.finding
                                 ELSE 'evidence_window_elapsed' END,
            last_finding = f.finding,
            finding_count = c.finding_count + 1,
            -- Bounded statistics: at most one key per finding kind, two times, two codes.
            finding_counts = c.finding_counts || jsonb_build_object(
                f.finding, coalesce((c.finding_counts ->> f.finding)::bigint, 0) + 1),
            first_inspected_at_ms = coalesce(c.first_inspected_at_ms, now_ms),
            last_inspected_at_ms = now_ms,
            last_failure_class = coalesce(f.failure, c.last_failure_class),
            -- Why the evidence says what it says (migration 0020): the provider's bounded
            -- reason code of this inspection (`unknown_kid`, `http_404`), counted like the
            -- findings; at most 16 distinct codes are kept by name, the rest as `other`.
            last_reason = f.reason,
            reason_counts = CASE
                WHEN f.reason IS NULL THEN c.reason_counts
                WHEN c.reason_counts ? f.reason
                     OR (SELECT count(*) FROM jsonb_object_keys(c.reason_counts)) < 16
                THEN c.reason_counts || jsonb_build_object(
                    f.reason, coalesce((c.reason_counts ->> f.reason)::bigint, 0) + 1)
                ELSE c.reason_counts || jsonb_build_object(
                    'other', coalesce((c.reason_counts ->> 'other')::bigint, 0) + 1)
            END,
            last_evidence_digest = coalesce(f.evidence_digest, c.last_evidence_digest),
            next_scan_at_ms = CASE WHEN f.status = 'armed' THEN now_ms + f.delay_ms
                                   ELSE c.next_scan_at_ms END,
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM fenced AS f
        WHERE c.dispatch_id = f.dispatch_id
    ),
    resolution AS (
        INSERT INTO approved_action_recovery_resolutions (
            dispatch_id, mutation_id, source, outcome, finding, evidence_digest, result_code,
            expected_execution_version, resolved_at_ms)
        SELECT f.dispatch_id, f.mutation_id, 'automatic',
               resolver_finding_outcome(f.finding),
               f.finding, f.evidence_digest, f.result_code, f.execution_version, now_ms
        FROM fenced AS f
        WHERE f.status = 'resolved'
    )
    SELECT f.dispatch_id, f.status FROM fenced AS f;
END
$$;

-- CREATE OR REPLACE resets the function's settings: pin its search_path again.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION resolver_commit_automatic(json, bigint) '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

-- A closed case keeps when it reached the manual queue: neither the manual settle nor the
-- executor's completion clears manual_at_ms any more.

CREATE OR REPLACE FUNCTION resolver_settle_manual(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text,
    p_reason_code text, p_expected_execution_version bigint, p_actor_user_id text,
    p_now_ms bigint, p_authorizations json
)
RETURNS TABLE (dispatch_id text, version bigint)
LANGUAGE sql VOLATILE AS $$
    WITH settled AS (
        UPDATE approved_action_executions AS e
        SET state = p_outcome,
            version = e.version + 1,
            finished_at_ms = p_now_ms,
            evidence_digest = p_evidence_digest
        WHERE e.dispatch_id = p_dispatch_id AND e.version = p_expected_execution_version
          AND e.state = 'executing'
        RETURNING e.dispatch_id, e.version, e.finished_at_ms
    ),
    closed AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = 'resolved',
            closed_by = 'manual',
            closed_at_ms = s.finished_at_ms,
            execution_version = s.version,
            -- manual_at_ms stays: when the case reached the queue is part of its history
            -- (migration 0020); the queue itself reads open (status 'manual') controls only.
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM settled AS s
        WHERE c.dispatch_id = s.dispatch_id AND c.status <> 'resolved'
        RETURNING c.dispatch_id
    ),
    resolution AS (
        -- `finding` of a manual resolution: the finding it overrode (the control's last one,
        -- read from the statement's snapshot, before `closed`).
        INSERT INTO approved_action_recovery_resolutions (
            dispatch_id, mutation_id, source, outcome, finding, evidence_digest,
            expected_execution_version, actor_user_id, reason_code, resolved_at_ms)
        SELECT s.dispatch_id, p_mutation_id, 'manual', p_outcome,
               (SELECT oc.last_finding FROM approved_action_recovery_controls AS oc
                WHERE oc.dispatch_id = s.dispatch_id),
               p_evidence_digest, p_expected_execution_version, p_actor_user_id, p_reason_code,
               s.finished_at_ms
        FROM settled AS s
        RETURNING dispatch_id, mutation_id, outcome, finding, evidence_digest,
                  expected_execution_version, actor_user_id, reason_code, resolved_at_ms
    ),
    authorization_fact AS (
        INSERT INTO recovery_authorizations (
            mutation_id, user_id, permission, project_id, project_version,
            role_binding_version, auth_time_ms, amr, authorized_at_ms, issuer, token_kid,
            signing_kid, signature)
        SELECT r.mutation_id, a.user_id, 'approval.recover', a.project_id, a.project_version,
               a.role_binding_version, a.auth_time_ms, a.amr, a.authorized_at_ms, a.issuer,
               a.token_kid, a.signing_kid, a.signature
        FROM resolution AS r,
             json_to_recordset(p_authorizations) AS a(
                 user_id text, project_id text, project_version bigint,
                 role_binding_version bigint, auth_time_ms bigint, amr text[],
                 authorized_at_ms bigint, issuer text, token_kid text, signing_kid text,
                 signature text)
        RETURNING mutation_id, user_id, permission, project_id, project_version,
                  role_binding_version, auth_time_ms, amr, authorized_at_ms, issuer, token_kid,
                  signing_kid, signature
    ),
    -- The audit chain (migration 0008): the decision's canonical content, linked to the
    -- chain's head. Updating the one head row takes its lock, so concurrent decisions link
    -- one after another; after a wait, READ COMMITTED re-reads the head that committed first
    -- and this link's hash is computed from it. The head is the last row locked: the lock
    -- order (execution, control, inserts, head) is the same for every writer.
    content AS (
        SELECT r.mutation_id, r.dispatch_id, r.resolved_at_ms,
               resolver_audit_content(
                   r.dispatch_id, r.mutation_id, r.outcome, r.finding, r.evidence_digest,
                   r.expected_execution_version, r.actor_user_id, r.reason_code,
                   r.resolved_at_ms,
                   (SELECT json_agg(resolver_audit_authorization(
                               a.user_id, a.permission, a.project_id, a.project_version,
                               a.role_binding_version, a.auth_time_ms, a.amr,
                               a.authorized_at_ms, a.issuer, a.token_kid, a.signing_kid,
                               a.signature)
                           ORDER BY a.user_id)
                    FROM authorization_fact AS a WHERE a.mutation_id = r.mutation_id))
                   AS content
        FROM resolution AS r
    ),
    head AS (
        UPDATE recovery_audit_head AS h
        SET seq = h.seq + 1,
            prev_hash = h.hash,
            hash = encode(sha256(convert_to(h.hash || c.content, 'UTF8')), 'hex')
        FROM content AS c
        WHERE h.id = 1
        RETURNING h.seq, h.prev_hash, h.hash
    ),
    link AS (
        INSERT INTO recovery_audit_chain (
            seq, mutation_id, dispatch_id, content, prev_hash, hash, recorded_at_ms)
        SELECT h.seq, c.mutation_id, c.dispatch_id, c.content, h.prev_hash, h.hash,
               c.resolved_at_ms
        FROM head AS h, content AS c
        RETURNING seq
    )
    SELECT s.dispatch_id, s.version FROM settled AS s
$$;

CREATE OR REPLACE FUNCTION resolver_execution_complete(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_outcome text,
    p_result_code text, p_mutation_id text, p_evidence_digest text DEFAULT NULL,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, result text, state text, version bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    seen record;
BEGIN
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed') THEN
        RAISE EXCEPTION 'p_outcome must be succeeded or failed' USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(p_result_code ~ '^[a-z0-9_.-]{1,64}$', false) THEN
        RAISE EXCEPTION 'p_result_code must match [a-z0-9_.-]{1,64}' USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION 'p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]'
            USING ERRCODE = 'RS005';
    END IF;
    IF p_evidence_digest IS NOT NULL AND p_evidence_digest !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'p_evidence_digest must be a lowercase hex sha256 or NULL'
            USING ERRCODE = 'RS005';
    END IF;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    -- Terminal state fenced on owner/token/version; a late completion is accepted as
    -- long as nobody replaced the fence (no resolution, no takeover).
    -- One statement: the control closes with the terminal state (the settled-closed
    -- trigger checks exactly that at the end of the statement).
    WITH completed AS (
        UPDATE approved_action_executions AS e
        SET state = p_outcome,
            version = e.version + 1,
            finished_at_ms = now_ms,
            result_code = p_result_code,
            completion_mutation_id = p_mutation_id,
            evidence_digest = p_evidence_digest
        WHERE e.dispatch_id = p_dispatch_id AND e.owner = p_owner AND e.token = p_token
          AND e.version = p_version AND e.state = 'executing'
        RETURNING e.dispatch_id, e.state, e.version, e.finished_at_ms
    ),
    closed AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = 'resolved',
            closed_by = 'completion',
            closed_at_ms = d.finished_at_ms,
            completion_mutation_id = p_mutation_id,
            execution_version = d.version,
            -- manual_at_ms stays, as in the manual settle (migration 0020).
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM completed AS d
        WHERE c.dispatch_id = d.dispatch_id AND c.status <> 'resolved'
        RETURNING c.dispatch_id
    )
    SELECT d.dispatch_id, d.state, d.version INTO dispatch_id, state, version
    FROM completed AS d;
    IF FOUND THEN
        result := 'committed';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT e.dispatch_id, e.state, e.version, e.result_code, e.completion_mutation_id,
           e.evidence_digest, r.source, r.evidence_digest AS resolution_digest
    INTO seen
    FROM approved_action_executions AS e
    LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
    WHERE e.dispatch_id = p_dispatch_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dispatch % has no execution', quote_literal(p_dispatch_id)
            USING ERRCODE = 'RS004';
    END IF;
    -- Our own completion already landed: a replay repeats every semantic field. A
    -- resolution won first: only the same outcome on the same evidence is the same fact.
    IF seen.state = p_outcome AND (
           (seen.source IS NULL
            AND seen.completion_mutation_id IS NOT DISTINCT FROM p_mutation_id
            AND seen.result_code IS NOT DISTINCT FROM p_result_code
            AND seen.evidence_digest IS NOT DISTINCT FROM p_evidence_digest)
        OR (seen.source IS NOT NULL AND p_evidence_digest IS NOT NULL
            AND seen.resolution_digest = p_evidence_digest)) THEN
        dispatch_id := seen.dispatch_id;
        state := seen.state;
        version := seen.version;
        result := 'replayed';
        RETURN NEXT;
        RETURN;
    END IF;
    IF seen.state = ANY (resolver_terminal_states()) THEN
        RAISE EXCEPTION 'dispatch % was already settled % by %; completion % (%) drifts from it',
            quote_literal(p_dispatch_id), seen.state,
            CASE seen.source WHEN 'automatic' THEN 'an automatic resolution'
                             WHEN 'manual' THEN 'a manual resolution'
                             ELSE 'a completion' END,
            quote_literal(p_mutation_id), p_outcome
            USING ERRCODE = 'RS001';
    END IF;
    PERFORM resolver_protocol_refuse(
        'complete', p_dispatch_id, p_owner, p_token, p_version, now_ms);
END
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json) '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
    EXECUTE format('ALTER FUNCTION resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint) '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;
