-- The outcome feed: one record per settled outcome, appended in the transaction that settles
-- it, read in order with a cursor by the runtime that owns the run (docs/outcomes.md); and the
-- consumers that registered a cursor. The appends and the reads are functions
-- (resolver/db/schema/functions/10_outcome_feed.sql, which says why the order has no gaps).
-- Today's definition, to read and to compare with: `resolver migrate` builds the tables with
-- the migrations (resolver/db/migrations/sql/), and the catalog-diff test
-- (tests/integration/schema/test_schema_files.py) proves a migrated database equals one built
-- from these files. A table change edits this file AND the release's migration
-- (resolver/db/README.md).

-- What a record reports, and who settled it (resolver.core.domain.outcomes spells the same
-- sets; tests/integration/schema/test_domain_sets.py compares them): domains, checked once per
-- session rather than planned again by every append (resolver/db/schema/tables/01_recovery_core.sql).
CREATE DOMAIN resolver_outcome_kind AS TEXT
    CONSTRAINT ck_resolver_outcome_kind CHECK (VALUE IN ('settled', 'contradicted', 'superseded'));
CREATE DOMAIN resolver_settled_by AS TEXT
    CONSTRAINT ck_resolver_settled_by CHECK (VALUE IN ('executor', 'resolver', 'person'));

-- A record's place in the feed is (xid, seq): the id of the transaction that wrote it and a
-- number in the order its statements wrote. Insert-only; only the prune deletes, with the
-- dispatch it reports.
CREATE TABLE recovery_outcomes (
    xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    seq bigint GENERATED ALWAYS AS IDENTITY,
    kind resolver_outcome_kind NOT NULL,
    dispatch_id text NOT NULL,
    approval_request_id text NOT NULL,
    project_id text NOT NULL,
    action_type text NOT NULL,
    state text NOT NULL,
    settled_by resolver_settled_by,
    finding text,
    result_code text,
    evidence_digest text,
    mutation_id text,
    reason_code text,
    actors text[],
    superseded_by text,
    occurred_at_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_outcomes PRIMARY KEY (xid, seq),
    CONSTRAINT ck_recovery_outcomes_settled_terminal
        CHECK (kind <> 'settled' OR (state = ANY (resolver_terminal_states()) AND settled_by IS NOT NULL)),
    CONSTRAINT ck_recovery_outcomes_superseded_names
        CHECK ((kind = 'superseded') = (superseded_by IS NOT NULL))
);

-- One dispatch's history and status, and the prune, find a dispatch's records by its id.
CREATE INDEX ix_recovery_outcomes_dispatch_id ON recovery_outcomes (dispatch_id);

-- Registered consumers and the cursor each saved after handling what it read. The prune keeps
-- every record a registered consumer has not passed yet, unless told otherwise
-- (docs/operations.md).
CREATE TABLE recovery_outcome_consumers (
    consumer resolver_id NOT NULL,
    cursor_xid xid8 NOT NULL,
    cursor_position bigint NOT NULL,
    registered_at_ms bigint NOT NULL,
    saved_at_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_outcome_consumers PRIMARY KEY (consumer)
);

-- The sessions that LISTEN on the feed's channel, each by its server process id, until its
-- registration lapses: a settling commit notifies only while one is registered, since a NOTIFY
-- makes the cluster's notifying commits flush one after another (resolver_outcomes_notify).
-- Written only by resolver_outcome_listen and resolver_outcome_unlisten, for the caller's own
-- session.
CREATE TABLE recovery_outcome_listeners (
    pid integer NOT NULL,
    listening_until_ms bigint NOT NULL,
    CONSTRAINT pk_recovery_outcome_listeners PRIMARY KEY (pid)
);

-- Which projects a reader login may follow (resolver_outcome_scope): a login that is a member
-- of resolver_outcome_reader (and not of resolver_executor) reads the records and the status of
-- the projects listed here for any role it is a member of, and none when none is listed. Kept by
-- the platform's policy writer beside the role bindings.
CREATE TABLE recovery_outcome_reader_scopes (
    role_name text NOT NULL,
    project_id resolver_id NOT NULL,
    CONSTRAINT pk_recovery_outcome_reader_scopes PRIMARY KEY (role_name, project_id),
    CONSTRAINT ck_recovery_outcome_reader_scopes_role_name_shape
        CHECK (length(role_name) BETWEEN 1 AND 63)
);
