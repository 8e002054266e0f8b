-- Migration 0018_late_expire_index (down): the expire scans the watches again.

DROP INDEX ix_recovery_late_watches_open_decided;
