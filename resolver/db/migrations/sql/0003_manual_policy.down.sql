-- Migration 0003_manual_policy (down): undoes 0003_manual_policy.up.sql, newest object first.

DROP TABLE recovery_role_bindings;

DROP TABLE recovery_projects;
