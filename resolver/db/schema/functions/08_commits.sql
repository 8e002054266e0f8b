-- The three commits, siblings (escalation and the bounded finding statistics in the automatic
-- one, the audit chain in the manual one). Each settles a dispatch (terminal execution, closed
-- control, a resolution where one is due) in one statement under the same lock order
-- (execution row, then control row, then inserts) and the same fences:
--   1. resolver_commit_automatic: the resolver's fenced page commit of verified evidence
--      (and the re-arming or hand-over of the rest), one statement, one round trip.
--   2. resolver_commit_manual: a human decision, with its authorization fact.
--   3. resolver_execution_complete: the executor's own completion (the executor protocol).
-- The only definition: `resolver migrate` applies every file of this folder, in name order,
-- whenever one of them changed (functions before the table migrations, triggers after them;
-- resolver/db/README.md). A change here is the whole change: no migration repeats it.

-- The one routing rule: the status a finding sends its control to. Verified evidence resolves
-- it, a conflict or an unsupported action goes to a human, anything else is re-armed for a
-- retry. The automatic commit applies it and answers it (the replica reports what the
-- database decided; it does not decide again).
CREATE OR REPLACE FUNCTION resolver_finding_status(p_finding text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN resolver_finding_outcome(p_finding) IS NOT NULL THEN 'resolved'
        WHEN p_finding IN ('conflict', 'unsupported') THEN 'manual'
        ELSE 'armed'
    END
$$;

-- The automatic commit's second try at rows its SKIP LOCKED pass skipped: each waits at most
-- 50 ms for any one of those rows, in key order, and answers the ones it locked; a row still
-- held after that (an operator's open transaction, say) makes it answer none of them, and its
-- locks go with its subtransaction. A deadlock cannot outlive the bound either (lock_timeout
-- fires before deadlock_timeout). Only called when a row was skipped, so a page that skipped
-- nothing pays no subtransaction.
CREATE OR REPLACE FUNCTION resolver_commit_wait_executions(p_ids text[])
RETURNS text[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    locked text[] := '{}';
    saved text := current_setting('lock_timeout');
BEGIN
    BEGIN
        PERFORM set_config('lock_timeout', '50ms', true);
        SELECT coalesce(array_agg(e.dispatch_id), '{}') INTO locked
        FROM (SELECT e.dispatch_id FROM approved_action_executions AS e
              WHERE e.dispatch_id = ANY(p_ids)
              ORDER BY e.dispatch_id
              FOR UPDATE) AS e;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        locked := '{}';
    END;
    PERFORM set_config('lock_timeout', saved, true);
    RETURN locked;
END
$$;

CREATE OR REPLACE FUNCTION resolver_commit_wait_controls(p_ids text[])
RETURNS text[]
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    locked text[] := '{}';
    saved text := current_setting('lock_timeout');
BEGIN
    BEGIN
        PERFORM set_config('lock_timeout', '50ms', true);
        SELECT coalesce(array_agg(c.dispatch_id), '{}') INTO locked
        FROM (SELECT c.dispatch_id FROM approved_action_recovery_controls AS c
              WHERE c.dispatch_id = ANY(p_ids)
              ORDER BY c.dispatch_id
              FOR UPDATE) AS c;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        locked := '{}';
    END;
    PERFORM set_config('lock_timeout', saved, true);
    RETURN locked;
END
$$;

-- 1. The automatic commit of one claimed page (see queries.sql, commit_automatic).
-- SECURITY DEFINER: the replicas hold no write privilege on executions or
-- resolutions, so this fenced commit is their only way to settle a dispatch; it records no
-- human decision (a manual resolution needs resolver_commit_manual on the call stack).
CREATE OR REPLACE FUNCTION resolver_commit_automatic(p_items json, p_now_ms bigint DEFAULT NULL)
RETURNS TABLE (dispatch_id text, status text, manual_reason text)
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
    --, and only what is still held after that is left out.
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
    now_ms := resolver_protocol_now_ms(p_now_ms);
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
    routed AS (
        -- Why a control goes to a person, decided here once: its finding needs one
        -- (`conflict`, `unsupported`), or a finding that would re-arm outlasted its window
        -- (an escalation). The answer carries it, so no replica re-derives the routing.
        SELECT f.*,
               CASE WHEN f.status <> 'manual' THEN NULL
                    WHEN resolver_finding_status(f.finding) = 'manual' THEN f.finding
                    ELSE 'evidence_window_elapsed' END AS manual_reason
        FROM fenced AS f
    ),
    terminal AS (
        UPDATE approved_action_executions AS e
        SET state = resolver_finding_outcome(f.finding),
            version = e.version + 1,
            finished_at_ms = now_ms,
            result_code = f.result_code,
            evidence_digest = f.evidence_digest
        FROM routed AS f
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
            manual_reason = f.manual_reason,
            last_finding = f.finding,
            finding_count = c.finding_count + 1,
            -- Bounded statistics: at most one key per finding kind, two times, two codes.
            finding_counts = c.finding_counts || jsonb_build_object(
                f.finding, coalesce((c.finding_counts ->> f.finding)::bigint, 0) + 1),
            first_inspected_at_ms = coalesce(c.first_inspected_at_ms, now_ms),
            last_inspected_at_ms = now_ms,
            last_failure_class = coalesce(f.failure, c.last_failure_class),
            -- Why the evidence says what it says: the provider's bounded
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
            -- When it escalates if the evidence stays as it is: the window
            -- counts from the first inspection, like the escalation above.
            escalates_at_ms = CASE WHEN f.status = 'armed' AND f.escalate_after_ms IS NOT NULL
                                   THEN coalesce(c.first_inspected_at_ms, now_ms)
                                        + f.escalate_after_ms END,
            (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
                = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version))
        FROM routed AS f
        WHERE c.dispatch_id = f.dispatch_id
    ),
    resolution AS (
        INSERT INTO approved_action_recovery_resolutions (
            dispatch_id, mutation_id, source, outcome, finding, evidence_digest, result_code,
            expected_execution_version, resolved_at_ms)
        SELECT f.dispatch_id, f.mutation_id, 'automatic',
               resolver_finding_outcome(f.finding),
               f.finding, f.evidence_digest, f.result_code, f.execution_version, now_ms
        FROM routed AS f
        WHERE f.status = 'resolved'
    )
    SELECT f.dispatch_id, f.status, f.manual_reason FROM routed AS f;
END
$$;

-- 2. The manual commit: a person's signed act on a case (decide alone, propose the first of
-- two decisions, confirm the second) with its authorization fact, and for a decision the
-- resolution and the terminal state, in one transaction. Fenced on the grant and its
-- project/role-binding versions (locked FOR SHARE so a concurrent revocation waits or wins),
-- authentication no older than the policy's bound on the database clock, the expected
-- execution version, the execution being recovery_required (lease expired on the database
-- clock) and its control still open. No row: a fence held and nothing applied (the caller
-- explains why).
--
-- SECURITY DEFINER, like the automatic commit: the API's role holds no write privilege on what
-- a decision records, and this function is the only writer of human decisions (a trigger on
-- each fact table looks for it on the call stack). Each person's fact arrives signed by the API
-- (resolver.human.signing) over the act it names (`p_act`), the request's mutation id, the
-- proposal it confirms, the decision and execution version, the person, the token's issuer and
-- key id, and when the API verified the token (`p_verified_at_ms`, the database clock as the
-- API read it). The database cannot check an Ed25519 signature; it checks everything else the
-- fact claims, and `resolver audit verify --public-keys` checks the signature:
--   - once only: a mutation id or a signature already recorded is refused (RS007), and so is a
--     fact the API verified further than the policy's clock leeway from now (RS007);
--   - the act is this function's and the case's: `decide` where one person settles it,
--     `propose` where a two-person rule applies and no proposal is open, `confirm` of exactly
--     the open proposal, by someone else, on the same decision. Anything else is refused
--     (RS008): a propose fact used as a confirm, a confirm of a proposal that is not open
--     (withdrawn, rejected, expired, confirmed), a reject or withdraw fact;
--   - the bounds are the policy writer's (recovery_decision_policy): a caller may pass a
--     tighter p_max_auth_age_ms or p_proposal_ttl_ms, a looser one is refused (RS005).
-- Answers 'committed', 'proposed', 'voided' (the proposer lost the permission: the proposal is
-- void) or 'proposal_limit'. Strong authentication is checked here too (resolver_strong_amr),
-- whatever the caller checked before.
CREATE OR REPLACE FUNCTION resolver_commit_manual(
    p_dispatch_id text, p_mutation_id text, p_act text, p_proposal_id bigint, p_outcome text,
    p_evidence_digest text, p_reason_code text, p_expected_execution_version bigint,
    p_user_id text, p_project_id text, p_project_version bigint, p_role_binding_version bigint,
    p_auth_time_ms bigint, p_amr text[], p_issuer text, p_token_kid text, p_signing_kid text,
    p_signature text, p_verified_at_ms bigint, p_max_auth_age_ms bigint DEFAULT NULL,
    p_proposal_ttl_ms bigint DEFAULT NULL, p_now_ms bigint DEFAULT NULL,
    p_tamper_acknowledged boolean DEFAULT false, p_tampering_reasons text[] DEFAULT '{}'
)
RETURNS TABLE (dispatch_id text, version bigint, result text, proposal_id bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    v_version bigint;
    v_action_type text;
    v_id bigint;
    bounds record;
    prop recovery_proposals%ROWTYPE;
BEGIN
    IF p_act IS NULL OR p_act NOT IN ('decide', 'propose', 'confirm') THEN
        RAISE EXCEPTION 'resolver_commit_manual records a decide, propose or confirm fact, not %',
            coalesce(quote_literal(p_act), 'NULL') USING ERRCODE = 'RS008';
    END IF;
    IF (p_act = 'confirm') <> (p_proposal_id IS NOT NULL) THEN
        RAISE EXCEPTION 'p_proposal_id names the proposal a confirm fact confirms, and only then'
            USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION 'p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]'
            USING ERRCODE = 'RS005';
    END IF;
    PERFORM resolver_fact_shape(p_amr, p_issuer, p_token_kid, p_signing_kid, p_signature,
                                p_verified_at_ms);
    SELECT * INTO bounds FROM resolver_act_bounds(p_max_auth_age_ms, p_proposal_ttl_ms);
    PERFORM resolver_fact_unused(p_mutation_id, p_signature);
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
    now_ms := resolver_protocol_now_ms(p_now_ms);
    PERFORM resolver_fact_fresh(p_verified_at_ms, now_ms, bounds.clock_leeway_ms);
    IF NOT (p_auth_time_ms >= now_ms - bounds.max_auth_age_ms
            AND p_auth_time_ms <= now_ms + bounds.clock_leeway_ms)
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
    -- Possibly forged evidence is never confirmed as succeeded without the decision's own
    -- acknowledgement (the caller names the reasons that suggest tampering: the providers
    -- declare them). The control is read under a lock, after the execution's (the lock
    -- order), so no inspection changes the evidence between this check and the commit.
    IF p_outcome = 'succeeded' AND NOT coalesce(p_tamper_acknowledged, false) AND EXISTS (
           SELECT 1 FROM approved_action_recovery_controls AS tc
           WHERE tc.dispatch_id = p_dispatch_id AND tc.last_finding = 'conflict'
             AND tc.last_reason = ANY (coalesce(p_tampering_reasons, '{}'))
           FOR SHARE) THEN
        RETURN QUERY SELECT p_dispatch_id, v_version, 'tamper_unacknowledged'::text, NULL::bigint;
        RETURN;
    END IF;
    IF prop.proposal_id IS NULL THEN
        IF p_act = 'confirm' THEN
            RAISE EXCEPTION 'proposal % is not open on dispatch %: nothing to confirm',
                p_proposal_id, quote_literal(p_dispatch_id) USING ERRCODE = 'RS008';
        END IF;
        IF NOT resolver_needs_two_people(v_action_type, p_outcome) THEN
            IF p_act <> 'decide' THEN
                RAISE EXCEPTION 'one person decides this case: a decide fact, not %', p_act
                    USING ERRCODE = 'RS008';
            END IF;
            RETURN QUERY
            SELECT s.dispatch_id, s.version, 'committed'::text, NULL::bigint
            FROM resolver_settle_manual(
                p_dispatch_id, p_mutation_id, p_outcome, p_evidence_digest, p_reason_code,
                p_expected_execution_version, p_user_id, now_ms,
                json_build_array(json_build_object(
                    'user_id', p_user_id, 'project_id', p_project_id,
                    'project_version', p_project_version,
                    'role_binding_version', p_role_binding_version,
                    'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', now_ms,
                    'issuer', p_issuer, 'token_kid', p_token_kid,
                    'signing_kid', p_signing_kid, 'signature', p_signature,
                    'act', 'decide', 'act_mutation_id', p_mutation_id,
                    'verified_at_ms', p_verified_at_ms)))
                AS s;
            RETURN;
        END IF;
        IF p_act <> 'propose' THEN
            RAISE EXCEPTION 'this decision needs two people: its first fact is a propose fact, not %',
                p_act USING ERRCODE = 'RS008';
        END IF;
        -- Bounded: a case that needed 16 proposals needs a conversation, not a 17th.
        IF (SELECT count(*) FROM recovery_proposals AS rp
            WHERE rp.dispatch_id = p_dispatch_id) >= 16 THEN
            RETURN QUERY SELECT p_dispatch_id, v_version, 'proposal_limit'::text, NULL::bigint;
            RETURN;
        END IF;
        INSERT INTO recovery_proposals AS rp (
            dispatch_id, mutation_id, outcome, expected_execution_version, reason_code,
            evidence_digest, proposed_by, project_id, project_version, role_binding_version,
            auth_time_ms, amr, proposed_at_ms, expires_at_ms, issuer, token_kid, signing_kid,
            signature, verified_at_ms)
        VALUES (p_dispatch_id, p_mutation_id, p_outcome, p_expected_execution_version,
                p_reason_code, p_evidence_digest, p_user_id, p_project_id, p_project_version,
                p_role_binding_version, p_auth_time_ms, p_amr, now_ms,
                now_ms + bounds.proposal_ttl_ms, p_issuer, p_token_kid, p_signing_kid,
                p_signature, p_verified_at_ms)
        RETURNING rp.proposal_id INTO v_id;
        RETURN QUERY SELECT p_dispatch_id, v_version, 'proposed'::text, v_id;
        RETURN;
    END IF;
    -- A proposal is open: only its confirmation by a second person is an act here (ending it
    -- otherwise is resolver_proposal_close's).
    IF p_act <> 'confirm' OR p_proposal_id <> prop.proposal_id THEN
        RAISE EXCEPTION 'proposal % is open on dispatch %: only a confirm fact naming it is recorded here, not % of proposal %',
            prop.proposal_id, quote_literal(p_dispatch_id), p_act,
            coalesce(p_proposal_id::text, 'none') USING ERRCODE = 'RS008';
    END IF;
    IF prop.proposed_by = p_user_id THEN
        RAISE EXCEPTION 'the proposer of proposal % cannot confirm it: a second person does',
            prop.proposal_id USING ERRCODE = 'RS008';
    END IF;
    IF prop.outcome <> p_outcome OR prop.evidence_digest IS DISTINCT FROM p_evidence_digest
       OR prop.expected_execution_version <> v_version THEN
        RAISE EXCEPTION 'the confirm fact names another decision than proposal %',
            prop.proposal_id USING ERRCODE = 'RS008';
    END IF;
    IF prop.verified_at_ms IS NULL THEN
        RAISE EXCEPTION 'proposal %''s fact names no act: propose again', prop.proposal_id
            USING ERRCODE = 'RS008';
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
                'authorized_at_ms', prop.proposed_at_ms, 'issuer', prop.issuer,
                'token_kid', prop.token_kid, 'signing_kid', prop.signing_kid,
                'signature', prop.signature, 'act', 'propose',
                'act_mutation_id', prop.mutation_id, 'verified_at_ms', prop.verified_at_ms),
            json_build_object(
                'user_id', p_user_id, 'project_id', p_project_id,
                'project_version', p_project_version,
                'role_binding_version', p_role_binding_version,
                'auth_time_ms', p_auth_time_ms, 'amr', p_amr, 'authorized_at_ms', now_ms,
                'issuer', p_issuer, 'token_kid', p_token_kid, 'signing_kid', p_signing_kid,
                'signature', p_signature, 'act', 'confirm', 'act_mutation_id', p_mutation_id,
                'proposal_id', prop.proposal_id, 'verified_at_ms', p_verified_at_ms)))
        AS s;
END
$$;

-- The settling write of a manual decision whose fences resolver_commit_manual checked (the
-- execution row locked): terminal state, closed control, resolution, one authorization fact
-- per person in `p_authorizations`, in one statement; then the decision's audit link, built
-- from what that statement stored (resolver_audit_decision, what `resolver audit verify`
-- rebuilds it with).
CREATE OR REPLACE FUNCTION resolver_settle_manual(
    p_dispatch_id text, p_mutation_id text, p_outcome text, p_evidence_digest text,
    p_reason_code text, p_expected_execution_version bigint, p_actor_user_id text,
    p_now_ms bigint, p_authorizations json
)
RETURNS TABLE (dispatch_id text, version bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
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
            --; the queue itself reads open (status 'manual') controls only.
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
        RETURNING mutation_id
    ),
    authorization_fact AS (
        INSERT INTO recovery_authorizations (
            mutation_id, user_id, permission, project_id, project_version,
            role_binding_version, auth_time_ms, amr, authorized_at_ms, issuer, token_kid,
            signing_kid, signature, act, act_mutation_id, proposal_id, verified_at_ms)
        SELECT r.mutation_id, a.user_id, 'approval.recover', a.project_id, a.project_version,
               a.role_binding_version, a.auth_time_ms, a.amr, a.authorized_at_ms, a.issuer,
               a.token_kid, a.signing_kid, a.signature, a.act, a.act_mutation_id,
               a.proposal_id, a.verified_at_ms
        FROM resolution AS r,
             json_to_recordset(p_authorizations) AS a(
                 user_id text, project_id text, project_version bigint,
                 role_binding_version bigint, auth_time_ms bigint, amr text[],
                 authorized_at_ms bigint, issuer text, token_kid text, signing_kid text,
                 signature text, act text, act_mutation_id text, proposal_id bigint,
                 verified_at_ms bigint)
    )
    SELECT s.dispatch_id, s.version INTO dispatch_id, version FROM settled AS s;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The audit chain: the decision's canonical content, read back from what the statement
    -- above stored, linked after the chain's head.
    PERFORM resolver_audit_append(p_mutation_id, p_dispatch_id,
                                  resolver_audit_decision(p_mutation_id), p_now_ms);
    RETURN NEXT;
END
$$;

-- A person ends an open proposal without a decision: its proposer withdraws it
-- (p_act 'withdraw'), someone else with the permission rejects it ('reject'). An act like a
-- decision: fenced alike (grant FOR SHARE, fresh authentication within the policy's bound; the
-- execution row is locked first, as by the commit), signed over the act, its mutation id and
-- the proposal it ends, consumed once (RS007 for a mutation id or signature already recorded,
-- or a fact verified outside the clock leeway), and a link of the audit chain carrying the
-- proposer's fact and the closer's. Refused (RS008): another act, a proposal that is not the
-- open one (already withdrawn, rejected, expired or confirmed), a withdraw by anyone but the
-- proposer, a reject by the proposer. Answers 'withdrawn', 'rejected', or 'stale_auth' (the
-- authentication is older than the bound); no row: the grant fence failed. SECURITY DEFINER:
-- the API's role holds no write privilege on proposals or the chain.
CREATE OR REPLACE FUNCTION resolver_proposal_close(
    p_dispatch_id text, p_mutation_id text, p_act text, p_proposal_id bigint,
    p_reason_code text, p_user_id text, p_project_id text, p_project_version bigint,
    p_role_binding_version bigint, p_auth_time_ms bigint, p_amr text[], p_issuer text,
    p_token_kid text, p_signing_kid text, p_signature text, p_verified_at_ms bigint,
    p_max_auth_age_ms bigint DEFAULT NULL, p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (dispatch_id text, result text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    v_closed_as text;
    bounds record;
    prop recovery_proposals%ROWTYPE;
BEGIN
    IF p_act IS NULL OR p_act NOT IN ('withdraw', 'reject') THEN
        RAISE EXCEPTION 'resolver_proposal_close records a reject or withdraw fact, not %',
            coalesce(quote_literal(p_act), 'NULL') USING ERRCODE = 'RS008';
    END IF;
    IF p_proposal_id IS NULL THEN
        RAISE EXCEPTION 'p_proposal_id must name the proposal the fact ends'
            USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION 'p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]'
            USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_code(p_reason_code), false) THEN
        RAISE EXCEPTION 'p_reason_code must match [a-z0-9_.-]{1,64}' USING ERRCODE = 'RS005';
    END IF;
    PERFORM resolver_fact_shape(p_amr, p_issuer, p_token_kid, p_signing_kid, p_signature,
                                p_verified_at_ms);
    SELECT * INTO bounds FROM resolver_act_bounds(p_max_auth_age_ms, NULL);
    PERFORM resolver_fact_unused(p_mutation_id, p_signature);
    v_closed_as := CASE p_act WHEN 'withdraw' THEN 'withdrawn' ELSE 'rejected' END;
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
    PERFORM 1 FROM approved_action_executions AS e
    JOIN approved_action_dispatches AS d ON d.dispatch_id = e.dispatch_id
    WHERE e.dispatch_id = p_dispatch_id AND d.project_id = p_project_id
    FOR UPDATE OF e;
    now_ms := resolver_protocol_now_ms(p_now_ms);
    PERFORM resolver_fact_fresh(p_verified_at_ms, now_ms, bounds.clock_leeway_ms);
    dispatch_id := p_dispatch_id;
    IF NOT (p_auth_time_ms >= now_ms - bounds.max_auth_age_ms
            AND p_auth_time_ms <= now_ms + bounds.clock_leeway_ms) THEN
        result := 'stale_auth';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT * INTO prop FROM recovery_proposals AS rp
    WHERE rp.dispatch_id = p_dispatch_id AND rp.project_id = p_project_id
      AND rp.closed_as IS NULL
    FOR UPDATE;
    IF prop.proposal_id IS NOT NULL AND prop.expires_at_ms <= now_ms THEN
        RAISE EXCEPTION 'proposal % expired: it is no longer open', prop.proposal_id
            USING ERRCODE = 'RS008';
    END IF;
    IF prop.proposal_id IS NULL OR prop.proposal_id <> p_proposal_id THEN
        RAISE EXCEPTION 'proposal % is not open on dispatch %', p_proposal_id,
            quote_literal(p_dispatch_id) USING ERRCODE = 'RS008';
    END IF;
    IF p_act = 'withdraw' AND prop.proposed_by <> p_user_id THEN
        RAISE EXCEPTION 'only the proposer withdraws proposal %', prop.proposal_id
            USING ERRCODE = 'RS008';
    END IF;
    IF p_act = 'reject' AND prop.proposed_by = p_user_id THEN
        RAISE EXCEPTION 'the proposer of proposal % withdraws it, never rejects it',
            prop.proposal_id USING ERRCODE = 'RS008';
    END IF;
    IF prop.verified_at_ms IS NULL THEN
        RAISE EXCEPTION 'proposal %''s fact names no act', prop.proposal_id
            USING ERRCODE = 'RS008';
    END IF;
    UPDATE recovery_proposals AS rp
    SET closed_as = v_closed_as, closed_at_ms = now_ms, closed_by = p_user_id,
        closed_mutation_id = p_mutation_id, close_reason_code = p_reason_code,
        closed_auth_time_ms = p_auth_time_ms, closed_amr = p_amr,
        closed_project_version = p_project_version,
        closed_role_binding_version = p_role_binding_version, closed_issuer = p_issuer,
        closed_token_kid = p_token_kid, closed_signing_kid = p_signing_kid,
        closed_signature = p_signature, closed_verified_at_ms = p_verified_at_ms
    WHERE rp.proposal_id = prop.proposal_id;
    PERFORM resolver_audit_append(p_mutation_id, p_dispatch_id,
                                  resolver_audit_close(p_mutation_id), now_ms);
    result := v_closed_as;
    RETURN NEXT;
END
$$;

-- 3. The completion: terminal state fenced on the executor's owner/token/version, the
-- control closed (closed_by 'completion') in the same statement; an exact replay of a
-- completion, or of a resolution that won first, is answered 'replayed'.
CREATE OR REPLACE FUNCTION resolver_execution_complete(
    p_dispatch_id text, p_owner text, p_token uuid, p_version bigint, p_outcome text,
    p_result_code text, p_mutation_id text, p_evidence_digest text DEFAULT NULL,
    p_now_ms bigint DEFAULT NULL
)
RETURNS TABLE (
    dispatch_id text, result text, state text, version bigint
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER ROWS 1 AS $$
#variable_conflict use_column
DECLARE
    now_ms bigint;
    seen record;
BEGIN
    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed') THEN
        RAISE EXCEPTION 'p_outcome must be succeeded or failed' USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_code(p_result_code), false) THEN
        RAISE EXCEPTION 'p_result_code must match [a-z0-9_.-]{1,64}' USING ERRCODE = 'RS005';
    END IF;
    IF NOT coalesce(resolver_is_id(p_mutation_id), false) THEN
        RAISE EXCEPTION 'p_mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]'
            USING ERRCODE = 'RS005';
    END IF;
    IF p_evidence_digest IS NOT NULL AND NOT resolver_is_sha256_hex(p_evidence_digest) THEN
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
            -- manual_at_ms stays, as in the manual settle.
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

-- Executable by PUBLIC by default; resolver/db/grants.sql grants the routing rule and the
-- automatic commit to the runtime role, the manual commit and the proposal close to the API
-- role, and the completion to the executor role; the settle, to nobody.
REVOKE EXECUTE ON FUNCTION
    resolver_finding_status(text),
    resolver_commit_wait_executions(text[]),
    resolver_commit_wait_controls(text[]),
    resolver_commit_automatic(json, bigint),
    resolver_commit_manual(text, text, text, bigint, text, text, text, bigint, text, text,
                           bigint, bigint, bigint, text[], text, text, text, text, bigint,
                           bigint, bigint, bigint, boolean, text[]),
    resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json),
    resolver_proposal_close(text, text, text, bigint, text, text, text, bigint, bigint, bigint,
                            text[], text, text, text, text, bigint, bigint, bigint),
    resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint)
FROM PUBLIC;

-- Tables resolve in the migrated schema, whatever the caller's search_path (pg_temp last: a
-- caller's temporary table can never shadow one).
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'resolver_commit_automatic(json, bigint)',
        'resolver_commit_wait_executions(text[])',
        'resolver_commit_wait_controls(text[])',
        'resolver_commit_manual(text, text, text, bigint, text, text, text, bigint, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint, bigint, boolean, text[])',
        'resolver_settle_manual(text, text, text, text, text, bigint, text, bigint, json)',
        'resolver_proposal_close(text, text, text, bigint, text, text, text, bigint, bigint, bigint, text[], text, text, text, text, bigint, bigint, bigint)',
        'resolver_execution_complete(text, text, uuid, bigint, text, text, text, text, bigint)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       fn, current_schema());
    END LOOP;
END
$$;
