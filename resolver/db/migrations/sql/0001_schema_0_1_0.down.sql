-- Back to an empty schema: every table of release 0.1.0 (and its data) goes.
DROP TABLE action_receipts, approved_action_dispatches, approved_action_executions,
    approved_action_recovery_controls, approved_action_recovery_resolutions,
    package_commit_markers, package_install_records, package_install_targets,
    recovery_audit_chain, recovery_audit_head, recovery_authorizations, recovery_late_evidence,
    recovery_late_watches, recovery_projects, recovery_proposals, recovery_prune_runs,
    recovery_role_bindings, recovery_two_person_rules, run_origin_facts;
