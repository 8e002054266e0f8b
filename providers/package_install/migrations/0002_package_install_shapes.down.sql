-- The checks as 0001 spelled them.

ALTER TABLE package_install_records
    DROP CONSTRAINT ck_package_install_records_action_digest_hex,
    DROP CONSTRAINT ck_package_install_records_content_digest_hex,
    DROP CONSTRAINT ck_package_install_records_target_version_shape,
    DROP CONSTRAINT ck_package_install_records_result_code_shape,
    ADD CONSTRAINT ck_package_install_records_action_digest_hex CHECK (action_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT ck_package_install_records_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT ck_package_install_records_target_version_shape CHECK (target_version ~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$'),
    ADD CONSTRAINT ck_package_install_records_result_code_shape CHECK (result_code ~ '^[a-z0-9_.-]{1,64}$');

ALTER TABLE package_install_targets
    DROP CONSTRAINT ck_package_install_targets_content_digest_hex,
    DROP CONSTRAINT ck_package_install_targets_installed_version_shape,
    ADD CONSTRAINT ck_package_install_targets_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT ck_package_install_targets_installed_version_shape CHECK (installed_version ~ '^[A-Za-z0-9][A-Za-z0-9_.+:~-]{0,127}$');

ALTER TABLE package_commit_markers
    DROP CONSTRAINT ck_package_commit_markers_content_digest_hex,
    ADD CONSTRAINT ck_package_commit_markers_content_digest_hex CHECK (content_digest ~ '^[0-9a-f]{64}$');
