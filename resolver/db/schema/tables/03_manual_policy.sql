-- The access-policy mirror (projects, role bindings) manual decisions fence on.
-- Today's definition, to read and to compare with: `resolver migrate` builds the tables with
-- the migrations (resolver/db/migrations/sql/), and the catalog-diff test
-- (tests/integration/schema/test_schema_files.py) proves a migrated database equals one built
-- from these files. A table change edits this file AND the release's migration
-- (resolver/db/README.md).

CREATE TABLE recovery_projects (
    project_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    CONSTRAINT pk_recovery_projects PRIMARY KEY (project_id),
    CONSTRAINT ck_recovery_projects_version_positive CHECK (version >= 1)
);

CREATE TABLE recovery_role_bindings (
    project_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    permission TEXT NOT NULL,
    version BIGINT NOT NULL,
    CONSTRAINT pk_recovery_role_bindings PRIMARY KEY (project_id, user_id, permission),
    CONSTRAINT ck_recovery_role_bindings_version_positive CHECK (version >= 1),
    CONSTRAINT fk_recovery_role_bindings_project_id FOREIGN KEY(project_id) REFERENCES recovery_projects (project_id)
);
