-- Late evidence after a human decision: for a bounded window after a manual decision the
-- automatic provider of the action type keeps looking, read-only, at a low cadence; a verified
-- finding is recorded as a fact of its own beside the decision (agreeing or contradicting it).
-- The terminal state never changes.
-- Today's definition, to read and to compare with: `resolver migrate` builds the tables with
-- the migrations (resolver/db/migrations/sql/), and the catalog-diff test
-- (tests/integration/schema/test_schema_files.py) proves a migrated database equals one built
-- from these files. A table change edits this file AND the release's migration
-- (resolver/db/README.md).

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
-- never every watch.
CREATE INDEX ix_recovery_late_watches_open_decided
    ON recovery_late_watches (decided_at_ms, dispatch_id)
    WHERE closed_at_ms IS NULL;

-- The late finding: at most one per dispatch (a verified finding closes the watch), never
-- changed afterwards. `agrees`: the finding says what the decision said.
CREATE TABLE recovery_late_evidence (
    observation_id resolver_id NOT NULL,
    dispatch_id text NOT NULL,
    decision_mutation_id text NOT NULL,
    finding text NOT NULL,
    agrees boolean NOT NULL,
    evidence_digest resolver_sha256_hex NOT NULL,
    result_code resolver_code NOT NULL,
    observer text NOT NULL,
    observed_at_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_late_evidence PRIMARY KEY (observation_id),
    CONSTRAINT uq_recovery_late_evidence_dispatch_id UNIQUE (dispatch_id),
    CONSTRAINT fk_recovery_late_evidence_dispatch_id FOREIGN KEY (dispatch_id)
        REFERENCES approved_action_recovery_resolutions (dispatch_id) ON DELETE CASCADE,
    CONSTRAINT ck_recovery_late_evidence_finding_verified
        CHECK (resolver_finding_outcome(finding) IS NOT NULL)
);
