-- Migration 0014_late_evidence (down): undoes 0014_late_evidence.up.sql.
DROP FUNCTION resolver_record_late_evidence(json, text, bigint, bigint);
DROP TRIGGER approved_action_recovery_resolutions_late_watch
    ON approved_action_recovery_resolutions;
DROP FUNCTION resolver_open_late_watch();
DROP TABLE recovery_late_evidence;
DROP TABLE recovery_late_watches;
