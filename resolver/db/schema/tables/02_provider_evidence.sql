-- Internal receipts, insert-only: written by the executor protocol in the mutation's own
-- transaction (resolver_receipt_write). Providers' own evidence tables live with the provider
-- (resolver/db/provider_schemas.py).
-- Today's definition, to read and to compare with: `resolver migrate` builds the tables with
-- the migrations (resolver/db/migrations/sql/), and the catalog-diff test
-- (tests/integration/schema/test_schema_files.py) proves a migrated database equals one built
-- from these files. A table change edits this file AND the release's migration
-- (resolver/db/README.md).

CREATE TABLE action_receipts (
    dispatch_id TEXT NOT NULL,
    receipt JSONB NOT NULL,
    written_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    CONSTRAINT pk_action_receipts PRIMARY KEY (dispatch_id),
    CONSTRAINT ck_action_receipts_receipt_is_object CHECK (jsonb_typeof(receipt) = 'object'),
    CONSTRAINT ck_action_receipts_receipt_bounded CHECK (octet_length(receipt::text) <= 16384),
    CONSTRAINT fk_action_receipts_dispatch_id FOREIGN KEY(dispatch_id) REFERENCES approved_action_dispatches (dispatch_id)
);

