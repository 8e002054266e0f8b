-- The refund ledger's entries: written by the ledger service in the transaction that books a
-- refund, one per dispatch, never changed (definitions.sql), removed with their dispatch by
-- `resolver prune` (the provider declares the table retained).
CREATE TABLE ledger_entries (
    dispatch_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    action_digest TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    amount_cents BIGINT NOT NULL,
    state TEXT NOT NULL,
    entry_digest TEXT NOT NULL,
    booked_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    CONSTRAINT pk_ledger_entries PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_ledger_entries_state_known CHECK (state IN ('booked', 'pending', 'rejected')),
    CONSTRAINT ck_ledger_entries_entry_digest_hex CHECK (entry_digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT fk_ledger_entries_dispatch_id FOREIGN KEY (dispatch_id)
        REFERENCES approved_action_dispatches (dispatch_id)
);
