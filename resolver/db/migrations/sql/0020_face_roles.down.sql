-- Back to one role's direct writes and the session flag of the prune. The grants go with the
-- previous release's resolver/db/grants.sql (`resolver migrate --grants` of that release).

DROP FUNCTION resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint, bigint);
CREATE FUNCTION resolver_commit_manual(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text,
    p_reason_code text, p_expected_execution_version bigint, p_user_id text, p_project_id text,
    p_project_version bigint, p_role_binding_version bigint, p_auth_time_ms bigint,
    p_amr text[], p_max_auth_age_ms bigint, p_clock_leeway_ms bigint,
    p_now_ms bigint DEFAULT NULL, p_proposal_ttl_ms bigint DEFAULT 3600000
)
RETURNS TABLE (dispatch_id text, version bigint, result text, proposal_id bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    v_version bigint;
    v_action_type text;
    v_id bigint;
    prop recovery_proposals%ROWTYPE;
BEGIN
    IF p_proposal_ttl_ms IS NULL OR p_proposal_ttl_ms NOT BETWEEN 1000 AND 86400000 THEN
        RAISE EXCEPTION 'p_proposal_ttl_ms must be 1 s to 24 h' USING ERRCODE = 'RS005';
    END IF;
    PERFORM 1
    FROM recovery_role_bindings AS b
    JOIN recovery_projects AS p USING (project_id)
    WHERE b.project_id = p_project_id AND b.user_id = p_user_id
      AND b.permission = 'approval.recover'
      AND b.version = p_role_binding_version AND p.version = p_project_version
    FOR SHARE OF b, p;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The execution row first: the lock order of every writer (execution, control, inserts,
    -- head). It also serialises the two people of one case.
    SELECT e.version, d.action_type INTO v_version, v_action_type
    FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d ON d.dispatch_id = e.dispatch_id
    WHERE e.dispatch_id = p_dispatch_id AND d.project_id = p_project_id
      AND e.version = p_expected_execution_version AND e.state = 'executing'
    FOR UPDATE OF e;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    now_ms := resolver_now_ms(p_now_ms);
    IF NOT (p_auth_time_ms >= now_ms - p_max_auth_age_ms
            AND p_auth_time_ms <= now_ms + p_clock_leeway_ms)
       OR NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                      WHERE e.dispatch_id = p_dispatch_id AND e.lease_expires_at_ms <= now_ms)
       OR NOT EXISTS (SELECT 1 FROM approved_action_recovery_controls AS oc
                      WHERE oc.dispatch_id = p_dispatch_id AND oc.status <> 'resolved') THEN
        RETURN;
    END IF;
    SELECT * INTO prop FROM recovery_proposals AS rp
    WHERE rp.dispatch_id = p_dispatch_id AND rp.closed_as IS NULL
    FOR UPDATE;
    IF prop.proposal_id IS NOT NULL AND prop.expires_at_ms <= now_ms THEN
        UPDATE recovery_proposals AS rp SET closed_as = 'expired', closed_at_ms = now_ms
        WHERE rp.proposal_id = prop.proposal_id;
        prop := NULL;
    END IF;
    -- A mutation id names one fact: a used one writes nothing here (the caller tells a
    -- replay from a reuse), except the proposer resending its open proposal.
    IF EXISTS (SELECT 1 FROM recovery_proposals AS rp
               WHERE rp.mutation_id = p_mutation_id OR rp.closed_mutation_id = p_mutation_id)
       OR EXISTS (SELECT 1 FROM approved_action_recovery_resolutions AS r
                  WHERE r.mutation_id = p_mutation_id) THEN
        IF prop.mutation_id = p_mutation_id AND prop.proposed_by = p_user_id
           AND prop.outcome = p_outcome AND prop.reason_code = p_reason_code
           AND prop.evidence_digest IS NOT DISTINCT FROM p_evidence_digest THEN
            RETURN QUERY SELECT p_dispatch_id, v_version, 'proposed'::text, prop.proposal_id;
        END IF;
        RETURN;
    END IF;
    IF prop.proposal_id IS NULL AND NOT resolver_needs_two_people(v_action_type, p_outcome) THEN
        -- One person suffices.
        RETURN QUERY
        SELECT s.dispatch_id, s.version, 'committed'::text, NULL::bigint
        FROM resolver_settle_manual(
            p_dispatch_id, p_mutation_id, p_outcome, p_evidence_digest, p_reason_code,
            p_expected_execution_version, p_user_id, now_ms,
            json_build_array(json_build_object(
                'user_id', p_user_id, 'project_id', p_project_id,
                'project_version', p_project_version,
                'role_binding_version', p_role_binding_version,
                'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', now_ms)))
            AS s;
        RETURN;
    END IF;
    IF prop.proposal_id IS NULL THEN
        -- Bounded: a case that needed 16 proposals needs a conversation, not a 17th.
        IF (SELECT count(*) FROM recovery_proposals AS rp
            WHERE rp.dispatch_id = p_dispatch_id) >= 16 THEN
            RETURN QUERY SELECT p_dispatch_id, v_version, 'proposal_limit'::text, NULL::bigint;
            RETURN;
        END IF;
        INSERT INTO recovery_proposals AS rp (
            dispatch_id, mutation_id, outcome, expected_execution_version, reason_code,
            evidence_digest, proposed_by, project_id, project_version, role_binding_version,
            auth_time_ms, amr, proposed_at_ms, expires_at_ms)
        VALUES (p_dispatch_id, p_mutation_id, p_outcome, p_expected_execution_version,
                p_reason_code, p_evidence_digest, p_user_id, p_project_id, p_project_version,
                p_role_binding_version, p_auth_time_ms, p_amr, now_ms,
                now_ms + p_proposal_ttl_ms)
        RETURNING rp.proposal_id INTO v_id;
        RETURN QUERY SELECT p_dispatch_id, v_version, 'proposed'::text, v_id;
        RETURN;
    END IF;
    IF prop.proposed_by = p_user_id THEN
        RETURN QUERY
        SELECT p_dispatch_id, v_version, 'second_person_required'::text, prop.proposal_id;
        RETURN;
    END IF;
    IF prop.outcome <> p_outcome OR prop.evidence_digest IS DISTINCT FROM p_evidence_digest
       OR prop.expected_execution_version <> v_version THEN
        UPDATE recovery_proposals AS rp
        SET closed_as = 'rejected', closed_at_ms = now_ms, closed_by = p_user_id,
            closed_mutation_id = p_mutation_id, close_reason_code = p_reason_code,
            closed_auth_time_ms = p_auth_time_ms, closed_amr = p_amr
        WHERE rp.proposal_id = prop.proposal_id;
        RETURN QUERY SELECT p_dispatch_id, v_version, 'rejected'::text, prop.proposal_id;
        RETURN;
    END IF;
    -- The proposer must still hold the permission it proposed with.
    PERFORM 1
    FROM recovery_role_bindings AS b
    JOIN recovery_projects AS p USING (project_id)
    WHERE b.project_id = prop.project_id AND b.user_id = prop.proposed_by
      AND b.permission = 'approval.recover'
      AND b.version = prop.role_binding_version AND p.version = prop.project_version
    FOR SHARE OF b, p;
    IF NOT FOUND THEN
        UPDATE recovery_proposals AS rp
        SET closed_as = 'voided', closed_at_ms = now_ms, close_reason_code = 'grant_changed'
        WHERE rp.proposal_id = prop.proposal_id;
        RETURN QUERY SELECT p_dispatch_id, v_version, 'voided'::text, prop.proposal_id;
        RETURN;
    END IF;
    -- Confirmed: closed before the settle, whose version bump would otherwise void it.
    UPDATE recovery_proposals AS rp
    SET closed_as = 'confirmed', closed_at_ms = now_ms, closed_by = p_user_id,
        closed_mutation_id = p_mutation_id, close_reason_code = p_reason_code,
        closed_auth_time_ms = p_auth_time_ms, closed_amr = p_amr
    WHERE rp.proposal_id = prop.proposal_id;
    RETURN QUERY
    SELECT s.dispatch_id, s.version, 'committed'::text, prop.proposal_id
    FROM resolver_settle_manual(
        p_dispatch_id, p_mutation_id, p_outcome, p_evidence_digest, prop.reason_code,
        p_expected_execution_version, prop.proposed_by, now_ms,
        json_build_array(
            json_build_object(
                'user_id', prop.proposed_by, 'project_id', prop.project_id,
                'project_version', prop.project_version,
                'role_binding_version', prop.role_binding_version,
                'auth_time_ms', prop.auth_time_ms, 'amr', prop.amr,
                'authorized_at_ms', prop.proposed_at_ms),
            json_build_object(
                'user_id', p_user_id, 'project_id', p_project_id,
                'project_version', p_project_version,
                'role_binding_version', p_role_binding_version,
                'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', now_ms)))
        AS s;
END
$$;

REVOKE EXECUTE ON FUNCTION resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint, bigint) FROM PUBLIC;

ALTER FUNCTION resolver_commit_automatic(json, bigint) SECURITY INVOKER;
ALTER FUNCTION resolver_record_late_evidence(json, text, bigint, bigint) SECURITY INVOKER;
ALTER FUNCTION resolver_proposal_close(text, text, text, text, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint) SECURITY INVOKER;

CREATE OR REPLACE FUNCTION resolver_two_people_present() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF resolver_needs_two_people(
           (SELECT d.action_type FROM approved_action_dispatches AS d
            WHERE d.dispatch_id = NEW.dispatch_id), NEW.outcome)
       AND (SELECT count(DISTINCT a.user_id) FROM recovery_authorizations AS a
            WHERE a.mutation_id = NEW.mutation_id) < 2 THEN
        RAISE EXCEPTION 'dispatch % needs two people for this decision: its resolution has fewer than two authorizations',
            quote_literal(NEW.dispatch_id)
            USING ERRCODE = 'check_violation',
                  CONSTRAINT = 'ck_recovery_resolutions_two_people';
    END IF;
    RETURN NULL;
END
$$;

DROP FUNCTION resolver_strong_amr(text[]);

DROP FUNCTION resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint, text, text, text, text);
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

REVOKE EXECUTE ON FUNCTION
    resolver_audit_authorization(text, text, text, bigint, bigint, bigint, text[], bigint)
FROM PUBLIC;

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
               p_evidence_digest, p_expected_execution_version, p_actor_user_id, p_reason_code,
               s.finished_at_ms
        FROM settled AS s
        RETURNING dispatch_id, mutation_id, outcome, finding, evidence_digest,
                  expected_execution_version, actor_user_id, reason_code, resolved_at_ms
    ),
    authorization_fact AS (
        INSERT INTO recovery_authorizations (
            mutation_id, user_id, permission, project_id, project_version,
            role_binding_version, auth_time_ms, amr, authorized_at_ms)
        SELECT r.mutation_id, a.user_id, 'approval.recover', a.project_id, a.project_version,
               a.role_binding_version, a.auth_time_ms, a.amr, a.authorized_at_ms
        FROM resolution AS r,
             json_to_recordset(p_authorizations) AS a(
                 user_id text, project_id text, project_version bigint,
                 role_binding_version bigint, auth_time_ms bigint, amr text[],
                 authorized_at_ms bigint)
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
    SELECT s.dispatch_id, s.version FROM settled AS s
$$;

CREATE OR REPLACE FUNCTION resolver_prune_batch(p_run_id bigint, p_limit integer, p_dispatch_ids text[])
RETURNS TABLE (dispatches bigint, audit bigint, evidence bigint, remnants bigint)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    r recovery_prune_runs;
    v_settled text[];
    v_remnants text[] := '{}';
    v_rows text[];
    v_audit text[];
    v_evidence bigint := 0;
    v_n bigint;
BEGIN
    SELECT * INTO r FROM recovery_prune_runs WHERE run_id = p_run_id FOR NO KEY UPDATE;
    IF NOT FOUND OR r.finished_at_ms IS NOT NULL THEN
        RAISE EXCEPTION 'prune run % is not open', p_run_id USING ERRCODE = 'no_data_found';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'prune batch size must be between 1 and 10000'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Deleting only what was exported: a run with an export names its dispatches.
    IF r.export_digest IS NOT NULL AND p_dispatch_ids IS NULL THEN
        RAISE EXCEPTION 'a run with an export prunes only the dispatches it exported'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(p_dispatch_ids) > p_limit THEN
        RAISE EXCEPTION 'more dispatch ids than the batch size'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Settled: terminal execution, resolved control, both older than the cut-off. Locks the
    -- execution, the control and the identity; anything held elsewhere waits for a later run.
    IF p_dispatch_ids IS NULL THEN
        SELECT coalesce(array_agg(s.dispatch_id), '{}') INTO v_settled FROM (
            SELECT c.dispatch_id
            FROM approved_action_recovery_controls AS c
            JOIN approved_action_executions AS e USING (dispatch_id)
            JOIN approved_action_dispatches AS d USING (dispatch_id)
            WHERE c.status = 'resolved' AND c.closed_at_ms < r.cutoff_ms
              AND e.state = ANY (resolver_terminal_states()) AND e.finished_at_ms < r.cutoff_ms
            ORDER BY c.closed_at_ms, c.dispatch_id
            LIMIT p_limit
            FOR UPDATE OF e, c, d SKIP LOCKED) AS s;
    ELSE
        SELECT coalesce(array_agg(s.dispatch_id), '{}') INTO v_settled FROM (
            SELECT c.dispatch_id
            FROM approved_action_recovery_controls AS c
            JOIN approved_action_executions AS e USING (dispatch_id)
            JOIN approved_action_dispatches AS d USING (dispatch_id)
            WHERE c.dispatch_id = ANY (p_dispatch_ids)
              AND c.status = 'resolved' AND c.closed_at_ms < r.cutoff_ms
              AND e.state = ANY (resolver_terminal_states()) AND e.finished_at_ms < r.cutoff_ms
            FOR UPDATE OF e, c, d SKIP LOCKED) AS s;
    END IF;

    -- Audit remnants (include-audit only): identity and resolution left by an earlier prune.
    -- A resolution proves the dispatch was settled; no execution means nothing can run it.
    IF r.include_audit THEN
        SELECT coalesce(array_agg(s.dispatch_id), '{}') INTO v_remnants FROM (
            SELECT d.dispatch_id
            FROM approved_action_dispatches AS d
            JOIN approved_action_recovery_resolutions AS res USING (dispatch_id)
            WHERE d.dispatch_id = ANY (p_dispatch_ids)
              AND res.resolved_at_ms < r.cutoff_ms
              AND NOT EXISTS (SELECT 1 FROM approved_action_executions AS e
                              WHERE e.dispatch_id = d.dispatch_id)
            FOR UPDATE OF d SKIP LOCKED) AS s;
    END IF;

    -- Opens the fact triggers for this function's deletes only (they also require the owner
    -- as current user); closed again below, and discarded with the transaction on any error.
    PERFORM set_config('resolver.prune_active', 'on', true);
    DELETE FROM approved_action_recovery_controls WHERE dispatch_id = ANY (v_settled);
    DELETE FROM approved_action_executions WHERE dispatch_id = ANY (v_settled);
    DELETE FROM action_receipts WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM run_origin_facts WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM package_install_records WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM package_install_targets WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;
    DELETE FROM package_commit_markers WHERE dispatch_id = ANY (v_settled || v_remnants);
    GET DIAGNOSTICS v_n = ROW_COUNT; v_evidence := v_evidence + v_n;

    -- Identity rows go when nothing audits them (closed by the executor's own completion) or
    -- when the audit facts go too; a dispatch a newer one supersedes keeps its identity.
    SELECT coalesce(array_agg(d.dispatch_id), '{}') INTO v_rows
    FROM approved_action_dispatches AS d
    WHERE d.dispatch_id = ANY (v_settled || v_remnants)
      AND (r.include_audit OR NOT EXISTS (
              SELECT 1 FROM approved_action_recovery_resolutions AS res
              WHERE res.dispatch_id = d.dispatch_id))
      AND NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS n
                      WHERE n.supersedes_dispatch_id = d.dispatch_id);
    SELECT coalesce(array_agg(res.dispatch_id), '{}') INTO v_audit
    FROM approved_action_recovery_resolutions AS res
    WHERE res.dispatch_id = ANY (v_rows);

    DELETE FROM recovery_authorizations AS a
    USING approved_action_recovery_resolutions AS res
    WHERE a.mutation_id = res.mutation_id AND res.dispatch_id = ANY (v_audit);
    -- Their audit links go with them (migration 0015): the export carries each link, so
    -- `resolver audit verify --export` still walks the whole chain.
    DELETE FROM recovery_audit_chain AS l
    USING approved_action_recovery_resolutions AS res
    WHERE l.mutation_id = res.mutation_id AND res.dispatch_id = ANY (v_audit);
    -- Late evidence and its watch go by ON DELETE CASCADE from the resolution.
    DELETE FROM approved_action_recovery_resolutions WHERE dispatch_id = ANY (v_audit);
    DELETE FROM approved_action_dispatches WHERE dispatch_id = ANY (v_rows);
    PERFORM set_config('resolver.prune_active', 'off', true);

    dispatches := cardinality(v_settled);
    audit := cardinality(v_audit);
    evidence := v_evidence;
    remnants := cardinality(ARRAY(SELECT unnest(v_remnants) INTERSECT SELECT unnest(v_rows)));
    UPDATE recovery_prune_runs
    SET batches = batches + 1,
        dispatches_pruned = dispatches_pruned + dispatches,
        audit_pruned = audit_pruned + audit,
        evidence_pruned = evidence_pruned + evidence,
        last_batch_at_ms = resolver_now_ms(NULL)
    WHERE run_id = p_run_id;
    RETURN NEXT;
END
$$;

DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_commit_manual(text, text, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], bigint, bigint, bigint, bigint)',
        'resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json)',
        'resolver_prune_batch(bigint, integer, text[])'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;

DROP TRIGGER recovery_late_evidence_definer_write ON recovery_late_evidence;
DROP TRIGGER recovery_proposals_definer_write ON recovery_proposals;
DROP TRIGGER recovery_audit_head_definer_write ON recovery_audit_head;
DROP TRIGGER recovery_audit_chain_definer_write ON recovery_audit_chain;
DROP TRIGGER recovery_authorizations_definer_write ON recovery_authorizations;
DROP TRIGGER approved_action_recovery_resolutions_definer_write
    ON approved_action_recovery_resolutions;
DROP FUNCTION resolver_guard_definer_write();

CREATE OR REPLACE FUNCTION resolver_guard_run_origin() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Inside resolver_prune_batch only (see resolver_reject_mutation).
    IF TG_OP = 'DELETE' THEN
        IF coalesce(current_setting('resolver.prune_active', true), '') = 'on'
           AND (SELECT relowner FROM pg_class WHERE oid = TG_RELID)
               = (SELECT oid FROM pg_roles WHERE rolname = current_user) THEN
            RETURN OLD;
        END IF;
    END IF;
    IF TG_OP = 'DELETE'
       OR (NEW.run_id, NEW.dispatch_id, NEW.idempotency_key, NEW.project_id,
           NEW.action_digest, NEW.attempt, NEW.created_at_ms)
          IS DISTINCT FROM
          (OLD.run_id, OLD.dispatch_id, OLD.idempotency_key, OLD.project_id,
           OLD.action_digest, OLD.attempt, OLD.created_at_ms)
       OR OLD.state <> 'running' THEN
        RAISE EXCEPTION 'run_origin_facts: origin is immutable and state settles once'
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION resolver_reject_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Nested, so an UPDATE never evaluates the check (plpgsql does not short-circuit AND).
    IF TG_OP = 'DELETE' THEN
        IF coalesce(current_setting('resolver.prune_active', true), '') = 'on'
           AND (SELECT relowner FROM pg_class WHERE oid = TG_RELID)
               = (SELECT oid FROM pg_roles WHERE rolname = current_user) THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION '% is insert-only: % rejected', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END
$$;

ALTER TABLE recovery_prune_runs
    DROP CONSTRAINT ck_recovery_prune_runs_audit_range,
    DROP COLUMN audit_first_seq,
    DROP COLUMN audit_last_seq;

ALTER TABLE recovery_proposals
    DROP CONSTRAINT ck_recovery_proposals_signed_whole,
    DROP CONSTRAINT ck_recovery_proposals_signature_hex,
    DROP COLUMN issuer,
    DROP COLUMN token_kid,
    DROP COLUMN signing_kid,
    DROP COLUMN signature;

ALTER TABLE recovery_authorizations
    DROP CONSTRAINT ck_recovery_authorizations_signed_whole,
    DROP CONSTRAINT ck_recovery_authorizations_signature_hex,
    DROP CONSTRAINT ck_recovery_authorizations_signing_kid_shape,
    DROP CONSTRAINT ck_recovery_authorizations_issuer_printable,
    DROP CONSTRAINT ck_recovery_authorizations_token_kid_printable,
    DROP COLUMN issuer,
    DROP COLUMN token_kid,
    DROP COLUMN signing_kid,
    DROP COLUMN signature;
