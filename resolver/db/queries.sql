-- Every runtime statement of the resolver and the executor API, named noun-first.
-- Loaded by resolver/db/statements.py; tests/integration/schema/test_statements.py runs each one.
-- `resolver_now_ms(%(now_ms)s)` is the database clock; `now_ms` is NULL outside tests.
-- Global lock order: execution row, then control row, then inserts. The claim locks
-- controls only and never waits (SKIP LOCKED).

-- name: schema_revision
-- The Alembic revision the schema is at (start-up and readiness checks).
SELECT version_num FROM alembic_version;

-- name: schema_revision_rename
-- `resolver migrate`, before Alembic reads the revision: a database stamped with a revision
-- id this release renamed is moved to the new id (`renamed` maps old id -> new id, as JSON).
-- The schema under it is the same; only the name of the revision changed.
UPDATE alembic_version AS v
SET version_num = r.value
FROM json_each_text(%(renamed)s::json) AS r
WHERE v.version_num = r.key
RETURNING r.key, r.value;

-- name: schema_revision_stamp
-- `resolver migrate --downgrade` to a released head: the stamp that release knows its schema by.
UPDATE alembic_version SET version_num = %(stamp)s WHERE version_num = %(revision)s;

-- name: ping
SELECT 1;

-- name: dispatch_create
-- The executor protocol (docs/executor-protocol.md): each transition is a
-- fenced function on the database clock; a refusal raises SQLSTATE class RS.
SELECT dispatch_id, created, created_at_ms
FROM resolver_dispatch_create_v2(
    p_dispatch_id => %(dispatch_id)s, p_approval_request_id => %(approval_request_id)s,
    p_project_id => %(project_id)s, p_action_type => %(action_type)s,
    p_action_digest => %(action_digest)s, p_idempotency_key => %(idempotency_key)s,
    p_schema_version => %(schema_version)s, p_supersedes_dispatch_id => %(supersedes_dispatch_id)s,
    p_action_summary => %(action_summary)s::jsonb);

-- name: execution_lease
SELECT dispatch_id, owner, token::text, version, attempt, lease_expires_at_ms, state
FROM resolver_execution_lease(
    p_dispatch_id => %(dispatch_id)s, p_owner => %(owner)s, p_lease_ms => %(lease_ms)s,
    p_now_ms => %(now_ms)s);

-- name: execution_start
SELECT dispatch_id, owner, token::text, version, attempt, lease_expires_at_ms, state
FROM resolver_execution_start(
    p_dispatch_id => %(dispatch_id)s, p_owner => %(owner)s, p_token => %(token)s::uuid,
    p_version => %(version)s, p_lease_ms => %(lease_ms)s, p_now_ms => %(now_ms)s);

-- name: execution_lease_start
-- The executor SDK's run, in one statement (one transaction, one round trip): the lease, the
-- start barrier and the identity the receipt is signed with, each call LATERAL to the one
-- before it (a VOLATILE function's statements see what the calls before it wrote). A refusal
-- by any of them raises and leaves nothing written: the barrier is crossed, durably, or not.
SELECT s.dispatch_id, s.owner, s.token::text, s.version, s.attempt, s.lease_expires_at_ms,
       s.state, i.schema_version, i.approval_request_id, i.project_id, i.action_type,
       i.action_digest, i.idempotency_key, i.started_at_ms, i.db_now_ms
FROM resolver_execution_lease(
    p_dispatch_id => %(dispatch_id)s, p_owner => %(owner)s, p_lease_ms => %(lease_ms)s,
    p_now_ms => %(now_ms)s) AS l
CROSS JOIN LATERAL resolver_execution_start(
    p_dispatch_id => l.dispatch_id, p_owner => l.owner, p_token => l.token,
    p_version => l.version, p_lease_ms => %(lease_ms)s, p_now_ms => %(now_ms)s) AS s
CROSS JOIN LATERAL resolver_receipt_identity(
    p_dispatch_id => s.dispatch_id, p_owner => s.owner, p_token => s.token,
    p_version => s.version, p_now_ms => %(now_ms)s) AS i;

-- name: execution_start_identity
-- The start barrier and the receipt's identity in one statement, for a run that leased first
-- (and checked what it had to between the lease and the barrier).
SELECT s.dispatch_id, s.owner, s.token::text, s.version, s.attempt, s.lease_expires_at_ms,
       s.state, i.schema_version, i.approval_request_id, i.project_id, i.action_type,
       i.action_digest, i.idempotency_key, i.started_at_ms, i.db_now_ms
FROM resolver_execution_start(
    p_dispatch_id => %(dispatch_id)s, p_owner => %(owner)s, p_token => %(token)s::uuid,
    p_version => %(version)s, p_lease_ms => %(lease_ms)s, p_now_ms => %(now_ms)s) AS s
CROSS JOIN LATERAL resolver_receipt_identity(
    p_dispatch_id => s.dispatch_id, p_owner => s.owner, p_token => s.token,
    p_version => s.version, p_now_ms => %(now_ms)s) AS i;

-- name: execution_renew
SELECT dispatch_id, owner, token::text, version, attempt, lease_expires_at_ms, state
FROM resolver_execution_renew(
    p_dispatch_id => %(dispatch_id)s, p_owner => %(owner)s, p_token => %(token)s::uuid,
    p_version => %(version)s, p_lease_ms => %(lease_ms)s, p_now_ms => %(now_ms)s);

-- name: execution_complete
SELECT dispatch_id, result, state, version
FROM resolver_execution_complete(
    p_dispatch_id => %(dispatch_id)s, p_owner => %(owner)s, p_token => %(token)s::uuid,
    p_version => %(version)s, p_outcome => %(outcome)s, p_result_code => %(result_code)s,
    p_mutation_id => %(mutation_id)s, p_evidence_digest => %(evidence_digest)s,
    p_now_ms => %(now_ms)s);

-- name: receipt_identity
-- In the caller's transaction: the identity a receipt must carry, the execution locked FOR
-- SHARE under the executor's fence until that transaction ends.
SELECT schema_version, dispatch_id, approval_request_id, project_id, action_type,
       action_digest, idempotency_key, attempt, started_at_ms, db_now_ms
FROM resolver_receipt_identity(
    p_dispatch_id => %(dispatch_id)s, p_owner => %(owner)s, p_token => %(token)s::uuid,
    p_version => %(version)s, p_now_ms => %(now_ms)s);

-- name: receipt_write_complete
-- The receipt's write and the completion with its digest in one statement, in the caller's
-- transaction (an SDK completing in the mutation's transaction): the completion LATERAL to
-- the write, fenced on the same lease; a refusal of either raises and the caller rolls back.
SELECT w.dispatch_id, w.written_at_ms, pg_current_xact_id()::text AS xact_id, c.result
FROM resolver_receipt_write(
    p_dispatch_id => %(dispatch_id)s, p_owner => %(owner)s, p_token => %(token)s::uuid,
    p_version => %(version)s, p_receipt => %(receipt)s) AS w
CROSS JOIN LATERAL resolver_execution_complete(
    p_dispatch_id => w.dispatch_id, p_owner => %(owner)s, p_token => %(token)s::uuid,
    p_version => %(version)s, p_outcome => %(outcome)s, p_result_code => %(result_code)s,
    p_mutation_id => %(mutation_id)s, p_evidence_digest => %(evidence_digest)s,
    p_now_ms => %(now_ms)s) AS c;

-- name: receipt_write
-- The transaction's own id comes back with the receipt: what the executor SDK judges a lost
-- COMMIT reply by (resolver/db/mutation.py), at no round trip of its own.
SELECT dispatch_id, written_at_ms, pg_current_xact_id()::text AS xact_id
FROM resolver_receipt_write(
    p_dispatch_id => %(dispatch_id)s, p_owner => %(owner)s, p_token => %(token)s::uuid,
    p_version => %(version)s, p_receipt => %(receipt)s);

-- name: execution_get
SELECT e.dispatch_id, e.state, e.owner, e.token::text, e.version, e.attempt,
       e.lease_expires_at_ms, e.started_at_ms, e.finished_at_ms, e.result_code,
       e.completion_mutation_id, e.evidence_digest,
       r.source AS resolution_source, r.outcome AS resolution_outcome,
       r.evidence_digest AS resolution_evidence_digest,
       resolver_now_ms(%(now_ms)s) AS db_now_ms
FROM approved_action_executions AS e
LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
WHERE e.dispatch_id = %(dispatch_id)s;

-- fragment: claimable_control
-- The one definition of "claimable", for the control aliased `c` and a CTE `now(ms)`: armed,
-- due, no live recovery lease, and its execution recovery_required (executing, lease
-- expired) at the version the control was armed for. The claim, the backlog (metrics and
-- `resolver status`) include it; `now` is read through scalar subqueries so that the
-- planner keeps the due index's bound and order (a join would hide them).
-- OFFSET 0 keeps the execution test a per-row probe (one primary-key lookup per due control,
-- in due order, stopping at the page) instead of a semi-join the planner may choose to run
-- as a hash of every executing execution: with 100,000 settled dispatches and statistics
-- that made the join look selective, it did, at 20 ms a claim (test_claim_cost.py).
c.status = 'armed'
AND c.next_scan_at_ms <= (SELECT ms FROM now)
AND (c.recovery_lease_expires_at_ms IS NULL
     OR c.recovery_lease_expires_at_ms <= (SELECT ms FROM now))
AND EXISTS (
    SELECT 1 FROM approved_action_executions AS e
    WHERE e.dispatch_id = c.dispatch_id
      AND e.state = 'executing' AND e.lease_expires_at_ms <= (SELECT ms FROM now)
      AND e.version = c.execution_version
    OFFSET 0)

-- name: recovery_claim_due_page
-- One keyset page of due controls whose execution is recovery_required (executing with an
-- expired lease), each row with when the next armed control falls due. The claimed row's next_scan_at_ms moves to the recovery lease expiry, so
-- a replica that dies holding it hands it back by time alone.
-- `now` is read through scalar subqueries (one value, an index bound), not joined: a join
-- hides the due index's order from the planner, which then sorts every due row per claim.
-- Run alone (autocommit), the claim commits without waiting for its WAL flush
-- (set_config is_local): a claim lost in a crash only makes its page claimable again, a
-- stale holder's commit is fenced out, and the durable page commit flushes this WAL first.
WITH now AS (
    SELECT resolver_now_ms(%(now_ms)s) AS ms,
           set_config('synchronous_commit', 'off', true) AS async_commit
),
due AS (
    SELECT c.dispatch_id
    FROM approved_action_recovery_controls AS c
    WHERE
        -- include: claimable_control
    ORDER BY c.next_scan_at_ms, c.dispatch_id
    LIMIT %(page_size)s
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE approved_action_recovery_controls AS c
SET recovery_owner = %(owner)s,
    recovery_token = gen_random_uuid(),
    recovery_version = c.recovery_version + 1,
    recovery_lease_expires_at_ms = now.ms + %(lease_ms)s,
    next_scan_at_ms = now.ms + %(lease_ms)s
FROM due, now, approved_action_executions AS e, approved_action_dispatches AS d
WHERE c.dispatch_id = due.dispatch_id
  AND e.dispatch_id = c.dispatch_id
  AND d.dispatch_id = c.dispatch_id
RETURNING c.dispatch_id, c.recovery_token::text, c.recovery_version, c.execution_version,
          c.finding_count, d.schema_version, d.approval_request_id, d.project_id,
          d.action_type, d.action_digest, d.idempotency_key, e.attempt, e.started_at_ms,
          e.lease_expires_at_ms, now.ms AS claimed_at_ms,
          -- When the next armed control falls due after this page (NULL: none is armed
          -- past now), so a replica sleeps until then after a partial page instead of a
          -- whole cadence: one entry of the due index, read once per claim that returns a
          -- row (an uncorrelated subquery), never by an empty claim. It sees the statement's
          -- snapshot: the rows just claimed were due, not past now.
          (SELECT n.next_scan_at_ms
           FROM approved_action_recovery_controls AS n
           WHERE n.status = 'armed' AND n.next_scan_at_ms > (SELECT ms FROM now)
           ORDER BY n.next_scan_at_ms
           LIMIT 1) AS next_due_at_ms;

-- name: commit_automatic
-- The fenced page commit (resolver_commit_automatic, resolver/db/schema/functions/08_commits.sql): locks
-- the verified items' executions, then every control of the page, in key order; writes only
-- the items whose recovery lease, open control, execution version and expired execution lease
-- still hold; answers their dispatch ids with the status each control took (the routing
-- rule, resolver_finding_status) and, for a control sent to a person, why (its finding, or
-- an escalation). One statement on an autocommit connection: one transaction, committed
-- durably. The items are one JSON array of objects (see `page_items`).
SELECT a.dispatch_id, a.status, a.manual_reason
FROM resolver_commit_automatic(%(items)s::json, %(now_ms)s) AS a;

-- name: recovery_release_leases
-- Hands held recovery leases back at once (graceful shutdown), fenced on token/version.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
held AS (
    SELECT c.dispatch_id
    FROM approved_action_recovery_controls AS c
    JOIN unnest(%(dispatch_ids)s::text[], %(recovery_tokens)s::uuid[],
                %(recovery_versions)s::bigint[]) AS i(dispatch_id, recovery_token, recovery_version)
      ON c.dispatch_id = i.dispatch_id AND c.recovery_token = i.recovery_token
     AND c.recovery_version = i.recovery_version
    WHERE c.status = 'armed'
    ORDER BY c.dispatch_id
    FOR UPDATE OF c
)
UPDATE approved_action_recovery_controls AS c
SET (recovery_version, recovery_owner, recovery_token, recovery_lease_expires_at_ms)
        = (SELECT * FROM resolver_recovery_lease_released(c.recovery_version)),
    next_scan_at_ms = now.ms
FROM held, now
WHERE c.dispatch_id = held.dispatch_id
RETURNING c.dispatch_id;

-- name: manual_grant_get
-- The versions a manual decision will fence on at commit.
SELECT p.version AS project_version, b.version AS role_binding_version
FROM recovery_role_bindings AS b
JOIN recovery_projects AS p USING (project_id)
WHERE b.project_id = %(project_id)s AND b.user_id = %(user_id)s
  AND b.permission = 'approval.recover';

-- name: manual_context_get
-- Everything a person's act needs before it is signed (which act it is: the open proposal, the
-- decisions a two-person rule covers, the policy's bounds, the database clock the fact names),
-- everything needed to explain why a fenced act did not apply, and the evidence the decision
-- is taken on (the control's last finding and reason).
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms)
SELECT d.project_id, e.state, e.version, e.lease_expires_at_ms,
       c.status AS control_status,
       r.mutation_id AS resolution_mutation_id, r.source AS resolution_source,
       r.outcome AS resolution_outcome, r.actor_user_id AS resolution_actor,
       r.reason_code AS resolution_reason_code,
       r.evidence_digest AS resolution_evidence_digest,
       r.expected_execution_version AS resolution_expected_version,
       m.dispatch_id AS mutation_dispatch_id,
       (SELECT a.user_id FROM recovery_authorizations AS a
        WHERE a.mutation_id = r.mutation_id AND a.user_id <> r.actor_user_id
        LIMIT 1) AS resolution_confirmed_by,
       mp.closed_as AS mutation_proposal_closed_as, mp.proposed_by AS mutation_proposed_by,
       mp.proposal_id AS mutation_proposal_id, mp.dispatch_id AS mutation_proposal_dispatch_id,
       mp.closed_mutation_id = %(mutation_id)s AS mutation_closes_proposal,
       mp.closed_by AS mutation_closed_by, mp.close_reason_code AS mutation_close_reason_code,
       mp.outcome AS mutation_proposal_outcome,
       mp.reason_code AS mutation_proposal_reason_code,
       mp.evidence_digest AS mutation_proposal_evidence_digest,
       pr.proposal_id AS open_proposal_id, pr.proposed_by AS open_proposed_by,
       pr.outcome AS open_outcome, pr.evidence_digest AS open_evidence_digest,
       pr.expected_execution_version AS open_expected_version,
       ARRAY(SELECT o FROM unnest(resolver_terminal_states()) AS o
             WHERE resolver_needs_two_people(d.action_type, o)) AS two_person_outcomes,
       pol.max_auth_age_ms AS policy_max_auth_age_ms,
       pol.proposal_ttl_ms AS policy_proposal_ttl_ms,
       pol.clock_leeway_ms AS policy_clock_leeway_ms,
       c.last_finding, c.last_reason,
       (SELECT ms FROM now) AS db_now_ms
FROM approved_action_dispatches AS d
JOIN approved_action_executions AS e USING (dispatch_id)
LEFT JOIN approved_action_recovery_controls AS c USING (dispatch_id)
LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
LEFT JOIN approved_action_recovery_resolutions AS m ON m.mutation_id = %(mutation_id)s
LEFT JOIN recovery_proposals AS mp
  ON mp.mutation_id = %(mutation_id)s OR mp.closed_mutation_id = %(mutation_id)s
LEFT JOIN LATERAL (
    SELECT pr.* FROM recovery_proposals AS pr
    WHERE pr.dispatch_id = d.dispatch_id
      AND
          -- include: proposal_open
    LIMIT 1
) AS pr ON true
LEFT JOIN recovery_decision_policy AS pol ON pol.id = 1
WHERE d.dispatch_id = %(dispatch_id)s;

-- name: manual_commit
-- A person's signed act on a case (resolver_commit_manual,
-- resolver/db/schema/functions/08_commits.sql): `act` decide, propose or confirm (of the open
-- proposal `proposal_id`); for a decision, the authorization facts, resolution and terminal
-- state in one transaction, fenced on the grant's versions, authentication age, expected
-- execution version, recovery_required and an open control. `result`: committed, proposed,
-- voided, proposal_limit, or tamper_unacknowledged (a success on possibly forged evidence
-- without the acknowledgement). No row: nothing applied (manual_context_get explains why). RS007: the
-- fact was already recorded (or verified outside the clock leeway); RS008: the act does not
-- fit the case.
SELECT dispatch_id, version, result, proposal_id
FROM resolver_commit_manual(
    p_dispatch_id => %(dispatch_id)s, p_mutation_id => %(mutation_id)s,
    p_act => %(act)s, p_proposal_id => %(proposal_id)s,
    p_outcome => %(outcome)s, p_evidence_digest => %(evidence_digest)s,
    p_reason_code => %(reason_code)s,
    p_expected_execution_version => %(expected_execution_version)s,
    p_user_id => %(user_id)s, p_project_id => %(project_id)s,
    p_project_version => %(project_version)s,
    p_role_binding_version => %(role_binding_version)s,
    p_auth_time_ms => %(auth_time_ms)s, p_amr => %(amr)s::text[],
    p_issuer => %(issuer)s, p_token_kid => %(token_kid)s, p_signing_kid => %(signing_kid)s,
    p_signature => %(signature)s, p_verified_at_ms => %(verified_at_ms)s,
    p_max_auth_age_ms => %(max_auth_age_ms)s, p_proposal_ttl_ms => %(proposal_ttl_ms)s,
    p_now_ms => %(now_ms)s, p_tamper_acknowledged => %(tamper_acknowledged)s,
    p_tampering_reasons => %(tampering_reasons)s::text[]);

-- name: proposal_close
-- Withdraw (the proposer) or reject (someone else) the open proposal `proposal_id` of a
-- dispatch, a signed act and a link of the audit chain (resolver_proposal_close,
-- 08_commits.sql). `result`: withdrawn, rejected, stale_auth. No row: the grant fence failed.
SELECT dispatch_id, result
FROM resolver_proposal_close(
    p_dispatch_id => %(dispatch_id)s, p_mutation_id => %(mutation_id)s,
    p_act => %(act)s, p_proposal_id => %(proposal_id)s, p_reason_code => %(reason_code)s,
    p_user_id => %(user_id)s, p_project_id => %(project_id)s,
    p_project_version => %(project_version)s,
    p_role_binding_version => %(role_binding_version)s,
    p_auth_time_ms => %(auth_time_ms)s, p_amr => %(amr)s::text[],
    p_issuer => %(issuer)s, p_token_kid => %(token_kid)s, p_signing_kid => %(signing_kid)s,
    p_signature => %(signature)s, p_verified_at_ms => %(verified_at_ms)s,
    p_max_auth_age_ms => %(max_auth_age_ms)s, p_now_ms => %(now_ms)s);

-- name: proposal_open_get
-- The open, unexpired proposal of a dispatch (what a 202 answer shows).
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms)
SELECT pr.outcome AS proposal_outcome, pr.proposed_by, pr.proposed_at_ms,
       pr.expires_at_ms AS proposal_expires_at_ms, pr.reason_code AS proposal_reason_code,
       pr.evidence_digest AS proposal_evidence_digest,
       pr.expected_execution_version AS proposal_expected_version
FROM recovery_proposals AS pr, now
WHERE pr.dispatch_id = %(dispatch_id)s
  AND
      -- include: proposal_open
;

-- fragment: proposal_open
-- A proposal `pr` that can still be confirmed: not closed and not expired (an expired one is
-- closed as such by the next decision or close on its dispatch). Needs the CTE `now`.
pr.closed_as IS NULL AND pr.expires_at_ms > (SELECT ms FROM now)

-- fragment: case_readable
-- The caller may read cases of the dispatch `d`'s project: it holds `approval.recover` (which
-- decides) or `approval.recover.read` (which only reads) there.
EXISTS (SELECT 1 FROM recovery_role_bindings AS b
        WHERE b.project_id = d.project_id AND b.user_id = %(user_id)s
          AND b.permission IN ('approval.recover', 'approval.recover.read'))

-- fragment: dispatch_lookup
-- The lookup `q` of every list, for dispatch `d`: an exact dispatch id, idempotency key or
-- approval request id (each has its own index); NULL does not filter.
(%(q)s::text IS NULL OR d.dispatch_id = %(q)s::text OR d.idempotency_key = %(q)s::text
 OR d.approval_request_id = %(q)s::text)

-- fragment: summary_words
-- Words of what was approved, for dispatch `d`: the summary's title, a fact's label or a
-- fact's value contains `summary`, any case (the JSON's own keys never match). The first test
-- is on the summary as text with the words escaped the way JSON text escapes them (so an
-- index on lower(action_summary::text) can serve it); the second checks each string itself.
%(summary)s::text IS NOT NULL
AND lower(d.action_summary::text) LIKE '%%' || replace(replace(replace(
        substr(to_jsonb(lower(%(summary)s::text))::text, 2,
               length(to_jsonb(lower(%(summary)s::text))::text) - 2),
        '\', '\\'), '%%', '\%%'), '_', '\_') || '%%'
AND EXISTS (SELECT 1 FROM jsonb_path_query(d.action_summary, 'strict $.**') AS s(v)
            WHERE jsonb_typeof(s.v) = 'string'
              AND strpos(lower(s.v #>> '{}'), lower(%(summary)s::text)) > 0)

-- fragment: case_filter
-- The filters of the manual queue and the waiting list, for dispatch `d` and control `c`;
-- a NULL parameter does not filter. `since_ms` is when the case entered the list.
(%(project_id)s::text IS NULL OR d.project_id = %(project_id)s::text)
AND (%(action_type)s::text IS NULL OR d.action_type = %(action_type)s::text)
AND (%(last_finding)s::text IS NULL OR c.last_finding = %(last_finding)s::text)
-- The executor that held the lease (its owner name, e.g. a host or pod). Probed only when
-- given, so a total without it never reads the executions (every control has one: its
-- foreign key).
AND (%(owner)s::text IS NULL
     OR EXISTS (SELECT 1 FROM approved_action_executions AS eo
                WHERE eo.dispatch_id = c.dispatch_id AND eo.owner = %(owner)s::text))
-- The last inspection's reason code (`unknown_kid`, `http_404`).
AND (%(last_reason)s::text IS NULL OR c.last_reason = %(last_reason)s::text)
-- Words of what was approved (the summary's title and facts), case-insensitive: the open
-- lists are bounded by their partial indexes, so a substring test costs a bounded scan.
AND (%(summary)s::text IS NULL
     OR
        -- include: summary_words
    )
-- Open two-person proposals only: the cases waiting for a second person. On the control's
-- id, so the few open proposals filter the list's index scan before any dispatch is read.
AND (NOT %(open_proposal)s::boolean
     OR EXISTS (SELECT 1 FROM recovery_proposals AS op
                WHERE op.dispatch_id = c.dispatch_id AND op.closed_as IS NULL
                  AND op.expires_at_ms > (SELECT ms FROM now)))
AND
    -- include: dispatch_lookup

-- fragment: case_sort_key
-- The column a list is grouped by before its age (`sort`, one of CaseSort's values), for
-- dispatch `d` and control `c`; '' for `age`, so a list sorted by age alone orders and pages on
-- its age. The page's keyset, its ORDER BY and the sort key it answers are this one expression.
CASE %(sort)s::text WHEN 'action_type' THEN d.action_type WHEN 'project_id' THEN d.project_id
                    WHEN 'last_finding' THEN coalesce(c.last_finding, '') ELSE '' END

-- name: audit_links_page
-- `resolver audit verify`: one page of the chain in order, each link with its content rebuilt
-- from the stored facts by the functions the acts write it with (resolver_audit_decision for a
-- decision, resolver_audit_close for a reject or withdraw), NULL when retention removed them.
SELECT l.seq, l.mutation_id, l.dispatch_id, l.content, l.prev_hash, l.hash, l.recorded_at_ms,
       coalesce(resolver_audit_decision(l.mutation_id), resolver_audit_close(l.mutation_id))
           AS facts_content
FROM recovery_audit_chain AS l
WHERE l.seq > %(after_seq)s
ORDER BY l.seq
LIMIT %(limit)s;

-- name: audit_head
SELECT h.seq, h.hash FROM recovery_audit_head AS h WHERE h.id = 1;

-- name: audit_export_recorded
-- `resolver audit verify --export`: the prune runs that recorded this export's sha256 (a run
-- records it before deleting anything the export lists).
SELECT r.run_id, r.audit_first_seq, r.audit_last_seq FROM recovery_prune_runs AS r
WHERE r.export_digest = %(export_digest)s
ORDER BY r.run_id
LIMIT 1;

-- name: audit_unlinked
-- The first act a person recorded that has no link: a manual resolution recorded since the
-- chain began (decisions recorded before it precede the first link), or a proposal rejected or
-- withdrawn with a signed fact, or at or after `acts_since_ms` (when the first link of a fact
-- naming its act was recorded; NULL: none yet). Closes recorded before carry no link.
(SELECT r.mutation_id, r.dispatch_id
 FROM approved_action_recovery_resolutions AS r
 WHERE r.source = 'manual'
   AND r.resolved_at_ms >= (SELECT min(l.recorded_at_ms) FROM recovery_audit_chain AS l)
   AND NOT EXISTS (SELECT 1 FROM recovery_audit_chain AS l WHERE l.mutation_id = r.mutation_id)
 ORDER BY r.resolution_id
 LIMIT 1)
UNION ALL
(SELECT p.closed_mutation_id, p.dispatch_id
 FROM recovery_proposals AS p
 WHERE p.closed_as IN ('rejected', 'withdrawn')
   AND (p.closed_signature IS NOT NULL OR p.closed_at_ms >= %(acts_since_ms)s::bigint)
   AND NOT EXISTS (SELECT 1 FROM recovery_audit_chain AS l
                   WHERE l.mutation_id = p.closed_mutation_id)
 ORDER BY p.proposal_id
 LIMIT 1)
LIMIT 1;

-- name: manual_queue_page
-- The human queue: manual controls in projects the user may read, oldest first (keyset on
-- the manual index), filtered.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms)
SELECT c.dispatch_id, d.project_id, d.action_type, c.last_finding, c.finding_count,
       c.manual_at_ms, e.version AS execution_version, e.started_at_ms, e.attempt,
       d.approval_request_id, d.idempotency_key, d.action_digest, c.manual_reason,
       c.last_failure_class, c.first_inspected_at_ms, c.manual_at_ms AS since_ms,
       pr.outcome AS proposal_outcome, pr.proposed_by, pr.proposed_at_ms,
       pr.expires_at_ms AS proposal_expires_at_ms, pr.reason_code AS proposal_reason_code,
       pr.evidence_digest AS proposal_evidence_digest,
       pr.expected_execution_version AS proposal_expected_version,
       d.action_summary, c.last_reason, e.owner,
       -- A waiting case's next look, and when it goes to the manual queue if its evidence
       -- stays what it last was (NULL when that finding never escalates); NULL unless armed.
       CASE WHEN c.status = 'armed' THEN c.next_scan_at_ms END AS next_look_at_ms,
       CASE WHEN c.status = 'armed' THEN c.escalates_at_ms END AS escalates_at_ms,
       -- include: case_sort_key
       AS sort_key,
       -- The decisions a two-person rule covers for this action type (shown before anyone
       -- decides).
       ARRAY(SELECT o FROM unnest(resolver_terminal_states()) AS o
             WHERE resolver_needs_two_people(d.action_type, o)) AS two_person_outcomes
FROM approved_action_recovery_controls AS c
JOIN approved_action_dispatches AS d USING (dispatch_id)
JOIN approved_action_executions AS e USING (dispatch_id)
-- A probe per listed case (the open-proposal index): as a plain join, the planner could hash
-- every open proposal against every case and sort the whole list for one page. There is at
-- most one open proposal per dispatch; the LIMIT keeps the subquery from being flattened
-- back into a join.
LEFT JOIN LATERAL (
    SELECT pr.* FROM recovery_proposals AS pr
    WHERE pr.dispatch_id = c.dispatch_id
      AND
          -- include: proposal_open
    LIMIT 1
) AS pr ON true
WHERE c.status = 'manual'
  -- Oldest first (the manual index's own order), or grouped by another column first
  -- (`sort`): the keyset then leads with that column. A constant sort folds away.
  AND CASE WHEN %(sort)s::text = 'age'
           THEN (c.manual_at_ms, c.dispatch_id) > (%(after_since_ms)s, %(after_dispatch_id)s)
           ELSE (
                 -- include: case_sort_key
                 , c.manual_at_ms, c.dispatch_id)
                > (%(after_key)s::text, %(after_since_ms)s, %(after_dispatch_id)s) END
  AND (%(min_age_ms)s = 0 OR c.manual_at_ms <= (SELECT ms FROM now) - %(min_age_ms)s)
  AND
      -- include: case_filter
  AND
      -- include: case_readable
ORDER BY
    -- include: case_sort_key
    , c.manual_at_ms, c.dispatch_id
LIMIT %(limit)s;

-- name: manual_queue_total
-- How many manual cases match the filter, counted up to %(count_cap)s (a count at the cap
-- means "at least").
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms)
SELECT count(*) AS total FROM (
    SELECT 1
    FROM approved_action_recovery_controls AS c
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    WHERE c.status = 'manual'
      AND (%(min_age_ms)s = 0 OR c.manual_at_ms <= (SELECT ms FROM now) - %(min_age_ms)s)
      AND
          -- include: case_filter
      AND
          -- include: case_readable
    LIMIT %(count_cap)s) AS matching;

-- name: waiting_page
-- The waiting list: armed controls inspected at least once (the evidence is not in yet),
-- oldest first inspection first (keyset on the waiting index), filtered.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms)
SELECT c.dispatch_id, d.project_id, d.action_type, c.last_finding, c.finding_count,
       c.manual_at_ms, e.version AS execution_version, e.started_at_ms, e.attempt,
       d.approval_request_id, d.idempotency_key, d.action_digest, c.manual_reason,
       c.last_failure_class, c.first_inspected_at_ms, c.first_inspected_at_ms AS since_ms,
       pr.outcome AS proposal_outcome, pr.proposed_by, pr.proposed_at_ms,
       pr.expires_at_ms AS proposal_expires_at_ms, pr.reason_code AS proposal_reason_code,
       pr.evidence_digest AS proposal_evidence_digest,
       pr.expected_execution_version AS proposal_expected_version,
       d.action_summary, c.last_reason, e.owner,
       -- A waiting case's next look, and when it goes to the manual queue if its evidence
       -- stays what it last was (NULL when that finding never escalates); NULL unless armed.
       CASE WHEN c.status = 'armed' THEN c.next_scan_at_ms END AS next_look_at_ms,
       CASE WHEN c.status = 'armed' THEN c.escalates_at_ms END AS escalates_at_ms,
       -- include: case_sort_key
       AS sort_key,
       -- The decisions a two-person rule covers for this action type (shown before anyone
       -- decides).
       ARRAY(SELECT o FROM unnest(resolver_terminal_states()) AS o
             WHERE resolver_needs_two_people(d.action_type, o)) AS two_person_outcomes
FROM approved_action_recovery_controls AS c
JOIN approved_action_dispatches AS d USING (dispatch_id)
JOIN approved_action_executions AS e USING (dispatch_id)
-- A probe per listed case (the open-proposal index): as a plain join, the planner could hash
-- every open proposal against every case and sort the whole list for one page. There is at
-- most one open proposal per dispatch; the LIMIT keeps the subquery from being flattened
-- back into a join.
LEFT JOIN LATERAL (
    SELECT pr.* FROM recovery_proposals AS pr
    WHERE pr.dispatch_id = c.dispatch_id
      AND
          -- include: proposal_open
    LIMIT 1
) AS pr ON true
WHERE c.status = 'armed' AND c.first_inspected_at_ms IS NOT NULL
  AND CASE WHEN %(sort)s::text = 'age'
           THEN (c.first_inspected_at_ms, c.dispatch_id)
                > (%(after_since_ms)s, %(after_dispatch_id)s)
           ELSE (
                 -- include: case_sort_key
                 , c.first_inspected_at_ms, c.dispatch_id)
                > (%(after_key)s::text, %(after_since_ms)s, %(after_dispatch_id)s) END
  AND (%(min_age_ms)s = 0 OR c.first_inspected_at_ms <= (SELECT ms FROM now) - %(min_age_ms)s)
  AND
      -- include: case_filter
  AND
      -- include: case_readable
ORDER BY
    -- include: case_sort_key
    , c.first_inspected_at_ms, c.dispatch_id
LIMIT %(limit)s;

-- fragment: case_counts
-- A list's triage counts over the CTE `matching` (its cases' action type, reason, project and
-- owner), as the manual queue's and the waiting list's counts answer them: one row a value
-- of each dimension, the largest count first.
SELECT 'action_type' AS dimension, action_type AS value, count(*) AS cases
FROM matching GROUP BY action_type
UNION ALL
SELECT 'reason', reason, count(*) FROM matching GROUP BY reason
UNION ALL
SELECT 'project_id', project_id, count(*) FROM matching GROUP BY project_id
UNION ALL
SELECT 'owner', owner, count(*) FROM matching GROUP BY owner
ORDER BY 1, 3 DESC, 2

-- name: manual_queue_counts
-- Triage: the matching manual cases counted by action type, reason (the last reason code, or
-- the finding when the provider gave none), project and executor owner, over at most
-- %(count_cap)s cases (a count at the cap means "at least").
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
matching AS (
    SELECT d.action_type, d.project_id, e.owner,
           coalesce(c.last_reason, c.last_finding, 'not_inspected') AS reason
    FROM approved_action_recovery_controls AS c
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE c.status = 'manual'
      AND (%(min_age_ms)s = 0 OR c.manual_at_ms <= (SELECT ms FROM now) - %(min_age_ms)s)
      AND
          -- include: case_filter
      AND
          -- include: case_readable
    LIMIT %(count_cap)s
)
-- include: case_counts
;

-- name: waiting_counts
-- The same for the waiting list.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
matching AS (
    SELECT d.action_type, d.project_id, e.owner,
           coalesce(c.last_reason, c.last_finding, 'not_inspected') AS reason
    FROM approved_action_recovery_controls AS c
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    JOIN approved_action_executions AS e USING (dispatch_id)
    WHERE c.status = 'armed' AND c.first_inspected_at_ms IS NOT NULL
      AND (%(min_age_ms)s = 0 OR c.first_inspected_at_ms <= (SELECT ms FROM now) - %(min_age_ms)s)
      AND
          -- include: case_filter
      AND
          -- include: case_readable
    LIMIT %(count_cap)s
)
-- include: case_counts
;

-- name: waiting_total
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms)
SELECT count(*) AS total FROM (
    SELECT 1
    FROM approved_action_recovery_controls AS c
    JOIN approved_action_dispatches AS d USING (dispatch_id)
    WHERE c.status = 'armed' AND c.first_inspected_at_ms IS NOT NULL
      AND (%(min_age_ms)s = 0 OR c.first_inspected_at_ms <= (SELECT ms FROM now) - %(min_age_ms)s)
      AND
          -- include: case_filter
      AND
          -- include: case_readable
    LIMIT %(count_cap)s) AS matching;

-- name: case_get
-- The whole case of one dispatch, if the caller may read its project (an unknown and a
-- forbidden dispatch answer alike: no row).
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms)
SELECT d.dispatch_id, d.approval_request_id, d.project_id, d.action_type, d.action_digest,
       d.idempotency_key, d.schema_version,
       -- Supersession may cross projects (the executor protocol allows it): the case names
       -- only the dispatches on either side the caller may read, so it reveals no other
       -- project's ids.
       CASE WHEN EXISTS (SELECT 1 FROM approved_action_dispatches AS o
                         JOIN recovery_role_bindings AS b ON b.project_id = o.project_id
                         WHERE o.dispatch_id = d.supersedes_dispatch_id
                           AND b.user_id = %(user_id)s
                           AND b.permission IN ('approval.recover', 'approval.recover.read'))
            THEN d.supersedes_dispatch_id END AS supersedes_dispatch_id,
       d.created_at_ms,
       ARRAY(SELECT s.dispatch_id FROM approved_action_dispatches AS s
             WHERE s.supersedes_dispatch_id = d.dispatch_id
               AND EXISTS (SELECT 1 FROM recovery_role_bindings AS b
                           WHERE b.project_id = s.project_id AND b.user_id = %(user_id)s
                             AND b.permission IN ('approval.recover', 'approval.recover.read'))
             ORDER BY s.dispatch_id LIMIT 100) AS superseded_by,
       e.state, e.owner, e.attempt, e.version, e.started_at_ms, e.lease_expires_at_ms,
       e.finished_at_ms, e.result_code,
       coalesce(e.state = 'executing' AND e.lease_expires_at_ms <= now.ms, false)
           AS recovery_required,
       c.status AS control_status, c.armed_at_ms, c.finding_count, c.finding_counts,
       c.first_inspected_at_ms, c.last_inspected_at_ms, c.last_finding,
       c.last_failure_class, c.last_evidence_digest, c.next_scan_at_ms, c.manual_at_ms,
       c.manual_reason, c.closed_by, c.closed_at_ms, c.last_reason, c.reason_counts,
       -- When a waiting case goes to the manual queue if its evidence stays what it last was
       -- (NULL when that finding never escalates); NULL unless armed.
       CASE WHEN c.status = 'armed' THEN c.escalates_at_ms END AS escalates_at_ms,
       d.action_summary,
       ARRAY(SELECT o FROM unnest(resolver_terminal_states()) AS o
             WHERE resolver_needs_two_people(d.action_type, o)) AS two_person_outcomes,
       r.source AS resolution_source, r.outcome AS resolution_outcome,
       r.reason_code AS resolution_reason_code, r.actor_user_id AS resolution_actor_user_id,
       r.evidence_digest AS resolution_evidence_digest, r.resolved_at_ms,
       r.mutation_id AS resolution_mutation_id,
       now.ms AS db_now_ms,
       -- Which of the case's other reads have rows (the repository skips the others).
       EXISTS (SELECT 1 FROM recovery_authorizations AS a
               WHERE a.mutation_id = r.mutation_id) AS has_authorizations,
       EXISTS (SELECT 1 FROM recovery_late_evidence AS l
               WHERE l.dispatch_id = d.dispatch_id) AS has_late_evidence,
       EXISTS (SELECT 1 FROM recovery_proposals AS p
               WHERE p.dispatch_id = d.dispatch_id) AS has_proposals,
       pr.outcome AS proposal_outcome, pr.proposed_by, pr.proposed_at_ms,
       pr.expires_at_ms AS proposal_expires_at_ms, pr.reason_code AS proposal_reason_code,
       pr.evidence_digest AS proposal_evidence_digest,
       pr.expected_execution_version AS proposal_expected_version,
       -- Retention pruned its execution and kept its identity (an audited decision): when,
       -- by which run, under which export.
       pt.run_id AS pruned_run_id, pt.pruned_at_ms, pru.export_digest AS pruned_export_digest
FROM approved_action_dispatches AS d
CROSS JOIN now
LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
LEFT JOIN approved_action_recovery_resolutions AS r ON r.dispatch_id = d.dispatch_id
-- The same dispatch, not an earlier one under a reused id.
LEFT JOIN recovery_pruned_dispatches AS pt
  ON pt.dispatch_id = d.dispatch_id AND pt.created_at_ms = d.created_at_ms
LEFT JOIN recovery_prune_runs AS pru ON pru.run_id = pt.run_id
LEFT JOIN recovery_proposals AS pr
  ON pr.dispatch_id = d.dispatch_id
 AND
     -- include: proposal_open
WHERE d.dispatch_id = %(dispatch_id)s
  AND
      -- include: case_readable
;

-- name: dispatch_find
-- Find: every dispatch the caller may read whose dispatch id, idempotency key or approval
-- request id is exactly `q` (each has its own index), whatever its state: open, waiting,
-- settled by its executor or automatically, decided, superseded, pruned. Newest first, at
-- most 20 (an approval request dispatched again under new ids has several). A pruned
-- dispatch is found by the record its prune left (recovery_pruned_dispatches, the
-- idempotency key as its sha256) with the run that pruned it and the run's export digest;
-- one whose identity stayed (its decision audited) is found by its identity, with the same.
SELECT found.* FROM (
    SELECT d.dispatch_id, d.project_id, d.action_type, d.created_at_ms, d.action_summary,
           CASE WHEN d.dispatch_id = %(q)s::text THEN 'dispatch_id'
                WHEN d.approval_request_id = %(q)s::text THEN 'approval_request_id'
                ELSE 'idempotency_key' END AS matched_by,
           coalesce(e.state, t.state) AS state, c.status AS control_status,
           coalesce(c.closed_by, t.closed_by) AS closed_by,
           t.pruned_at_ms, t.run_id AS pruned_run_id, pr.export_digest AS pruned_export_digest
    FROM approved_action_dispatches AS d
    LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
    LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
    -- The same dispatch, not an earlier one under a reused id.
    LEFT JOIN recovery_pruned_dispatches AS t
      ON t.dispatch_id = d.dispatch_id AND t.created_at_ms = d.created_at_ms
    LEFT JOIN recovery_prune_runs AS pr ON pr.run_id = t.run_id
    WHERE %(q)s::text IS NOT NULL
      AND
          -- include: dispatch_lookup
      AND
          -- include: case_readable
    UNION ALL
    SELECT d.dispatch_id, d.project_id, d.action_type, d.created_at_ms, NULL::jsonb,
           CASE WHEN d.dispatch_id = %(q)s::text THEN 'dispatch_id'
                WHEN d.approval_request_id = %(q)s::text THEN 'approval_request_id'
                ELSE 'idempotency_key' END,
           d.state, NULL::text, d.closed_by, d.pruned_at_ms, d.run_id, pr.export_digest
    FROM recovery_pruned_dispatches AS d
    JOIN recovery_prune_runs AS pr ON pr.run_id = d.run_id
    WHERE %(q)s::text IS NOT NULL
      AND (d.dispatch_id = %(q)s::text
           OR d.idempotency_key_sha256 = encode(sha256(convert_to(%(q)s::text, 'UTF8')), 'hex')
           OR d.approval_request_id = %(q)s::text)
      AND NOT EXISTS (SELECT 1 FROM approved_action_dispatches AS o
                      WHERE o.dispatch_id = d.dispatch_id)
      AND
          -- include: case_readable
) AS found
ORDER BY found.created_at_ms DESC, found.dispatch_id
LIMIT 20;

-- name: dispatch_find_words
-- Find by words of what was approved: every dispatch the caller may read whose summary
-- contains `summary` (see summary_words), whatever its state, newest first, at most 20. Its
-- own statement, asked for on its own: an id lookup never pays for a scan of the summaries.
-- A dispatch pruned whole keeps no summary; one whose identity stayed is found with its
-- prune run.
SELECT d.dispatch_id, d.project_id, d.action_type, d.created_at_ms, d.action_summary,
       'summary' AS matched_by,
       coalesce(e.state, t.state) AS state, c.status AS control_status,
       coalesce(c.closed_by, t.closed_by) AS closed_by,
       t.pruned_at_ms, t.run_id AS pruned_run_id, pr.export_digest AS pruned_export_digest
FROM approved_action_dispatches AS d
LEFT JOIN approved_action_executions AS e ON e.dispatch_id = d.dispatch_id
LEFT JOIN approved_action_recovery_controls AS c ON c.dispatch_id = d.dispatch_id
LEFT JOIN recovery_pruned_dispatches AS t
  ON t.dispatch_id = d.dispatch_id AND t.created_at_ms = d.created_at_ms
LEFT JOIN recovery_prune_runs AS pr ON pr.run_id = t.run_id
WHERE
      -- include: summary_words
  AND
      -- include: case_readable
ORDER BY d.created_at_ms DESC, d.dispatch_id
LIMIT 20;

-- name: case_authorizations
-- The authorization facts of a resolution (a manual one has one per person who decided).
SELECT a.user_id, a.permission, a.amr, a.auth_time_ms
FROM recovery_authorizations AS a
WHERE a.mutation_id = %(mutation_id)s
ORDER BY a.authorization_id;

-- fragment: decision_filter
-- The filters of the decisions list, for resolution `r` and dispatch `d`; a NULL parameter
-- does not filter. `overridden_finding` is the control's last finding the decision
-- overrode; [since_ms, until_ms) is when it was made.
(%(project_id)s::text IS NULL OR d.project_id = %(project_id)s::text)
AND (%(action_type)s::text IS NULL OR d.action_type = %(action_type)s::text)
AND (%(overridden_finding)s::text IS NULL OR r.finding = %(overridden_finding)s::text)
AND (%(actor_user_id)s::text IS NULL OR r.actor_user_id = %(actor_user_id)s::text)
AND
    -- include: dispatch_lookup
AND r.resolved_at_ms >= %(since_ms)s
AND r.resolved_at_ms < %(until_ms)s

-- name: decisions_page
-- Manual decisions in projects the caller may read, newest first (keyset on the decisions
-- index), filtered.
SELECT r.dispatch_id, d.project_id, d.action_type, r.outcome, r.actor_user_id,
       r.reason_code, a.amr, a.auth_time_ms, r.evidence_digest,
       r.finding AS overridden_finding, r.resolved_at_ms, r.resolution_id,
       d.idempotency_key, d.approval_request_id,
       (SELECT s.user_id FROM recovery_authorizations AS s
        WHERE s.mutation_id = r.mutation_id AND s.user_id <> r.actor_user_id
        LIMIT 1) AS confirmed_by,
       (SELECT NOT l.agrees FROM recovery_late_evidence AS l
        WHERE l.dispatch_id = r.dispatch_id) AS contradicted
FROM approved_action_recovery_resolutions AS r
JOIN approved_action_dispatches AS d ON d.dispatch_id = r.dispatch_id
LEFT JOIN recovery_authorizations AS a
  ON a.mutation_id = r.mutation_id AND a.user_id = r.actor_user_id
WHERE r.source = 'manual'
  AND (r.resolved_at_ms, r.resolution_id) < (%(before_ms)s, %(before_id)s)
  AND
      -- include: decision_filter
  AND
      -- include: case_readable
ORDER BY r.resolved_at_ms DESC, r.resolution_id DESC
LIMIT %(limit)s;

-- name: decisions_total
-- How many manual decisions match the filter, counted up to %(count_cap)s (a count at the
-- cap means "at least"). Counted newest first, in the decisions index's order like the list:
-- the walk probes one dispatch per decision and stops at the cap, where an unordered count
-- would hash every dispatch ever made to count a few thousand decisions.
SELECT count(*) AS total FROM (
    SELECT 1
    FROM approved_action_recovery_resolutions AS r
    JOIN approved_action_dispatches AS d ON d.dispatch_id = r.dispatch_id
    WHERE r.source = 'manual'
      AND
          -- include: decision_filter
      AND
          -- include: case_readable
    ORDER BY r.resolved_at_ms DESC, r.resolution_id DESC
    LIMIT %(count_cap)s) AS matching;

-- name: backlog_oldest
-- The backlog read model (metrics and `resolver status`), part 1: two keyset probes, one per
-- partial index. The first row of each in index order is the oldest claimable control and
-- the oldest manual one, so a probe costs a few index lookups whatever the backlog.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms)
SELECT (SELECT ms FROM now) AS db_now_ms,
       (SELECT c.next_scan_at_ms
        FROM approved_action_recovery_controls AS c
        WHERE
            -- include: claimable_control
        ORDER BY c.next_scan_at_ms, c.dispatch_id
        LIMIT 1) AS oldest_claimable_at_ms,
       (SELECT m.manual_at_ms
        FROM approved_action_recovery_controls AS m
        WHERE m.status = 'manual' AND m.manual_at_ms IS NOT NULL
        ORDER BY m.manual_at_ms, m.dispatch_id
        LIMIT 1) AS oldest_manual_at_ms;

-- name: backlog_proposals
-- Part 3: open two-person proposals (neither closed nor expired), counted up to
-- %(count_cap)s, and when the oldest was made. Only open proposals are read (a partial
-- unique index holds them, one per dispatch at most).
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
open AS (
    SELECT pr.proposed_at_ms
    FROM recovery_proposals AS pr
    WHERE
        -- include: proposal_open
    LIMIT %(count_cap)s
)
SELECT count(*) AS open_proposals, min(proposed_at_ms) AS oldest_open_proposal_at_ms
FROM open;

-- name: backlog_counts
-- Part 2: open controls by queue (due = claimable now, waiting = armed but not claimable
-- yet, manual) and action type. Each partial index is read in key order and cut at
-- %(count_cap)s rows, so a runaway backlog costs a bounded scan; a count at the cap means
-- "at least". The claimable test runs on the cut rows only.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
armed AS (
    SELECT c.dispatch_id,
           CASE WHEN
               -- include: claimable_control
           THEN 'due' ELSE 'waiting' END AS queue
    FROM approved_action_recovery_controls AS c
    WHERE c.status = 'armed'
    ORDER BY c.next_scan_at_ms, c.dispatch_id
    LIMIT %(count_cap)s
),
manual AS (
    SELECT m.dispatch_id, 'manual' AS queue
    FROM approved_action_recovery_controls AS m
    WHERE m.status = 'manual'
    ORDER BY m.manual_at_ms, m.dispatch_id
    LIMIT %(count_cap)s
),
open AS (
    SELECT dispatch_id, queue FROM armed
    UNION ALL
    SELECT dispatch_id, queue FROM manual
)
SELECT o.queue, d.action_type, count(*) AS dispatches
FROM open AS o
JOIN approved_action_dispatches AS d USING (dispatch_id)
GROUP BY o.queue, d.action_type
ORDER BY o.queue, d.action_type;

-- Retention (`resolver prune`). The retention role holds EXECUTE on the
-- prune functions and nothing else; the rules live in those functions, not here.

-- name: prune_db_now
SELECT resolver_now_ms(NULL) AS db_now_ms;

-- name: prune_candidates_page
-- Keyset page (by dispatch_id) of what a run with this cut-off would take, with the export
-- document of each dispatch.
SELECT dispatch_id, audited, record
FROM resolver_prune_candidates(
    %(cutoff_ms)s, %(include_audit)s, %(after)s, %(limit)s, %(past_consumers)s);

-- name: prune_run_begin
SELECT resolver_prune_begin(
    %(cutoff_ms)s, %(include_audit)s, %(export_digest)s, %(actor)s, %(past_consumers)s)
    AS run_id;

-- name: prune_batch
-- One batch in its own short transaction (the caller sets lock_timeout first).
SELECT dispatches, audit, evidence, remnants, outcomes, outcomes_unread
FROM resolver_prune_batch(%(run_id)s, %(limit)s, %(dispatch_ids)s::text[]);

-- name: prune_consumers
-- The outcome feed's registered consumers, and how many settled dispatches older than the
-- cut-off each holds back (what the run reports).
SELECT consumer, cursor, saved_at_ms, holding FROM resolver_prune_consumers(%(cutoff_ms)s);

-- name: prune_run_finish
SELECT dispatches_pruned, audit_pruned, evidence_pruned
FROM resolver_prune_finish(%(run_id)s);

-- name: prune_lock_timeout
SELECT set_config('lock_timeout', %(lock_timeout)s, true);

-- name: prune_summary
-- Observability (the replicas' /metrics): every run ever recorded, committed batches only.
SELECT coalesce(sum(dispatches_pruned), 0)::bigint AS dispatches_pruned,
       coalesce(sum(audit_pruned), 0)::bigint AS audit_pruned,
       max(last_batch_at_ms) AS last_batch_at_ms,
       max(finished_at_ms) AS last_finished_at_ms
FROM recovery_prune_runs;

-- name: transaction_terminate
-- A lost COMMIT reply: end the backend still running the receipt's transaction (if any) so
-- it can no longer commit. A backend shows the low 32 bits of its transaction id; while the
-- 64-bit one is in progress no other transaction in progress has the same low bits.
SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity AS a
WHERE a.backend_xid::text = (%(xact_id)s::text::bigint %% 4294967296)::text
  AND pg_xact_status(%(xact_id)s::text::xid8) = 'in progress';

-- name: transaction_status
-- `committed`, `aborted` or `in progress`; NULL once too old to know (never for a
-- transaction of the last few minutes).
SELECT pg_xact_status(%(xact_id)s::text::xid8) AS status;

-- name: receipt_signature
-- The receipt's signature is unique to its whole body: equal signatures, same receipt.
SELECT receipt->>'sig' AS sig FROM action_receipts WHERE dispatch_id = %(dispatch_id)s;

-- name: late_watch_claim
-- Late evidence (resolver/db/schema/functions/06_late_evidence.sql): one page of open watches that are
-- due and still inside the window, with the identity their provider needs. Like the
-- control claim: the partial index of open watches only, SKIP LOCKED, a fresh token that
-- fences the record, and next_scan_at_ms moved to the lease expiry (a dead holder's watch
-- comes back by time alone). A watch whose execution was pruned is never claimed; the window
-- closes it.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
due AS (
    SELECT w.dispatch_id
    FROM recovery_late_watches AS w
    WHERE w.closed_at_ms IS NULL
      AND w.next_scan_at_ms <= (SELECT ms FROM now)
      AND w.decided_at_ms + %(window_ms)s > (SELECT ms FROM now)
    ORDER BY w.next_scan_at_ms, w.dispatch_id
    LIMIT %(limit)s
    FOR UPDATE OF w SKIP LOCKED
)
UPDATE recovery_late_watches AS w
SET watch_owner = %(owner)s,
    watch_token = gen_random_uuid(),
    next_scan_at_ms = now.ms + %(lease_ms)s
FROM due, now, approved_action_executions AS e, approved_action_dispatches AS d
WHERE w.dispatch_id = due.dispatch_id
  AND e.dispatch_id = w.dispatch_id
  AND d.dispatch_id = w.dispatch_id
RETURNING w.dispatch_id, w.watch_token::text, w.decided_outcome, w.observations,
          d.schema_version, d.approval_request_id, d.project_id, d.action_type,
          d.action_digest, d.idempotency_key, e.attempt, e.started_at_ms,
          e.lease_expires_at_ms;

-- name: late_watch_expire
-- Closes up to %(limit)s open watches whose window has elapsed on the database clock (the
-- open watches only: the partial index), without waiting on one a replica holds. The bound
-- is on the bare column, so the index of open watches by decision time reads the elapsed
-- ones only, oldest first.
WITH now AS (SELECT resolver_now_ms(%(now_ms)s) AS ms),
elapsed AS (
    SELECT w.dispatch_id
    FROM recovery_late_watches AS w
    WHERE w.closed_at_ms IS NULL
      AND w.decided_at_ms <= (SELECT ms FROM now) - %(window_ms)s
    ORDER BY w.decided_at_ms, w.dispatch_id
    LIMIT %(limit)s
    FOR UPDATE OF w SKIP LOCKED
)
UPDATE recovery_late_watches AS w
SET closed_at_ms = now.ms, closed_reason = 'window_elapsed',
    watch_owner = NULL, watch_token = NULL
FROM elapsed, now
WHERE w.dispatch_id = elapsed.dispatch_id
RETURNING w.dispatch_id;

-- name: late_watch_record
-- The fenced record of one page of late findings (resolver_record_late_evidence): one
-- statement, one transaction. The items are one JSON array of objects.
SELECT r.dispatch_id, r.observation_id, r.recorded, r.agrees
FROM resolver_record_late_evidence(
    %(items)s::json, %(owner)s, %(window_ms)s, %(now_ms)s) AS r;

-- name: case_proposals
-- Every two-person proposal of a case, open or closed (confirmed, rejected, withdrawn,
-- expired, voided): who proposed what and when, and who closed it how. At most 50.
SELECT p.outcome, p.reason_code, p.proposed_by, p.proposed_at_ms, p.expires_at_ms,
       p.closed_as, p.closed_at_ms, p.closed_by, p.close_reason_code
FROM recovery_proposals AS p
WHERE p.dispatch_id = %(dispatch_id)s
ORDER BY p.proposed_at_ms, p.proposal_id
LIMIT 50;

-- name: case_late_evidence
-- The late evidence recorded beside a case's decision (at most one row today).
SELECT l.finding, l.agrees, l.evidence_digest, l.observed_at_ms
FROM recovery_late_evidence AS l
WHERE l.dispatch_id = %(dispatch_id)s
ORDER BY l.observed_at_ms, l.observation_id;

-- name: outcomes_after
-- The outcome feed (resolver/db/schema/functions/10_outcome_feed.sql, docs/outcomes.md):
-- records after a cursor, in feed order, only below the oldest running transaction, so none
-- can still commit before a cursor this hands out.
SELECT cursor, kind, dispatch_id, approval_request_id, project_id, action_type, state,
       settled_by, finding, result_code, evidence_digest, mutation_id, reason_code, actors,
       superseded_by, occurred_at_ms
FROM resolver_outcomes_after(
    p_cursor => %(cursor)s, p_limit => %(limit)s, p_project_id => %(project_id)s);

-- name: outcome_cursor_now
SELECT resolver_outcome_cursor_now() AS cursor;

-- name: outcome_consumer_cursor
SELECT resolver_outcome_consumer_cursor(p_consumer => %(consumer)s) AS cursor;

-- name: outcome_consumer_save
SELECT resolver_outcome_consumer_save(p_consumer => %(consumer)s, p_cursor => %(cursor)s)
       AS cursor;

-- name: outcome_consumer_drop
SELECT resolver_outcome_consumer_drop(p_consumer => %(consumer)s) AS dropped;

-- name: dispatch_status
SELECT dispatch_id, approval_request_id, project_id, action_type, idempotency_key,
       supersedes_dispatch_id, superseded_by, state, attempt, lease_expires_at_ms,
       started_at_ms, finished_at_ms, result_code, evidence_digest, settled_by, finding,
       reason_code, actors, control_status, created_at_ms, db_now_ms
FROM resolver_dispatch_status(p_dispatch_id => %(dispatch_id)s);

-- name: dispatch_history
SELECT cursor, kind, state, settled_by, finding, result_code, reason_code, actors,
       superseded_by, attempt, occurred_at_ms
FROM resolver_dispatch_history(p_dispatch_id => %(dispatch_id)s);

-- name: outcome_listen
-- Registers this LISTEN session (or renews it) so that settling commits notify: they notify
-- only while a listener is registered. Its own statement, committed before the one below.
SELECT resolver_outcome_listen();

-- name: outcome_unlisten
SELECT resolver_outcome_unlisten();

-- name: outcome_listen_started
-- Right after LISTEN and its registration: the next transaction id. A transaction below it
-- may have committed before the LISTEN (or checked for listeners before the registration, and
-- not notified), its records perhaps still held back by an older one: the listener reads
-- until the horizon reaches this id.
SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS next_xid;
