-- The installer's facts are insert-only: the resolver's own guard refuses every UPDATE and
-- DELETE but the prune's. `resolver migrate` applies this file again whenever it must
-- (resolver/db/provider_schemas.py), so each trigger is dropped first.

DROP TRIGGER IF EXISTS package_install_records_immutable ON package_install_records;
CREATE TRIGGER package_install_records_immutable
    BEFORE UPDATE OR DELETE ON package_install_records
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

DROP TRIGGER IF EXISTS package_install_targets_immutable ON package_install_targets;
CREATE TRIGGER package_install_targets_immutable
    BEFORE UPDATE OR DELETE ON package_install_targets
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();

DROP TRIGGER IF EXISTS package_commit_markers_immutable ON package_commit_markers;
CREATE TRIGGER package_commit_markers_immutable
    BEFORE UPDATE OR DELETE ON package_commit_markers
    FOR EACH ROW EXECUTE FUNCTION resolver_reject_mutation();
