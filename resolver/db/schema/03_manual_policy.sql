-- Current definitions: the access-policy mirror (projects, role bindings) manual decisions
-- fence on.
-- Applied in file-name order onto an empty schema, these files build what the migrations build
-- step by step (tests/integration/schema/test_schema_files.py compares the two catalogs). A schema
-- change edits the definition here AND adds a migration under resolver/db/migrations/sql/.

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
