-- Late evidence after a human decision: the watch a decision opens and the fenced record of
-- what the provider saw afterwards.
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

-- Insert-only, like the resolution it sits beside; retention removes both together.
CREATE TRIGGER recovery_late_evidence_immutable BEFORE UPDATE OR DELETE ON recovery_late_evidence
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

-- A manual decision opens its watch in the decision's own transaction, without touching the
-- manual commit. Not for an abandon (`blocked` claims no outcome to contradict) nor when the
-- finding it overrode was `unsupported` (no automatic provider can look).
CREATE OR REPLACE FUNCTION resolver_open_late_watch() RETURNS trigger
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
-- token it holds. SECURITY DEFINER: the replicas hold no INSERT on late
-- evidence, so this fenced record is their only way to write it.
CREATE OR REPLACE FUNCTION resolver_record_late_evidence(
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
