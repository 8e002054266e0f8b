-- Undo 0013: the single-person manual commit of 0012, no proposals, no rules, one
-- authorization fact per mutation (a database holding confirmed two-person decisions cannot
-- go back: their second facts break the old unique constraint, and the downgrade stops).

-- What a run would take, for --dry-run and the export: one JSON document per dispatch with
-- its identity, terminal state, resolution and authorization (no evidence, no secrets).
CREATE OR REPLACE FUNCTION resolver_prune_candidates(
    p_cutoff_ms bigint, p_include_audit boolean, p_after text, p_limit integer)
RETURNS TABLE (dispatch_id text, audited boolean, record jsonb)
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    WITH ids AS (
        (SELECT c.dispatch_id
         FROM approved_action_recovery_controls AS c
         JOIN approved_action_executions AS e USING (dispatch_id)
         WHERE c.dispatch_id > p_after
           AND c.status = 'resolved' AND c.closed_at_ms < p_cutoff_ms
           AND e.state IN ('succeeded','failed','blocked') AND e.finished_at_ms < p_cutoff_ms
         ORDER BY c.dispatch_id
         LIMIT least(p_limit, 10000))
        UNION ALL
        (SELECT res.dispatch_id
         FROM approved_action_recovery_resolutions AS res
         WHERE p_include_audit AND res.dispatch_id > p_after
           AND res.resolved_at_ms < p_cutoff_ms
           AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                           WHERE e.dispatch_id = res.dispatch_id)
         ORDER BY res.dispatch_id
         LIMIT least(p_limit, 10000))
    ),
    page AS (SELECT i.dispatch_id FROM ids AS i ORDER BY i.dispatch_id
             LIMIT least(p_limit, 10000))
    SELECT d.dispatch_id, res.dispatch_id IS NOT NULL,
           jsonb_build_object(
               'v', 1,
               'dispatch', to_jsonb(d),
               'execution', CASE WHEN e.dispatch_id IS NOT NULL THEN jsonb_build_object(
                   'state', e.state, 'attempt', e.attempt, 'version', e.version,
                   'started_at_ms', e.started_at_ms, 'finished_at_ms', e.finished_at_ms,
                   'result_code', e.result_code,
                   'completion_mutation_id', e.completion_mutation_id,
                   'evidence_digest', e.evidence_digest,
                   'closed_by', c.closed_by, 'closed_at_ms', c.closed_at_ms) END,
               'resolution', to_jsonb(res),
               'authorization', to_jsonb(a))
    FROM page AS p
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_resolutions AS res ON res.dispatch_id = d.dispatch_id
    LEFT JOIN recovery_authorizations AS a ON a.mutation_id = res.mutation_id
    ORDER BY d.dispatch_id
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION resolver_prune_candidates(bigint, boolean, text, integer) '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;

DROP FUNCTION resolver_proposal_close(
    text, text, text, text, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint);
DROP FUNCTION resolver_commit_manual(
    text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], bigint,
    bigint, bigint, bigint);
DROP FUNCTION resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json);

DROP TRIGGER approved_action_recovery_resolutions_two_people
    ON approved_action_recovery_resolutions;
DROP FUNCTION resolver_two_people_present();
DROP TRIGGER approved_action_executions_void_proposals ON approved_action_executions;
DROP FUNCTION resolver_proposals_void();
DROP TABLE recovery_proposals;
DROP FUNCTION resolver_proposal_close_once();
DROP FUNCTION resolver_needs_two_people(text, text);
DROP TABLE recovery_two_person_rules;

ALTER TABLE recovery_authorizations
    DROP CONSTRAINT uq_recovery_authorizations_mutation_id_user_id,
    ADD CONSTRAINT uq_recovery_authorizations_mutation_id UNIQUE (mutation_id);

-- 2. The manual commit: a human decision's authorization fact, resolution and terminal state
-- in one statement. Fenced on the grant and its project/role-binding versions (locked FOR
-- SHARE so a concurrent revocation waits or wins), authentication no older than the limit on
-- the database clock, the expected execution version, the execution being recovery_required
-- (lease expired on the database clock) and its control still open. No row: nothing applied
-- (the caller explains why). SECURITY INVOKER, like the automatic commit.
CREATE FUNCTION resolver_commit_manual(
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

REVOKE EXECUTE ON FUNCTION
    resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint,
                           bigint, text[], bigint, bigint, bigint)
FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION resolver_commit_manual(text, text, text, text, text, bigint, '
                   'text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint) '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
END
$$;
