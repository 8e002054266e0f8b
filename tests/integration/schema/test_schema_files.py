"""The current SQL files and the migrations build the same database, to the last function body.

resolver/db/schema/ is today's definition; resolver/db/migrations/sql/ is how a deployed
database got there. A fresh database migrated one revision at a time must have exactly the
catalog of one built from the current files (tables, columns, constraints, indexes,
functions with their bodies, triggers, privileges, comments), and every downgrade must undo
its upgrade exactly.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from resolver.core.domain import ID_PATTERN, ID_REGEX
from resolver.db import migrate
from resolver.db.migrate import MIGRATIONS_DIR
from resolver.db.schema_files import (
    MIGRATIONS_SQL_DIR,
    migration_file,
    schema_files,
    schema_script,
)
from tests.helpers.catalog import Catalog, catalog, catalog_diff
from tests.helpers.postgres import DatabaseFactory


def _revisions() -> list[str]:
    """Every revision, oldest first."""
    graph = migrate.revision_graph()
    ordered: list[str] = []
    parent: str | None = None
    while len(ordered) < len(graph):
        (parent,) = [rev for rev, down in graph.items() if down == parent]
        ordered.append(parent)
    return ordered


def _build_from_files(url: str) -> None:
    with psycopg.connect(url) as conn:
        # No parameters: one simple query holding every statement, as `psql -f` would send it.
        conn.execute(schema_script())


@pytest.fixture(scope="module")
def from_files(databases: DatabaseFactory) -> Iterator[str]:
    url = databases.create_empty()
    _build_from_files(url)
    yield url
    databases.drop(url)


@pytest.fixture
def empty(databases: DatabaseFactory) -> Iterator[str]:
    url = databases.create_empty()
    yield url
    databases.drop(url)


def test_migrating_step_by_step_builds_what_the_current_files_define(
    from_files: str, empty: str
) -> None:
    for revision in _revisions():
        migrate.upgrade(empty, revision)
    assert migrate.current_revision(empty) == migrate.head_revision()
    diff = catalog_diff(catalog(from_files), catalog(empty), ("schema files", "migrations"))
    assert diff == "", f"resolver/db/schema/ and the migrations disagree:\n{diff}"


def test_a_database_stamped_with_renamed_revision_ids_migrates_cleanly(
    from_files: str, empty: str
) -> None:
    # A database an earlier release migrated carries that release's revision ids: at every
    # renamed revision the stamp goes back to the old id, and `resolver migrate` carries on.
    old_id = {new: old for old, new in migrate.RENAMED_REVISIONS.items()}
    stamped: list[str] = []
    for revision in _revisions():
        migrate.upgrade(empty, revision)
        assert migrate.current_revision(empty) == revision
        if revision in old_id:
            with psycopg.connect(empty) as conn:
                conn.execute("UPDATE alembic_version SET version_num = %s", [old_id[revision]])
            stamped.append(old_id[revision])
            assert migrate.classify(old_id[revision]) is migrate.SchemaStatus.BEHIND
    assert sorted(stamped) == sorted(migrate.RENAMED_REVISIONS)
    migrate.upgrade(empty)
    assert migrate.current_revision(empty) == migrate.head_revision()
    diff = catalog_diff(catalog(from_files), catalog(empty), ("schema files", "migrations"))
    assert diff == "", diff
    # An old id is a valid target too, and lands on the same revision under its new id.
    migrate.downgrade(empty, "0009_perf")
    assert migrate.current_revision(empty) == "0008_hot_fillfactor"
    migrate.upgrade(empty, "0012_commit_skip_locked")
    assert migrate.current_revision(empty) == "0011_commit_skip_locked"


def test_every_downgrade_undoes_its_upgrade_exactly(empty: str) -> None:
    after: dict[str | None, Catalog] = {None: catalog(empty)}
    revisions = _revisions()
    for revision in revisions:
        migrate.upgrade(empty, revision)
        after[revision] = catalog(empty)
    for revision in reversed(revisions):
        previous = migrate.revision_graph()[revision]
        migrate.downgrade(empty, previous or "base")
        diff = catalog_diff(
            after[previous], catalog(empty), (f"upgraded to {previous}", "downgraded")
        )
        assert diff == "", f"downgrading {revision} leaves a different schema:\n{diff}"


def test_the_files_are_one_per_concern_and_hold_no_migration_bookkeeping() -> None:
    names = [path.name for path in schema_files()]
    assert names == sorted(names) and len(names) >= 6
    # Numbered uniquely: the load order is the numbers, never the alphabet after them.
    assert [name[:3] for name in names] == [f"{n:02d}_" for n in range(1, len(names) + 1)]
    assert "alembic_version" not in schema_script()


def test_the_chain_applies_in_numeric_order_and_each_file_is_its_revision() -> None:
    revisions = _revisions()
    assert [rev[:5] for rev in revisions] == [f"{n:04d}_" for n in range(1, len(revisions) + 1)]
    for revision in revisions:
        assert (MIGRATIONS_DIR / "versions" / f"{revision}.py").is_file(), revision
        for direction in ("up", "down"):
            assert migration_file(revision, direction).is_file(), (revision, direction)
    sql_files = {path.name for path in MIGRATIONS_SQL_DIR.glob("*.sql")}
    assert sql_files == {f"{rev}.{d}.sql" for rev in revisions for d in ("up", "down")}


# Words that name a round of work rather than what a migration changes.
HISTORY_WORDS = ("perf", "fix", "once", "round", "misc", "cleanup", "tweak")


def test_revisions_are_named_for_what_they_change() -> None:
    named_after_history = [
        rev for rev in _revisions() if any(word in rev.split("_")[1:] for word in HISTORY_WORDS)
    ]
    assert named_after_history == []


def test_renamed_revision_ids_map_to_known_ids_and_are_never_reused() -> None:
    graph = migrate.revision_graph()
    assert set(migrate.RENAMED_REVISIONS.values()) <= set(graph)
    assert not set(migrate.RENAMED_REVISIONS) & set(graph)
    for old in migrate.RENAMED_REVISIONS:
        assert migrate.classify(old) is migrate.SchemaStatus.BEHIND


# Edges of the identifier shape: length, first character, the allowed punctuation, and what a
# loose pattern would let through (a trailing newline, spaces, quotes, non-ASCII letters).
ID_SAMPLES = [
    *["a", "Z", "0", "a" * 128, "a" * 129, "", "a_b.c:d-e", "A:1", "9-", "a" + ":" * 127],
    *["_a", "-a", ".a", ":a", "a b", "a\n", "\na", "a\t", "a/b", "a'b", "a%", "a;"],
    *["é", "aé", "\uff21", "a\u0301", "ß"],
]


def test_python_and_the_database_check_one_id_shape(from_files: str) -> None:
    # The same pattern text in both languages, and the same verdict on every edge.
    assert f"SELECT p_value ~ '{ID_REGEX}'" in schema_script()
    with psycopg.connect(from_files) as conn:
        rows = conn.execute(
            "SELECT v, resolver_is_id(v) FROM unnest(%s::text[]) AS v", [ID_SAMPLES]
        ).fetchall()
    in_sql = dict(rows)
    in_python = {v: ID_PATTERN.match(v) is not None for v in ID_SAMPLES}
    assert in_sql == in_python
    assert in_python["a" * 128] and not in_python["a" * 129] and not in_python["a\n"]


# Each plants one kind of difference into a database built from the files.
PLANTED = {
    "function body": (
        "CREATE OR REPLACE FUNCTION resolver_now_ms(override_ms bigint) RETURNS bigint"
        " LANGUAGE sql VOLATILE PARALLEL SAFE AS $$ SELECT coalesce(override_ms, 0) $$",
        "function resolver_now_ms(bigint)",
    ),
    "column default": (
        "ALTER TABLE approved_action_recovery_controls ALTER COLUMN finding_count SET DEFAULT 1",
        "column approved_action_recovery_controls.finding_count",
    ),
    "column type": (
        "ALTER TABLE recovery_projects ALTER COLUMN version TYPE integer",
        "column recovery_projects.version",
    ),
    "constraint": (
        "ALTER TABLE recovery_projects DROP CONSTRAINT ck_recovery_projects_version_positive",
        "constraint recovery_projects.ck_recovery_projects_version_positive",
    ),
    "index predicate": (
        "DROP INDEX ix_recovery_controls_manual;"
        " CREATE INDEX ix_recovery_controls_manual ON approved_action_recovery_controls"
        " (manual_at_ms, dispatch_id)",
        "index ix_recovery_controls_manual",
    ),
    "trigger": (
        "DROP TRIGGER approved_action_dispatches_immutable ON approved_action_dispatches",
        "trigger approved_action_dispatches.approved_action_dispatches_immutable",
    ),
    "privilege": (
        "GRANT EXECUTE ON FUNCTION resolver_commit_automatic(json, bigint) TO PUBLIC",
        "function resolver_commit_automatic(json,bigint)",
    ),
    "search_path pin": (
        "ALTER FUNCTION resolver_commit_automatic(json, bigint) RESET search_path",
        "function resolver_commit_automatic(json,bigint)",
    ),
    "comment": (
        "COMMENT ON TABLE recovery_projects IS 'planted'",
        "relation recovery_projects",
    ),
}


@pytest.mark.parametrize("kind", list(PLANTED))
def test_the_catalog_diff_fails_on_a_planted_difference(
    from_files: str, empty: str, kind: str
) -> None:
    planted, entry = PLANTED[kind]
    _build_from_files(empty)
    with psycopg.connect(empty) as conn:
        conn.execute(planted)
    diff = catalog_diff(catalog(from_files), catalog(empty), ("schema files", "planted"))
    changed = {line[1:].split(":")[0] for line in diff.splitlines() if line[:1] in "+-"}
    assert entry in changed, diff
