-- Migration 0008_human_decision (up): what a human needs to decide with confidence, and the audit of it.
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

-- The page commit learns escalation and the bounded statistics, and says which items went to
-- the manual queue (a new result type, so the function is dropped and created again; the
-- grants file grants it to the runtime role).
DROP FUNCTION resolver_commit_page(json, bigint);
CREATE FUNCTION resolver_commit_page(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, manual_reason text) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ids text[];
    verified_ids text[];
    now_ms bigint;
BEGIN
    SELECT array_agg(i.dispatch_id ORDER BY i.dispatch_id),
           array_agg(i.dispatch_id ORDER BY i.dispatch_id)
               FILTER (WHERE i.finding IN ('verified_succeeded', 'verified_failed'))
    INTO ids, verified_ids
    FROM json_to_recordset(p_items) AS i(dispatch_id text, finding text);
    -- Lock order, the same for every writer: executions (of verified items), then every
    -- control of the page, each in key order; then the fenced writes.
    IF verified_ids IS NOT NULL THEN
        PERFORM 1 FROM approved_action_executions AS e
        WHERE e.dispatch_id = ANY(verified_ids)
        ORDER BY e.dispatch_id
        FOR UPDATE;
    END IF;
    PERFORM 1 FROM approved_action_recovery_controls AS c
    WHERE c.dispatch_id = ANY(ids)
    ORDER BY c.dispatch_id
    FOR UPDATE;
    -- The database clock once the rows are ours: an execution lease is judged expired, and
    -- an evidence window elapsed, at the moment of the write, not before a lock wait.
    now_ms := resolver_now_ms(p_now_ms);
    -- With the rows locked, `fenced` is exactly the set whose recovery lease, open control,
    -- execution version and expired execution lease still hold; every write below applies
    -- to that set only, so each dispatch commits all-or-nothing and a stale item writes
    -- nothing. The fenced dispatch ids are the answer, with the reason of those that went to
    -- the manual queue.
    RETURN QUERY
    WITH item AS (
        SELECT * FROM json_to_recordset(p_items) AS i(
            dispatch_id text, recovery_token uuid, recovery_version bigint,
            execution_version bigint, finding text, result_code text, evidence_digest text,
            mutation_id text, delay_ms bigint, failure text, escalate_after_ms bigint)
    ),
    fenced AS (
        SELECT i.*, i.finding IN ('verified_succeeded', 'verified_failed') AS verified,
               CASE
                   WHEN i.finding IN ('conflict', 'unsupported') THEN i.finding
                   -- Escalation (ADR-0033 §4, "when evidence is missing"): a non-final
                   -- finding whose window, counted from the case's first inspection, has
                   -- elapsed. Counted from the first inspection, not from when this kind
                   -- began, so findings that alternate never restart the window.
                   WHEN i.finding IN ('still_running', 'missing', 'unavailable')
                        AND i.escalate_after_ms IS NOT NULL
                        AND now_ms - coalesce(c.first_inspected_at_ms, now_ms)
                            >= i.escalate_after_ms
                   THEN 'evidence_window_elapsed'
               END AS to_manual
        FROM item AS i
        JOIN approved_action_recovery_controls AS c
          ON c.dispatch_id = i.dispatch_id AND c.status = 'armed'
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
        WHERE e.dispatch_id = f.dispatch_id AND f.verified
    ),
    control AS (
        UPDATE approved_action_recovery_controls AS c
        SET status = CASE WHEN f.verified THEN 'resolved'
                          WHEN f.to_manual IS NOT NULL THEN 'manual'
                          ELSE 'armed' END,
            execution_version = c.execution_version + CASE WHEN f.verified THEN 1 ELSE 0 END,
            closed_by = CASE WHEN f.verified THEN 'automatic' END,
            closed_at_ms = CASE WHEN f.verified THEN now_ms END,
            manual_at_ms = CASE WHEN f.to_manual IS NOT NULL THEN now_ms END,
            manual_reason = f.to_manual,
            last_finding = f.finding,
            finding_count = c.finding_count + 1,
            -- Bounded: at most one key per finding kind.
            finding_counts = c.finding_counts || jsonb_build_object(
                f.finding, coalesce((c.finding_counts ->> f.finding)::bigint, 0) + 1),
            first_inspected_at_ms = coalesce(c.first_inspected_at_ms, now_ms),
            last_inspected_at_ms = now_ms,
            last_failure_class = coalesce(f.failure, c.last_failure_class),
            last_evidence_digest = coalesce(f.evidence_digest, c.last_evidence_digest),
            next_scan_at_ms = CASE WHEN f.verified OR f.to_manual IS NOT NULL
                                   THEN c.next_scan_at_ms ELSE now_ms + f.delay_ms END,
            recovery_version = c.recovery_version + 1,
            recovery_owner = NULL,
            recovery_token = NULL,
            recovery_lease_expires_at_ms = NULL
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
        WHERE f.verified
    )
    SELECT f.dispatch_id, f.to_manual FROM fenced AS f;
END
$$;
-- Executable by PUBLIC by default; resolver/db/grants.sql grants it to the runtime role.
REVOKE EXECUTE ON FUNCTION resolver_commit_page(json, bigint) FROM PUBLIC;

-- Tables resolve in the migrated schema, whatever the caller's search_path (pg_temp last: a
-- caller's temporary table can never shadow one).
DO $$
BEGIN
    EXECUTE format(
        'ALTER FUNCTION resolver_commit_page(json, bigint) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;
