-- Migration 0018_late_expire_index (up): the open watches by decision time, so that the
-- watcher's expire (queries.sql, late_watch_expire) reads the elapsed watches only instead of
-- every row of recovery_late_watches (open and closed) once per cadence. Applied as it is by
-- versions/0018_late_expire_index.py; never edited once released (the current definitions
-- live in resolver/db/schema/).

CREATE INDEX ix_recovery_late_watches_open_decided
    ON recovery_late_watches (decided_at_ms, dispatch_id)
    WHERE closed_at_ms IS NULL;
