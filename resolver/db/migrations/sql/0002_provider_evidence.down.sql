-- Migration 0002_provider_evidence (down): undoes 0002_provider_evidence.up.sql, newest object first.

DROP TRIGGER IF EXISTS run_origin_facts_guard ON run_origin_facts;

DROP FUNCTION IF EXISTS resolver_guard_run_origin();

DROP TRIGGER IF EXISTS package_commit_markers_immutable ON package_commit_markers;

DROP TRIGGER IF EXISTS package_install_targets_immutable ON package_install_targets;

DROP TRIGGER IF EXISTS package_install_records_immutable ON package_install_records;

DROP TRIGGER IF EXISTS action_receipts_immutable ON action_receipts;

DROP TABLE package_commit_markers;

DROP TABLE package_install_targets;

DROP TABLE package_install_records;

DROP TABLE run_origin_facts;

DROP TABLE action_receipts;
