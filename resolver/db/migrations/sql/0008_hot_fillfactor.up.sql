-- Migration 0008_hot_fillfactor (up): room on each page of the two versioned hot tables.
-- An execution is updated at its start, at every renewal and once more when it settles; no
-- index covers the columns those updates change, so each can be a HOT update (no new index
-- entry, less WAL, no index bloat) when the new row version fits on the same page. With
-- PostgreSQL's default fillfactor of 100 a page is packed full on insert and most terminal
-- updates had to move the row (22 % were HOT in benchmarks.writes). A control's updates
-- change its due-index columns and are never HOT; room on the page still keeps the new
-- version on the same page (one buffer, one page image after a checkpoint).
-- Applies to pages written from now on (VACUUM FULL or pg_repack rewrite older ones); nothing
-- else changes. Applied as it is by versions/0008_hot_fillfactor.py; never edited once released (the
-- current definitions live in resolver/db/schema/).

ALTER TABLE approved_action_executions SET (fillfactor = 85);
ALTER TABLE approved_action_recovery_controls SET (fillfactor = 90);
