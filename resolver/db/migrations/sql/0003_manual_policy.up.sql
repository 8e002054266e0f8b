-- Migration 0003_manual_policy (up): the access-policy mirror (projects, role bindings) manual
-- decisions fence on.
-- Applied as it is by versions/0003_manual_policy.py; never edited once released (the current
-- definitions live in resolver/db/schema/).

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
