-- Providers' own schemas: which migrations of each installed provider `resolver migrate`
-- applied (and the checksum of its definitions), and the evidence tables whose rows go with a
-- pruned dispatch. Both are written by `resolver migrate` only, from what each provider
-- declares (resolver/db/provider_schemas.py); only the schema owner and the prune read them.
-- Today's definition, to read and to compare with: `resolver migrate` builds the tables with
-- the migrations (resolver/db/migrations/sql/), and the catalog-diff test
-- (tests/integration/schema/test_schema_files.py) proves a migrated database equals one built
-- from these files. A table change edits this file AND the release's migration
-- (resolver/db/README.md).

CREATE TABLE resolver_provider_migrations (
    provider TEXT NOT NULL,
    name TEXT NOT NULL,
    checksum resolver_sha256_hex NOT NULL,
    applied_at_ms BIGINT DEFAULT (extract(epoch from clock_timestamp()) * 1000)::bigint NOT NULL,
    CONSTRAINT pk_resolver_provider_migrations PRIMARY KEY (provider, name)
);

CREATE TABLE resolver_evidence_tables (
    table_name TEXT NOT NULL,
    dispatch_column TEXT NOT NULL,
    provider TEXT NOT NULL,
    CONSTRAINT pk_resolver_evidence_tables PRIMARY KEY (table_name)
);
