-- Migration 0006_page_commit (down): undoes 0006_page_commit.up.sql, newest object first.

DROP FUNCTION IF EXISTS resolver_commit_page(json, bigint);
