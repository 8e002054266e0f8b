-- The digests, the result code and the versions are checked as a length and character classes,
-- the same strings passing as before: a bounded repetition (`{64}`, `{0,127}`) is unrolled by
-- PostgreSQL's regular-expression engine, about 20 µs a value against 1 to 2, paid by every
-- fact the installer writes. The checks stay the table's own (no function of the resolver's
-- schema), so this provider's tables depend on nothing of it but the dispatches.

ALTER TABLE package_install_records
    DROP CONSTRAINT ck_package_install_records_action_digest_hex,
    DROP CONSTRAINT ck_package_install_records_content_digest_hex,
    DROP CONSTRAINT ck_package_install_records_target_version_shape,
    DROP CONSTRAINT ck_package_install_records_result_code_shape,
    ADD CONSTRAINT ck_package_install_records_action_digest_hex
        CHECK (length(action_digest) = 64 AND action_digest !~ '[^0-9a-f]'),
    ADD CONSTRAINT ck_package_install_records_content_digest_hex
        CHECK (length(content_digest) = 64 AND content_digest !~ '[^0-9a-f]'),
    ADD CONSTRAINT ck_package_install_records_target_version_shape
        CHECK (length(target_version) BETWEEN 1 AND 128 AND target_version ~ '^[A-Za-z0-9]'
               AND target_version !~ '[^A-Za-z0-9_.+:~-]'),
    ADD CONSTRAINT ck_package_install_records_result_code_shape
        CHECK (length(result_code) BETWEEN 1 AND 64 AND result_code !~ '[^a-z0-9_.-]');

ALTER TABLE package_install_targets
    DROP CONSTRAINT ck_package_install_targets_content_digest_hex,
    DROP CONSTRAINT ck_package_install_targets_installed_version_shape,
    ADD CONSTRAINT ck_package_install_targets_content_digest_hex
        CHECK (length(content_digest) = 64 AND content_digest !~ '[^0-9a-f]'),
    ADD CONSTRAINT ck_package_install_targets_installed_version_shape
        CHECK (length(installed_version) BETWEEN 1 AND 128 AND installed_version ~ '^[A-Za-z0-9]'
               AND installed_version !~ '[^A-Za-z0-9_.+:~-]');

ALTER TABLE package_commit_markers
    DROP CONSTRAINT ck_package_commit_markers_content_digest_hex,
    ADD CONSTRAINT ck_package_commit_markers_content_digest_hex
        CHECK (length(content_digest) = 64 AND content_digest !~ '[^0-9a-f]');
