-- The installer writes its three facts (as the executor role); providers only read them.
GRANT SELECT, INSERT ON package_install_records, package_install_targets, package_commit_markers TO resolver_executor;
GRANT SELECT ON package_install_records, package_install_targets, package_commit_markers TO resolver_evidence_reader;
