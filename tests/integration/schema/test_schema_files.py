"""The current SQL files and the migrations build the same database, to the last function body.

resolver/db/schema/tables/ is today's definition of the tables, resolver/db/schema/functions/
the only definition of the functions and triggers, resolver/db/migrations/sql/ how a deployed
database's tables got here (one migration per release). An empty database migrated, a
database of release 0.1.0 upgraded, and one upgraded, downgraded and upgraded again must all
have exactly the catalog of one built from the current files (tables, columns, constraints,
indexes, functions with their bodies, triggers, privileges, comments), keeping every row.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from resolver.core.domain import (
    ID_PATTERN,
    ID_REGEX,
    Decision,
    ManualDecision,
    ManualResult,
    Principal,
    ProposalAction,
    ProposalResult,
)
from resolver.core.errors import ConfigError
from resolver.db import definitions, migrate, provider_schemas, schema_files
from resolver.db.definitions import schema_script
from resolver.db.migrate import MIGRATIONS_DIR
from resolver.db.schema_files import (
    MIGRATIONS_SQL_DIR,
    function_files,
    migration_file,
    table_files,
)
from resolver.db.sql_script import split
from resolver.executor.client import ExecutionClient
from resolver.human.manual import ManualResolutionService
from tests.helpers.catalog import Catalog, catalog, catalog_diff
from tests.helpers.database import new_spec
from tests.helpers.postgres import DatabaseFactory
from tests.helpers.releases import (
    RELEASE_0_1_0,
    RELEASE_0_1_0_EXPORT,
    RELEASE_0_1_0_STAMP,
    RELEASE_0_2_0,
    RELEASE_0_2_0_STAMP,
    RELEASE_0_3_0,
    RELEASE_0_3_0_STAMP,
    load_release,
    load_release_0_1_0,
    table_rows,
)
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER, write_public_keys
from tests.helpers.stores import Storage

REPO = Path(__file__).parents[3]


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
        conn.execute(schema_script())  # type: ignore[call-overload]
        # Then the installed providers' own schemas, as `resolver migrate` applies them.

        def run(text: str, params: dict[str, object] | None = None) -> list[tuple[object, ...]]:
            cursor = conn.execute(text, params)  # type: ignore[call-overload]
            return list(cursor.fetchall()) if cursor.description else []

        provider_schemas.apply(
            run, provider_schemas.installed_schemas(), definitions_reapplied=True
        )


@pytest.fixture(scope="module")
def from_files(databases: DatabaseFactory) -> Iterator[str]:
    url = databases.create_empty()
    _build_from_files(url)
    yield url
    databases.drop(url)


@pytest.fixture(scope="module")
def files_catalog(from_files: str) -> Catalog:
    return catalog(from_files)


@pytest.fixture
def empty(databases: DatabaseFactory) -> Iterator[str]:
    url = databases.create_empty()
    yield url
    databases.drop(url)


@pytest.fixture
def release_0_1_0(empty: str) -> str:
    load_release_0_1_0(empty)
    return empty


@pytest.fixture
def release_0_2_0(empty: str) -> str:
    load_release(RELEASE_0_2_0, empty)
    return empty


def _same_as_files(files_catalog: Catalog, url: str, label: str) -> None:
    diff = catalog_diff(files_catalog, catalog(url), ("schema files", label))
    assert diff == "", f"resolver/db/schema/ and {label} disagree:\n{diff}"


def _rows_kept(before: dict[str, list[dict[str, object]]], url: str) -> None:
    """Every row of `before` is still there, its columns unchanged (new columns aside)."""
    after = table_rows(url, list(before))
    for table, rows in before.items():
        # Compared as sets of rows: the order of rows by their JSON shifts with a new column.
        columns = set(rows[0]) if rows else set()
        kept = sorted(
            json.dumps({k: row[k] for k in columns}, sort_keys=True) for row in after[table]
        )
        assert kept == sorted(json.dumps(row, sort_keys=True) for row in rows), table


def _applications_untimed(
    rows: dict[str, list[dict[str, object]]],
) -> dict[str, list[dict[str, object]]]:
    """`rows` without when each provider's migrations and definitions were applied: applying
    the definitions again (every upgrade and downgrade does) records a new time."""
    untimed = [
        {k: v for k, v in row.items() if k != "applied_at_ms"}
        for row in rows["resolver_provider_migrations"]
    ]
    return {**rows, "resolver_provider_migrations": untimed}


def _open_proposals_voided(before: dict[str, list[dict[str, object]]], url: str) -> None:
    """The one change the upgrade makes to a kept row: a proposal still open is voided
    (`unbound_fact`: its proposer's fact names no act, so nobody could confirm it), and only
    its closing columns change. `before` is updated to say so."""
    after = {
        r["proposal_id"]: r for r in table_rows(url, ["recovery_proposals"])["recovery_proposals"]
    }
    opened = [row for row in before["recovery_proposals"] if row["closed_as"] is None]
    assert opened, "the 0.1.0 database holds an open proposal"
    for row in opened:
        now = after[row["proposal_id"]]
        assert (now["closed_as"], now["close_reason_code"]) == ("voided", "unbound_fact")
        assert isinstance(now["closed_at_ms"], int)
        row.update(
            closed_as="voided", close_reason_code="unbound_fact", closed_at_ms=now["closed_at_ms"]
        )


def test_migrating_an_empty_database_builds_what_the_current_files_define(
    files_catalog: Catalog, empty: str
) -> None:
    migrate.upgrade(empty)
    assert migrate.current_revision(empty) == migrate.head_revision()
    _same_as_files(files_catalog, empty, "an empty database migrated")


def test_release_0_1_0_upgrades_in_one_step_keeping_every_row_and_its_audit_chain(
    files_catalog: Catalog, release_0_1_0: str
) -> None:
    assert migrate.current_revision(release_0_1_0) == RELEASE_0_1_0_STAMP
    assert migrate.classify(RELEASE_0_1_0_STAMP) is migrate.SchemaStatus.BEHIND
    before = table_rows(release_0_1_0)
    assert all(before.values()), [table for table, rows in before.items() if not rows]
    migrate.upgrade(release_0_1_0)
    assert migrate.current_revision(release_0_1_0) == migrate.head_revision()
    _same_as_files(files_catalog, release_0_1_0, "release 0.1.0 upgraded")
    _open_proposals_voided(before, release_0_1_0)
    _rows_kept(before, release_0_1_0)
    verified = subprocess.run(
        [
            sys.executable,
            "-m",
            "resolver",
            "audit",
            "verify",
            "--export",
            str(RELEASE_0_1_0_EXPORT),
        ],
        env={**os.environ, "RESOLVER_DATABASE_URL": release_0_1_0},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stderr
    assert "audit chain verified: 4 links (1 with pruned facts" in verified.stdout


def test_release_0_1_0_upgraded_verifies_its_facts_beside_acts_that_name_theirs(
    release_0_1_0: str, tmp_path: Path
) -> None:
    """Every fact 0.1.0 stored (it signed none) still verifies after the upgrade, the API's
    public keys in hand; the acts recorded after it (a reject, a confirmation) are links whose
    facts name their act."""
    migrate.upgrade(release_0_1_0)
    with Storage(release_0_1_0) as store:
        with psycopg.connect(release_0_1_0) as conn:
            now = int(conn.execute("SELECT resolver_now_ms(NULL)").fetchone()[0])  # type: ignore[index]
        executor = ExecutionClient(store, owner="executor-1", lease_seconds=1).at(now - 60_000)
        spec = executor.create_dispatch(new_spec("payments.charge", project_id="proj-upgrade"))
        lease = executor.start(executor.lease(spec.dispatch_id))
        service = ManualResolutionService(store, signer=TEST_SIGNER)
        alice, bob, carol = (
            Principal(user, now - 1_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid")
            for user in ("alice", "bob", "carol")
        )

        def decision(mutation_id: str) -> ManualDecision:
            return ManualDecision(
                lease.dispatch_id, Decision.CONFIRM_SUCCEEDED, mutation_id, lease.version, "paid"
            )

        assert service.decide(alice, decision("u-p1")) is ManualResult.PROPOSED
        rejected = service.close_proposal(
            carol, lease.dispatch_id, ProposalAction.REJECT, "u-r1", "not_yet"
        )
        assert rejected is ProposalResult.REJECTED
        assert service.decide(alice, decision("u-p2")) is ManualResult.PROPOSED
        assert service.decide(bob, decision("u-c2")) is ManualResult.COMMITTED
    keys = write_public_keys(tmp_path / "audit-keys")
    verified = subprocess.run(
        [sys.executable, "-m", "resolver", "audit", "verify", "--export",
         str(RELEASE_0_1_0_EXPORT), "--public-keys", str(keys)],
        env={**os.environ, "RESOLVER_DATABASE_URL": release_0_1_0},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stderr
    assert (
        "audit chain verified: 6 links (1 with pruned facts, 4 recorded before facts were "
        "signed, 0 before facts named their act); signatures verified"
    ) in verified.stdout


def test_back_to_release_0_1_0_with_its_own_functions_and_forward_again(
    files_catalog: Catalog, release_0_1_0: str
) -> None:
    as_released = catalog(release_0_1_0)
    rows = table_rows(release_0_1_0)
    migrate.upgrade(release_0_1_0)
    migrate.downgrade(release_0_1_0, "0001_schema_0_1_0")
    # The stamp release 0.1.0 knows, and exactly its tables, functions, triggers and privileges.
    assert migrate.current_revision(release_0_1_0) == RELEASE_0_1_0_STAMP
    diff = catalog_diff(as_released, catalog(release_0_1_0), ("release 0.1.0", "downgraded"))
    assert diff == "", diff
    assert table_rows(release_0_1_0) == rows
    migrate.upgrade(release_0_1_0)
    _same_as_files(files_catalog, release_0_1_0, "downgraded and upgraded again")
    _open_proposals_voided(rows, release_0_1_0)
    _rows_kept(rows, release_0_1_0)


# The databases the releases after 0.1.0 built (their own migrate and demo), with their stamps.
DEMO_RELEASES = pytest.mark.parametrize(
    ("dump", "stamp"),
    [(RELEASE_0_2_0, RELEASE_0_2_0_STAMP), (RELEASE_0_3_0, RELEASE_0_3_0_STAMP)],
    ids=["0.2.0", "0.3.0"],
)


@DEMO_RELEASES
def test_a_release_s_database_upgrades_to_what_the_files_define_keeping_every_row(
    files_catalog: Catalog, empty: str, dump: Path, stamp: str
) -> None:
    """A database a release built: each function's privileges as a new database has them too
    (0.2.0 closed some to PUBLIC that later definitions open), every row kept."""
    load_release(dump, empty)
    assert migrate.current_revision(empty) == stamp
    before = table_rows(empty)
    assert before["approved_action_recovery_resolutions"], "the demo settled some crashes"
    migrate.upgrade(empty)
    assert migrate.current_revision(empty) == migrate.head_revision()
    _same_as_files(files_catalog, empty, f"release {dump.stem} upgraded")
    kept = table_rows(empty, list(before))
    assert _applications_untimed(kept) == _applications_untimed(before)


@DEMO_RELEASES
def test_back_to_a_release_with_its_own_functions_and_forward_again(
    files_catalog: Catalog, empty: str, dump: Path, stamp: str
) -> None:
    load_release(dump, empty)
    as_released = catalog(empty)
    rows = table_rows(empty)
    migrate.upgrade(empty)
    migrate.downgrade(empty, stamp)
    assert migrate.current_revision(empty) == stamp
    diff = catalog_diff(as_released, catalog(empty), (dump.stem, "downgraded"))
    assert diff == "", diff
    assert _applications_untimed(table_rows(empty)) == _applications_untimed(rows)
    migrate.upgrade(empty)
    _same_as_files(files_catalog, empty, "downgraded and upgraded again")
    again = table_rows(empty, list(rows))
    assert _applications_untimed(again) == _applications_untimed(rows)


# What 0.2.0's replicas, API and executors may still call during a rolling upgrade: a function
# of that release leaves (or changes its arguments or result) only when named here, with the
# CHANGELOG line that says so. 0.3.0 dropped what 0.2.0 kept for 0.1.0's code and never called
# itself: the automatic commit's 0.1.0 name, and the dispatch's creation without a summary
# (docs/executor-protocol.md, Versioning).
WITHDRAWN_SINCE_0_2_0: frozenset[str] = frozenset(
    {
        "resolver_commit_page(json,bigint) -> SETOF text",
        "resolver_dispatch_create(text,text,text,text,text,text,integer,text)"
        " -> TABLE(dispatch_id text, created boolean, created_at_ms bigint)",
    }
)
# Trigger functions aside: nothing calls one but its trigger, which leaves with it.
SIGNATURES = (
    "SELECT p.oid::regprocedure::text || ' -> ' || pg_get_function_result(p.oid)"
    " FROM pg_proc AS p WHERE p.pronamespace = current_schema()::regnamespace"
    " AND p.proname LIKE 'resolver\\_%' AND p.prorettype <> 'trigger'::regtype"
)


def _signatures(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {row for (row,) in conn.execute(SIGNATURES).fetchall()}


# And 0.3.0's, during the next release's rolling upgrade. None has left yet.
WITHDRAWN_SINCE_0_3_0: frozenset[str] = frozenset()


@pytest.mark.parametrize(
    ("dump", "withdrawn"),
    [(RELEASE_0_2_0, WITHDRAWN_SINCE_0_2_0), (RELEASE_0_3_0, WITHDRAWN_SINCE_0_3_0)],
    ids=["0.2.0", "0.3.0"],
)
def test_every_function_of_a_release_is_still_there_with_its_signature(
    from_files: str, empty: str, dump: Path, withdrawn: frozenset[str]
) -> None:
    load_release(dump, empty)
    gone = _signatures(empty) - _signatures(from_files)
    assert gone == set(withdrawn), sorted(gone)


def test_a_downgrade_that_cannot_guard_a_provider_s_tables_again_is_refused(
    release_0_2_0: str,
) -> None:
    """Replacing the resolver's definitions drops the providers' triggers: a provider whose
    definitions the database recorded but which is not installed could not define them again,
    so the downgrade refuses before anything changes."""
    migrate.upgrade(release_0_2_0)
    with psycopg.connect(release_0_2_0, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO resolver_provider_migrations (provider, name, checksum)"
            " VALUES ('refunds', 'definitions', repeat('0', 64))"
        )
    before = catalog(release_0_2_0)
    with pytest.raises(ConfigError, match=r"providers \['refunds'\] have definitions"):
        migrate.downgrade(release_0_2_0, RELEASE_0_2_0_STAMP)
    assert migrate.current_revision(release_0_2_0) == migrate.head_revision()
    assert catalog_diff(before, catalog(release_0_2_0), ("before", "after")) == ""


def test_a_downgrade_defines_again_only_the_providers_the_database_recorded(
    release_0_2_0: str,
) -> None:
    """A provider installed but never migrated into this database (its package came after the
    last `resolver migrate`) has no tables: the downgrade leaves its definitions out."""
    migrate.upgrade(release_0_2_0)
    with psycopg.connect(release_0_2_0, autocommit=True) as conn:
        conn.execute("DELETE FROM resolver_evidence_tables WHERE provider = 'ledger'")
        conn.execute("DELETE FROM resolver_provider_migrations WHERE provider = 'ledger'")
        conn.execute("DROP TABLE ledger_entries")
    migrate.downgrade(release_0_2_0, RELEASE_0_2_0_STAMP)
    with psycopg.connect(release_0_2_0) as conn:
        guards = conn.execute(
            "SELECT t.tgname FROM pg_trigger AS t WHERE NOT t.tgisinternal"
            " AND t.tgname LIKE '%_immutable' AND t.tgrelid::regclass::text LIKE 'package_%'"
            " ORDER BY 1"
        ).fetchall()
    # The recorded providers' guards are back (a built-in's, for one).
    assert guards == [
        ("package_commit_markers_immutable",),
        ("package_install_records_immutable",),
        ("package_install_targets_immutable",),
    ]


def test_a_downgrade_below_what_the_database_recorded_is_refused_and_changes_nothing(
    empty: str,
) -> None:
    migrate.upgrade(empty)
    before = catalog(empty)
    with pytest.raises(ConfigError, match="no record of the functions it had there"):
        migrate.downgrade(empty, "0001_schema_0_1_0")
    assert catalog(empty) == before
    assert migrate.current_revision(empty) == migrate.head_revision()


def test_a_revision_short_of_the_head_is_refused_unless_already_past(empty: str) -> None:
    # This release carries only its head's functions: stopping short needs the older release.
    with pytest.raises(ConfigError, match="cannot stop at 0001_schema_0_1_0"):
        migrate.upgrade(empty, "0001_schema_0_1_0")
    assert migrate.current_revision(empty) is None
    migrate.upgrade(empty)
    migrate.upgrade(empty, "0001_schema_0_1_0")  # already past it: nothing to do
    migrate.upgrade(empty, RELEASE_0_1_0_STAMP)
    assert migrate.current_revision(empty) == migrate.head_revision()


def test_the_printed_script_builds_the_same_database_from_empty(
    files_catalog: Catalog, empty: str
) -> None:
    with psycopg.connect(empty, autocommit=True) as conn:
        conn.execute(migrate.upgrade_sql())  # type: ignore[call-overload]
    _same_as_files(files_catalog, empty, "the printed script on an empty database")
    migrate.upgrade(empty)  # what the script recorded is what this release applies: no-op
    _same_as_files(files_catalog, empty, "the printed script, then migrate")


def _run_script(url: str, script: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(script)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("dump", "stamp", "at"),
    [
        (RELEASE_0_1_0, RELEASE_0_1_0_STAMP, "0001_schema_0_1_0"),
        (RELEASE_0_2_0, RELEASE_0_2_0_STAMP, RELEASE_0_2_0_STAMP),
        (RELEASE_0_3_0, RELEASE_0_3_0_STAMP, RELEASE_0_3_0_STAMP),
    ],
    ids=["0.1.0", "0.2.0", "0.3.0"],
)
def test_the_printed_script_upgrades_a_release_s_database_as_migrate_does(
    files_catalog: Catalog, empty: str, dump: Path, stamp: str, at: str
) -> None:
    """`resolver migrate --sql --from` for a DBA who runs reviewed scripts: the same database
    as `resolver migrate` makes, and a copy of the definitions it replaced where the release
    kept none, so the way back stays open."""
    load_release(dump, empty)
    as_released = catalog(empty)
    _run_script(empty, migrate.upgrade_sql(from_revision=stamp))
    assert migrate.current_revision(empty) == migrate.head_revision()
    _same_as_files(files_catalog, empty, f"release {dump.stem} upgraded by the printed script")
    migrate.upgrade(empty)  # what the script recorded is what this release applies
    _same_as_files(files_catalog, empty, "the printed script, then migrate")
    migrate.downgrade(empty, at)
    diff = catalog_diff(as_released, catalog(empty), (dump.stem, "downgraded"))
    assert diff == "", diff


def test_a_printed_script_refuses_a_database_it_does_not_start_from(
    databases: DatabaseFactory, empty: str
) -> None:
    other = databases.create_empty()
    try:
        load_release(RELEASE_0_2_0, other)
        released = catalog(other)
        refusals = [
            (other, migrate.upgrade_sql(), "builds an empty schema; the database is at revision"
             f" {RELEASE_0_2_0_STAMP}: print one with resolver migrate --sql --from"),
            (other, migrate.upgrade_sql(from_revision=RELEASE_0_1_0_STAMP),
             f"upgrades a database at revision 0001_schema_0_1_0; this one is at"
             f" {RELEASE_0_2_0_STAMP}"),
            (empty, migrate.upgrade_sql(from_revision=RELEASE_0_2_0_STAMP),
             "has no schema yet: print one without --from"),
        ]  # fmt: skip
        for url, script, message in refusals:
            with pytest.raises(psycopg.errors.RaiseException, match=re.escape(message)):
                _run_script(url, script)
        assert catalog_diff(released, catalog(other), ("0.2.0", "after the refusals")) == ""
        assert migrate.current_revision(empty) is None
    finally:
        databases.drop(other)


def test_a_changed_function_is_one_file_and_migrate_applies_it(
    files_catalog: Catalog, empty: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate.upgrade(empty)
    scratch = tmp_path / "functions"
    shutil.copytree(schema_files.FUNCTIONS_DIR, scratch)
    target = scratch / "01_recovery_core.sql"
    text = target.read_text(encoding="utf-8")
    body = "RETURN ARRAY['succeeded', 'failed', 'blocked'];"
    assert text.count(body) == 1
    target.write_text(text.replace(body, f"-- changed in a scratch copy\n    {body}"), "utf-8")
    monkeypatch.setattr(schema_files, "FUNCTIONS_DIR", scratch)
    for cached in (
        definitions._statements,
        definitions.functions_script,
        definitions.triggers_script,
        definitions.checksum,
    ):
        cached.cache_clear()
    try:
        migrate.upgrade(empty)
        changed = catalog(empty)
        diff = catalog_diff(files_catalog, changed, ("the files", "the scratch copy migrated"))
        touched = {line[1:].split(":")[0] for line in diff.splitlines()[2:] if line[:1] in "+-"}
        assert touched == {"function resolver_terminal_states()"}, diff
        assert "changed in a scratch copy" in changed["function resolver_terminal_states()"]
        with psycopg.connect(empty) as conn:
            recorded = conn.execute("SELECT recorded_at FROM resolver_definitions").fetchall()
        migrate.upgrade(empty)  # unchanged since: nothing is applied again
        with psycopg.connect(empty) as conn:
            assert (
                conn.execute("SELECT recorded_at FROM resolver_definitions").fetchall() == recorded
            )
    finally:
        for cached in (
            definitions._statements,
            definitions.functions_script,
            definitions.triggers_script,
            definitions.checksum,
        ):
            cached.cache_clear()


_DEFINES = re.compile(
    r"^\s*CREATE\s+(OR\s+REPLACE\s+)?(CONSTRAINT\s+)?(FUNCTION|PROCEDURE|TRIGGER)\b", re.I
)


def test_no_migration_holds_a_function_or_trigger() -> None:
    for path in sorted(MIGRATIONS_SQL_DIR.glob("*.sql")):
        for statement in split(path.read_text(encoding="utf-8")):
            assert not _DEFINES.match(statement.code), f"{path.name}: {statement.code[:80]}"
    for path in table_files():
        for statement in split(path.read_text(encoding="utf-8")):
            assert not _DEFINES.match(statement.code), f"{path.name}: {statement.code[:80]}"


def test_each_function_body_is_written_in_exactly_one_shipped_file(from_files: str) -> None:
    with psycopg.connect(from_files) as conn:
        bodies = conn.execute(
            "SELECT p.proname, p.prosrc FROM pg_proc AS p"
            " WHERE p.pronamespace = current_schema()::regnamespace"
        ).fetchall()
    shipped = [
        path.read_text(encoding="utf-8")
        for folder in ("resolver", "providers")
        for path in (REPO / folder).rglob("*")
        if path.suffix in {".sql", ".py"} and path.is_file()
    ]
    assert len(bodies) > 40
    for name, body in bodies:
        assert sum(body.strip() in text for text in shipped) == 1, name


def test_the_files_are_one_per_concern_and_hold_no_migration_bookkeeping() -> None:
    for files in (table_files(), function_files()):
        names = [path.name for path in files]
        # Numbered uniquely: the load order is the numbers, never the alphabet after them.
        assert names == sorted(names) and len(names) >= 6
        assert len({name[:3] for name in names}) == len(names)
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


def test_released_revision_ids_map_to_known_ids_and_are_never_reused() -> None:
    graph = migrate.revision_graph()
    assert set(migrate.RELEASED_REVISIONS.values()) <= set(graph)
    assert not set(migrate.RELEASED_REVISIONS) & set(graph)
    for old in migrate.RELEASED_REVISIONS:
        assert migrate.classify(old) is migrate.SchemaStatus.BEHIND


# Edges of the identifier shape: length, first character, the allowed punctuation, and what a
# loose pattern would let through (a trailing newline, spaces, quotes, non-ASCII letters).
ID_SAMPLES = [
    *["a", "Z", "0", "a" * 128, "a" * 129, "", "a_b.c:d-e", "A:1", "9-", "a" + ":" * 127],
    *["_a", "-a", ".a", ":a", "a b", "a\n", "\na", "a\t", "a/b", "a'b", "a%", "a;"],
    *["é", "aé", "\uff21", "a\u0301", "ß"],
]


def test_python_and_the_database_check_one_id_shape(from_files: str) -> None:
    # The same verdict on every edge in both languages. The database spells the pattern as a
    # length and character classes (a bounded repetition costs its regex engine 17 µs a
    # call), so the verdicts, not the texts, are what must agree.
    assert ID_REGEX == r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
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


def test_python_and_the_database_agree_on_strong_authentication(from_files: str) -> None:
    """resolver_strong_amr (the manual commit and the rule at commit) and the API's STRONG_AMR
    name the same second factors."""
    from resolver.human.manual import STRONG_AMR

    candidates = sorted(STRONG_AMR | {"pwd", "kba", "sms", "MFA", "", "mfa "})
    with psycopg.connect(from_files) as conn:
        strong = {
            amr
            for amr in candidates
            if conn.execute("SELECT resolver_strong_amr(ARRAY[%s]::text[])", (amr,)).fetchone()
            == (True,)
        }
        assert conn.execute("SELECT resolver_strong_amr('{}'::text[])").fetchone() == (False,)
    assert strong == STRONG_AMR
