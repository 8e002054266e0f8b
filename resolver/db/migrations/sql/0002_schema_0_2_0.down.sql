-- Back to the tables of release 0.1.0. The columns and the tables this release added go with
-- their data (signatures, summaries, reason statistics, pruned-dispatch records, the outcome
-- feed and its consumers' cursors); the checks spell their sets inline again. Run the 0.1.0
-- grants afterwards (its `resolver migrate --grants`).

ALTER TABLE approved_action_executions
    DROP CONSTRAINT ck_approved_action_executions_state_known,
    ADD CONSTRAINT ck_approved_action_executions_state_known
        CHECK (state IN ('leased','executing','succeeded','failed','blocked')),
    DROP CONSTRAINT ck_approved_action_executions_finished_iff_terminal,
    ADD CONSTRAINT ck_approved_action_executions_finished_iff_terminal
        CHECK ((state IN ('succeeded','failed','blocked')) = (finished_at_ms IS NOT NULL));

ALTER TABLE approved_action_recovery_resolutions
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known,
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_outcome_known
        CHECK (outcome IN ('succeeded','failed','blocked')),
    DROP CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified,
    ADD CONSTRAINT ck_approved_action_recovery_resolutions_automatic_is_verified
        CHECK (source <> 'automatic' OR (finding IN ('verified_succeeded','verified_failed')
               AND evidence_digest IS NOT NULL AND result_code IS NOT NULL
               AND actor_user_id IS NULL AND outcome <> 'blocked'));

ALTER TABLE recovery_two_person_rules
    DROP CONSTRAINT ck_recovery_two_person_rules_decision_known,
    ADD CONSTRAINT ck_recovery_two_person_rules_decision_known
        CHECK (decision IN ('confirm_succeeded', 'confirm_failed', 'abandon_unknown'));

ALTER TABLE recovery_late_evidence
    DROP CONSTRAINT ck_recovery_late_evidence_finding_verified,
    ADD CONSTRAINT ck_recovery_late_evidence_finding_verified
        CHECK (finding IN ('verified_succeeded', 'verified_failed'));

ALTER TABLE approved_action_dispatches
    DROP CONSTRAINT ck_approved_action_dispatches_action_summary_shape,
    DROP COLUMN action_summary;

ALTER TABLE approved_action_recovery_controls
    DROP CONSTRAINT ck_approved_action_recovery_controls_finding_known,
    ADD CONSTRAINT ck_approved_action_recovery_controls_finding_known
        CHECK (last_finding IS NULL OR last_finding IN ('verified_succeeded', 'verified_failed',
               'still_running', 'missing', 'conflict', 'unsupported', 'unavailable')),
    DROP CONSTRAINT ck_approved_action_recovery_controls_last_reason_shape,
    DROP CONSTRAINT ck_approved_action_recovery_controls_reason_counts_object,
    DROP COLUMN last_reason,
    DROP COLUMN reason_counts,
    DROP COLUMN escalates_at_ms;

DROP TABLE recovery_decision_policy;

-- The proposals the upgrade voided because their fact named no act open again (the downgraded
-- release confirms them as it did), unless a newer proposal is open on the dispatch.
UPDATE recovery_proposals AS p
SET closed_as = NULL, closed_at_ms = NULL, close_reason_code = NULL
WHERE p.closed_as = 'voided' AND p.close_reason_code = 'unbound_fact'
  AND NOT EXISTS (SELECT FROM recovery_proposals AS o
                  WHERE o.dispatch_id = p.dispatch_id AND o.closed_as IS NULL);

DROP INDEX uq_recovery_proposals_signature;
DROP INDEX uq_recovery_proposals_closed_signature;
ALTER TABLE recovery_proposals
    DROP CONSTRAINT ck_recovery_proposals_act_bound,
    DROP CONSTRAINT ck_recovery_proposals_closed_signed_whole,
    DROP CONSTRAINT ck_recovery_proposals_closed_signature_hex,
    DROP COLUMN verified_at_ms,
    DROP COLUMN closed_project_version,
    DROP COLUMN closed_role_binding_version,
    DROP COLUMN closed_issuer,
    DROP COLUMN closed_token_kid,
    DROP COLUMN closed_signing_kid,
    DROP COLUMN closed_signature,
    DROP COLUMN closed_verified_at_ms;

DROP INDEX uq_recovery_authorizations_signature;
DROP INDEX uq_recovery_authorizations_act_mutation_id;
ALTER TABLE recovery_authorizations
    DROP CONSTRAINT ck_recovery_authorizations_act_known,
    DROP CONSTRAINT ck_recovery_authorizations_act_bound,
    DROP COLUMN act,
    DROP COLUMN act_mutation_id,
    DROP COLUMN proposal_id,
    DROP COLUMN verified_at_ms;

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

ALTER TABLE recovery_proposals
    DROP CONSTRAINT ck_recovery_proposals_outcome_known,
    ADD CONSTRAINT ck_recovery_proposals_outcome_known CHECK (outcome IN ('succeeded', 'failed', 'blocked')),
    DROP CONSTRAINT ck_recovery_proposals_signed_whole,
    DROP CONSTRAINT ck_recovery_proposals_signature_hex,
    DROP COLUMN issuer,
    DROP COLUMN token_kid,
    DROP COLUMN signing_kid,
    DROP COLUMN signature;

ALTER TABLE recovery_prune_runs
    DROP CONSTRAINT ck_recovery_prune_runs_audit_range,
    DROP COLUMN audit_first_seq,
    DROP COLUMN audit_last_seq,
    DROP COLUMN past_consumers,
    DROP COLUMN outcomes_pruned,
    DROP COLUMN outcomes_unread;

DROP TABLE recovery_pruned_dispatches;
-- resolver migrate rolled every provider's own schema back before this (provider_schemas.py).
DROP TABLE resolver_provider_migrations, resolver_evidence_tables;

DROP TABLE recovery_outcome_reader_scopes;
DROP TABLE recovery_outcome_consumers;
DROP TABLE recovery_outcomes;

DROP INDEX ix_recovery_resolutions_manual;
CREATE INDEX ix_recovery_resolutions_manual
    ON approved_action_recovery_resolutions (resolved_at_ms, resolution_id)
    WHERE source = 'manual';
