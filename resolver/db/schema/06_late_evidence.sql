-- Current definitions: late evidence after a human decision (migration 0014); before
-- 07_retention.sql, whose export carries it. For a bounded
-- window after a manual decision the automatic provider of the action type keeps looking,
-- read-only, at a low cadence; a verified finding is recorded as a fact of its own beside the
-- decision (agreeing or contradicting it). The terminal state never changes.
-- Applied in file-name order onto an empty schema, these files build what the migrations build
-- step by step (tests/integration/schema/test_schema_files.py compares the two catalogs). A schema
-- change edits the definition here AND adds a migration under resolver/db/migrations/sql/.

-- One watch per manual decision that claims an outcome (succeeded or failed) about an action
-- a provider can still look at. Open while `closed_at_ms` is NULL; the partial index holds
-- open watches only, so the claim never scans closed history. Claimed like a control:
-- `watch_token` is rotated by every claim and fences the record; `next_scan_at_ms` moves to
-- the claim's lease expiry, so a replica that dies holding a watch hands it back by time.
-- The window is the worker's setting, applied on the database clock to `decided_at_ms`.
CREATE TABLE recovery_late_watches (
    dispatch_id text NOT NULL,
    decision_mutation_id text NOT NULL,
    decided_outcome text NOT NULL,
    decided_at_ms bigint NOT NULL,
    next_scan_at_ms bigint NOT NULL,
    watch_owner text,
    watch_token uuid,
    observations bigint NOT NULL DEFAULT 0,
    last_observed_at_ms bigint,
    closed_at_ms bigint,
    closed_reason text,
    CONSTRAINT pk_recovery_late_watches PRIMARY KEY (dispatch_id),
    CONSTRAINT fk_recovery_late_watches_dispatch_id FOREIGN KEY (dispatch_id)
        REFERENCES approved_action_recovery_resolutions (dispatch_id) ON DELETE CASCADE,
    CONSTRAINT ck_recovery_late_watches_outcome_claimed
        CHECK (decided_outcome IN ('succeeded', 'failed')),
    CONSTRAINT ck_recovery_late_watches_closed_reason_known
        CHECK ((closed_at_ms IS NULL AND closed_reason IS NULL)
               OR (closed_at_ms IS NOT NULL
                   AND closed_reason IN ('observed', 'window_elapsed', 'unsupported')))
);
CREATE INDEX ix_recovery_late_watches_open
    ON recovery_late_watches (next_scan_at_ms, dispatch_id)
    WHERE closed_at_ms IS NULL;
-- The expire's: open watches by decision time, so closing the elapsed ones reads those only,
-- never every watch (migration 0018_late_expire_index).
CREATE INDEX ix_recovery_late_watches_open_decided
    ON recovery_late_watches (decided_at_ms, dispatch_id)
    WHERE closed_at_ms IS NULL;

-- The late finding: at most one per dispatch (a verified finding closes the watch), never
-- changed afterwards. `agrees`: the finding says what the decision said.
CREATE TABLE recovery_late_evidence (
    observation_id text NOT NULL,
    dispatch_id text NOT NULL,
    decision_mutation_id text NOT NULL,
    finding text NOT NULL,
    agrees boolean NOT NULL,
    evidence_digest text NOT NULL,
    result_code text NOT NULL,
    observer text NOT NULL,
    observed_at_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_late_evidence PRIMARY KEY (observation_id),
    CONSTRAINT uq_recovery_late_evidence_dispatch_id UNIQUE (dispatch_id),
    CONSTRAINT fk_recovery_late_evidence_dispatch_id FOREIGN KEY (dispatch_id)
        REFERENCES approved_action_recovery_resolutions (dispatch_id) ON DELETE CASCADE,
    CONSTRAINT ck_recovery_late_evidence_finding_verified
        CHECK (resolver_finding_outcome(finding) IS NOT NULL),
    CONSTRAINT ck_recovery_late_evidence_digest_hex CHECK (evidence_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT ck_recovery_late_evidence_result_code_shape
        CHECK (result_code ~ '^[a-z0-9_.-]{1,64}$'),
    CONSTRAINT ck_recovery_late_evidence_observation_id_shape
        CHECK (observation_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$')
);
-- Insert-only, like the resolution it sits beside; retention removes both together.
CREATE TRIGGER recovery_late_evidence_immutable BEFORE UPDATE OR DELETE ON recovery_late_evidence
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

-- A manual decision opens its watch in the decision's own transaction, without touching the
-- manual commit. Not for an abandon (`blocked` claims no outcome to contradict) nor when the
-- finding it overrode was `unsupported` (no automatic provider can look).
CREATE FUNCTION resolver_open_late_watch() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO recovery_late_watches (
        dispatch_id, decision_mutation_id, decided_outcome, decided_at_ms, next_scan_at_ms)
    VALUES (NEW.dispatch_id, NEW.mutation_id, NEW.outcome, NEW.resolved_at_ms,
            NEW.resolved_at_ms);
    RETURN NULL;
END
$$;
CREATE TRIGGER approved_action_recovery_resolutions_late_watch
    AFTER INSERT ON approved_action_recovery_resolutions
    FOR EACH ROW
    WHEN (NEW.source = 'manual' AND NEW.outcome IN ('succeeded', 'failed')
          AND NEW.finding IS DISTINCT FROM 'unsupported')
    EXECUTE FUNCTION resolver_open_late_watch();

-- The record of one claimed page of watches (see queries.sql, late_watch_record): fenced on
-- the watch's token, its being open and inside the window on the database clock. A verified
-- finding inserts the late evidence and closes the watch; `unsupported` closes it (the
-- provider can never tell); anything else schedules the next look. Answers each fenced
-- dispatch id with the observation it took, whether it recorded evidence, and whether that
-- evidence agrees. A watch named twice (a stale and a fresh claim) is fenced once, on the
-- token it holds. SECURITY DEFINER (migration 0020_face_roles): the replicas hold no INSERT on late
-- evidence, so this fenced record is their only way to write it.
CREATE FUNCTION resolver_record_late_evidence(
    p_items json, p_owner text, p_window_ms bigint, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, observation_id text, recorded boolean, agrees boolean)
LANGUAGE sql VOLATILE SECURITY DEFINER AS $$
    -- The clock rule first, whatever the items: a refused override is refused even when no
    -- watch matches (the query below reads its clock only once a watch is found).
    SELECT resolver_protocol_now_ms(p_now_ms);
    WITH now AS (SELECT resolver_protocol_now_ms(p_now_ms) AS ms),
    item AS (
        SELECT * FROM json_to_recordset(p_items) AS i(
            dispatch_id text, watch_token uuid, finding text, evidence_digest text,
            result_code text, observation_id text, delay_ms bigint)
    ),
    -- SKIP LOCKED, like the automatic commit: a watch another transaction holds is left out
    -- (a lost fence); it is claimed again once its lease lapses.
    locked AS (
        SELECT w.dispatch_id, w.watch_token, w.decision_mutation_id, w.decided_outcome
        FROM recovery_late_watches AS w
        JOIN item AS i ON i.dispatch_id = w.dispatch_id AND i.watch_token = w.watch_token
        WHERE w.closed_at_ms IS NULL
          AND w.decided_at_ms + p_window_ms > (SELECT ms FROM now)
        ORDER BY w.dispatch_id
        FOR UPDATE OF w SKIP LOCKED
    ),
    fenced AS (
        SELECT DISTINCT ON (l.dispatch_id)
               l.dispatch_id, l.decision_mutation_id, l.decided_outcome,
               i.finding, i.evidence_digest, i.result_code, i.observation_id, i.delay_ms,
               resolver_finding_outcome(i.finding) IS NOT NULL AS verified,
               i.finding = 'verified_' || l.decided_outcome AS agrees
        FROM locked AS l
        JOIN item AS i ON i.dispatch_id = l.dispatch_id AND i.watch_token = l.watch_token
        ORDER BY l.dispatch_id, i.observation_id
    ),
    evidence AS (
        INSERT INTO recovery_late_evidence (
            observation_id, dispatch_id, decision_mutation_id, finding, agrees,
            evidence_digest, result_code, observer, observed_at_ms)
        SELECT f.observation_id, f.dispatch_id, f.decision_mutation_id, f.finding, f.agrees,
               f.evidence_digest, f.result_code, p_owner, now.ms
        FROM fenced AS f, now
        WHERE f.verified
    ),
    watch AS (
        UPDATE recovery_late_watches AS w
        SET watch_owner = NULL,
            watch_token = NULL,
            observations = w.observations + 1,
            last_observed_at_ms = now.ms,
            next_scan_at_ms = now.ms + greatest(coalesce(f.delay_ms, 0), 0),
            closed_at_ms = CASE WHEN f.verified OR f.finding = 'unsupported' THEN now.ms END,
            closed_reason = CASE WHEN f.verified THEN 'observed'
                                 WHEN f.finding = 'unsupported' THEN 'unsupported' END
        FROM fenced AS f, now
        WHERE w.dispatch_id = f.dispatch_id
    )
    SELECT f.dispatch_id, f.observation_id, f.verified, CASE WHEN f.verified THEN f.agrees END
    FROM fenced AS f
$$;

CREATE TRIGGER recovery_late_evidence_definer_write AFTER INSERT ON recovery_late_evidence
    FOR EACH STATEMENT
    EXECUTE FUNCTION resolver_guard_definer_write('resolver_record_late_evidence');

REVOKE EXECUTE ON FUNCTION
    resolver_open_late_watch(),
    resolver_record_late_evidence(json, text, bigint, bigint)
FROM PUBLIC;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_open_late_watch()',
        'resolver_record_late_evidence(json, text, bigint, bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
