-- Migration 0012_human_decision (up): what a human needs to decide with confidence, and the audit of it.
--
-- * bounded finding statistics on the control (counts per kind, first and last inspection,
--   last failure class, last evidence digest, why it is manual), written by the page commit:
--   a few columns per dispatch, never a row per inspection;
-- * escalation: a non-final finding older than its action type's window moves the control to
--   the manual queue (`manual_reason = 'evidence_window_elapsed'`), in the same fenced page
--   commit, on the database clock;
-- * a hash chain over manual decisions (recovery_audit_chain), its head row serialising
--   writers;
-- * indexes for the lookups and lists of the API.

ALTER TABLE approved_action_recovery_controls
    ADD COLUMN finding_counts jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN first_inspected_at_ms bigint,
    ADD COLUMN last_inspected_at_ms bigint,
    ADD COLUMN last_failure_class text,
    ADD COLUMN last_evidence_digest text,
    ADD COLUMN manual_reason text,
    ADD CONSTRAINT ck_approved_action_recovery_controls_finding_counts_object
        CHECK (jsonb_typeof(finding_counts) = 'object'),
    ADD CONSTRAINT ck_approved_action_recovery_controls_failure_class_known
        CHECK (last_failure_class IS NULL
               OR last_failure_class IN ('outage','timeout','configuration','error')),
    ADD CONSTRAINT ck_approved_action_recovery_controls_last_evidence_digest_hex
        CHECK (last_evidence_digest IS NULL OR last_evidence_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT ck_approved_action_recovery_controls_manual_reason_shape
        CHECK (manual_reason IS NULL OR manual_reason ~ '^[a-z0-9_.-]{1,64}$');

-- Controls already in the queue were sent there by their last finding.
UPDATE approved_action_recovery_controls
SET manual_reason = last_finding
WHERE status = 'manual' AND last_finding IS NOT NULL;

-- The waiting list (armed, inspected at least once), oldest first; open controls only.
CREATE INDEX ix_recovery_controls_waiting
    ON approved_action_recovery_controls (first_inspected_at_ms, dispatch_id)
    WHERE status = 'armed' AND first_inspected_at_ms IS NOT NULL;

-- Lookup of a case by the approval it executes.
CREATE INDEX ix_approved_action_dispatches_approval_request_id
    ON approved_action_dispatches (approval_request_id);

-- The decisions list, newest first.
CREATE INDEX ix_recovery_resolutions_manual
    ON approved_action_recovery_resolutions (resolved_at_ms, resolution_id)
    WHERE source = 'manual';

-- The audit chain: one link per manual decision, written by the decision's own statement.
-- `content` is the canonical JSON of the decision as committed (resolution and authorization
-- facts); `hash` = sha256(prev_hash || content), hex. The link holds its content, so a range
-- whose facts were pruned stays verifiable.
CREATE TABLE recovery_audit_chain (
    seq bigint NOT NULL,
    mutation_id text NOT NULL,
    dispatch_id text NOT NULL,
    content text NOT NULL,
    prev_hash text NOT NULL,
    hash text NOT NULL,
    recorded_at_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_audit_chain PRIMARY KEY (seq),
    CONSTRAINT uq_recovery_audit_chain_mutation_id UNIQUE (mutation_id),
    CONSTRAINT ck_recovery_audit_chain_seq_positive CHECK (seq >= 1),
    CONSTRAINT ck_recovery_audit_chain_hashes_hex
        CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_audit_chain_content_bounded CHECK (octet_length(content) <= 8192)
);
CREATE TRIGGER recovery_audit_chain_immutable BEFORE UPDATE OR DELETE ON recovery_audit_chain
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

-- The chain's head: one row. Each decision updates it (seq + 1, the new hash) before it
-- inserts its link, so concurrent decisions queue on this row lock and each links to the
-- head committed before it (READ COMMITTED re-reads the row after the wait).
-- (prev_hash keeps the old hash, which RETURNING cannot see otherwise.)
CREATE TABLE recovery_audit_head (
    id smallint NOT NULL,
    seq bigint NOT NULL,
    hash text NOT NULL,
    prev_hash text NOT NULL,
    CONSTRAINT pk_recovery_audit_head PRIMARY KEY (id),
    CONSTRAINT ck_recovery_audit_head_one_row CHECK (id = 1),
    CONSTRAINT ck_recovery_audit_head_hashes_hex
        CHECK (prev_hash ~ '^[0-9a-f]{64}$' AND hash ~ '^[0-9a-f]{64}$')
);
INSERT INTO recovery_audit_head (id, seq, hash, prev_hash)
VALUES (1, 0, repeat('0', 64), repeat('0', 64));

-- The canonical content of a manual decision's audit link: resolver_commit_manual writes it,
-- `resolver audit verify` rebuilds it from the stored facts with the same functions, so the
-- two agree only while the facts are unchanged. json, not jsonb: the text keeps this order.
CREATE FUNCTION resolver_audit_authorization(
    p_user_id text, p_permission text, p_project_id text, p_project_version bigint,
    p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[],
    p_authorized_at_ms bigint)
RETURNS json
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT json_build_object(
        'user_id', p_user_id, 'permission', p_permission, 'project_id', p_project_id,
        'project_version', p_project_version, 'role_binding_version', p_role_binding_version,
        'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', p_authorized_at_ms)
$$;

CREATE FUNCTION resolver_audit_content(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_finding text,
    p_evidence_digest text, p_expected_execution_version bigint, p_actor_user_id text,
    p_reason_code text, p_resolved_at_ms bigint, p_authorizations json)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT json_build_object(
        'v', 1, 'dispatch_id', p_dispatch_id, 'mutation_id', p_mutation_id,
        'source', 'manual', 'outcome', p_outcome, 'overridden_finding', p_finding,
        'evidence_digest', p_evidence_digest,
        'expected_execution_version', p_expected_execution_version,
        'actor_user_id', p_actor_user_id, 'reason_code', p_reason_code,
        'resolved_at_ms', p_resolved_at_ms, 'authorizations', p_authorizations)::text
$$;

REVOKE EXECUTE ON FUNCTION
    resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint),
    resolver_audit_content(text, text, text, text, text, bigint, text, text, bigint, json)
FROM PUBLIC;

-- The automatic commit learns escalation and the bounded statistics; the manual commit
-- records the overridden finding and appends its audit link.
CREATE OR REPLACE FUNCTION resolver_commit_automatic(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, status text)
LANGUAGE plpgsql VOLATILE AS $$
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
    SELECT coalesce(array_agg(c.dispatch_id), '{}') INTO locked_controls
    FROM (SELECT c.dispatch_id FROM approved_action_recovery_controls AS c
          WHERE c.dispatch_id = ANY(ids)
          ORDER BY c.dispatch_id
          FOR UPDATE SKIP LOCKED) AS c;
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
            mutation_id text, delay_ms bigint, failure text, escalate_after_ms bigint)
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
        SET state = CASE f.finding WHEN 'verified_succeeded' THEN 'succeeded' ELSE 'failed' END,
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
               CASE f.finding WHEN 'verified_succeeded' THEN 'succeeded' ELSE 'failed' END,
               f.finding, f.evidence_digest, f.result_code, f.execution_version, now_ms
        FROM fenced AS f
        WHERE f.status = 'resolved'
    )
    SELECT f.dispatch_id, f.status FROM fenced AS f;
END
$$;

CREATE OR REPLACE FUNCTION resolver_commit_manual(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text,
    p_reason_code text, p_expected_execution_version bigint, p_user_id text, p_project_id text,
    p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint,
    p_amr text[], p_max_auth_age_ms bigint, p_clock_leeway_ms bigint,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, version bigint, controls_closed bigint, authorizations bigint
)
LANGUAGE sql VOLATILE AS $$
    WITH now AS (SELECT resolver_now_ms(p_now_ms) AS ms),
    granted AS (
        SELECT b.project_id
        FROM recovery_role_bindings AS b
        JOIN recovery_projects AS p USING (project_id)
        WHERE b.project_id = p_project_id AND b.user_id = p_user_id
          AND b.permission = 'approval.recover'
          AND b.version = p_role_binding_version AND p.version = p_project_version
        FOR SHARE OF b, p
    ),
    settled AS (
        UPDATE approved_action_executions AS e
        SET state = p_outcome,
            version = e.version + 1,
            finished_at_ms = now.ms,
            evidence_digest = p_evidence_digest
        FROM now, approved_action_dispatches AS d
        WHERE e.dispatch_id = p_dispatch_id AND d.dispatch_id = e.dispatch_id
          AND d.project_id = p_project_id
          AND e.version = p_expected_execution_version
          AND e.state = 'executing' AND e.lease_expires_at_ms <= now.ms
          AND EXISTS (SELECT 1 FROM approved_action_recovery_controls AS oc
                      WHERE oc.dispatch_id = e.dispatch_id AND oc.status <> 'resolved')
          AND p_auth_time_ms >= now.ms - p_max_auth_age_ms
          AND p_auth_time_ms <= now.ms + p_clock_leeway_ms
          AND EXISTS (SELECT 1 FROM granted)
        RETURNING e.dispatch_id, e.version, e.finished_at_ms
    ),
    closed AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = 'resolved',
            closed_by = 'manual',
            closed_at_ms = s.finished_at_ms,
            execution_version = s.version,
            manual_at_ms = NULL,
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
               p_evidence_digest, p_expected_execution_version, p_user_id, p_reason_code,
               s.finished_at_ms
        FROM settled AS s
        RETURNING dispatch_id, mutation_id, outcome, finding, evidence_digest,
                  expected_execution_version, actor_user_id, reason_code, resolved_at_ms
    ),
    authorization_fact AS (
        INSERT INTO recovery_authorizations (
            mutation_id, user_id, permission, project_id, project_version,
            role_binding_version, auth_time_ms, amr, authorized_at_ms)
        SELECT r.mutation_id, p_user_id, 'approval.recover', p_project_id, p_project_version,
               p_role_binding_version, p_auth_time_ms, p_amr, r.resolved_at_ms
        FROM resolution AS r
        RETURNING mutation_id, user_id, permission, project_id, project_version,
                  role_binding_version, auth_time_ms, amr, authorized_at_ms
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
                               a.authorized_at_ms)
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
    SELECT s.dispatch_id, s.version, (SELECT count(*) FROM closed),
           (SELECT count(*) FROM authorization_fact)
    FROM settled AS s
$$;

-- CREATE OR REPLACE keeps grants; the pinned search_path is set again to be sure.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_commit_automatic(json, bigint)',
        'resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
