"""Release 0.3.0's own code on this release's schema: what a rolling upgrade runs until its last
old pod is replaced, and what a `helm rollback` that leaves the schema where it is runs
(docs/deployment.md: the schema only adds). That release's executor SDK crosses the start
barrier and writes its receipts, its `resolver run` settles the crashes from them, warning that
the schema is ahead once it is, and this release reads what both wrote; the Python example of that
release's SDK page runs as the page shows it. Its code comes from this
repository's own history (`git archive` of the commit that recorded it as released); a checkout
without that history (a shallow clone) skips, saying so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from resolver.db import migrate
from tests.helpers.catalog import catalog, catalog_diff
from tests.helpers.crashes import environment, lease_expired, wait_until
from tests.helpers.database import SQL
from tests.helpers.postgres import DatabaseFactory
from tests.helpers.releases import (
    RELEASE_0_2_0_COMMIT,
    RELEASE_0_2_0_STAMP,
    RELEASE_0_3_0_COMMIT,
    RELEASE_0_3_0_STAMP,
    load_release_0_1_0,
    release_files,
)

EXECUTOR = Path(__file__).with_name("previous_release_executor.py")
KEY_HEX = bytes(range(32)).hex()  # the executor script's receipt key, k-previous
CRASHED = 3


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `resolver` and `providers` packages of release 0.3.0, and its SDK's page, as it
    shipped them."""
    into = tmp_path_factory.mktemp("release-0.3.0")
    paths = ["resolver", "providers", "docs/executor-sdk.md"]
    return release_files(RELEASE_0_3_0_COMMIT, paths, into)


@pytest.fixture(scope="module")
def release_0_2_0(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `resolver` and `providers` packages of release 0.2.0: its migrate, for a database
    that lived through every release."""
    into = tmp_path_factory.mktemp("release-0.2.0")
    return release_files(RELEASE_0_2_0_COMMIT, ["resolver", "providers"], into)


def _run_previous(release: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python *args` with a release's code first on the path (`-m` puts the working directory
    there too: the release's, not this checkout)."""
    return subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", *args],
        cwd=release,
        env=environment({"PYTHONPATH": str(release), **env}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_its_executor_and_its_replica_settle_crashes_on_this_schema(
    previous: Path, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    executed = _run_previous(previous, str(EXECUTOR), database_url, str(CRASHED))
    assert executed.returncode == 0, executed.stderr
    assert "version 0.3.0" in executed.stderr
    ids = executed.stdout.split()
    assert len(ids) == CRASHED, executed.stdout
    wait_until(lambda: all(lease_expired(sql, d) for d in ids), "the executor's leases lapse")

    config = tmp_path / "providers.yaml"
    config.write_text("action_types:\n  db.mutation: {provider: internal_mutation}\n")
    replica = _run_previous(
        previous,
        "-m",
        "resolver",
        "run",
        "--once",
        RESOLVER_DATABASE_URL=database_url,
        RESOLVER_CONFIG=str(config),
        RESOLVER_RECEIPT_KEYS=f"k-previous={KEY_HEX}",
    )
    assert replica.returncode == 0, replica.stderr
    # It says the schema is ahead of it exactly when this release's migrations are.
    ahead = migrate.head_revision() != RELEASE_0_3_0_STAMP
    assert ('"event": "schema_ahead"' in replica.stderr) is ahead, replica.stderr
    assert (f'"expected": "{RELEASE_0_3_0_STAMP}"' in replica.stderr) is ahead

    settled = sql.all(
        "SELECT e.state, r.source, r.finding, c.status, o.kind, o.settled_by"
        " FROM approved_action_executions AS e"
        " JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)"
        " JOIN approved_action_recovery_controls AS c USING (dispatch_id)"
        " JOIN recovery_outcomes AS o USING (dispatch_id)"
        " WHERE e.dispatch_id = ANY(%s)",
        ids,
    )
    assert (
        settled
        == [
            {
                "state": "succeeded",
                "source": "automatic",
                "finding": "verified_succeeded",
                "status": "resolved",
                "kind": "settled",
                "settled_by": "resolver",
            }
        ]
        * CRASHED
    )


def test_its_documented_python_example_runs_on_this_schema(
    previous: Path, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    """The Python example of 0.3.0's docs/executor-sdk.md, as that page shows it: an executor
    built as that release documented keeps working after the migration."""
    page = (previous / "docs" / "executor-sdk.md").read_text(encoding="utf-8")
    section = page[page.index("\n## Python\n") :]
    example = section[section.index("```python\n") + len("```python\n") :]
    example = example[: example.index("```")]
    script = tmp_path / "executor_sdk_example.py"
    script.write_text(example, encoding="utf-8")
    sql.all("CREATE TABLE accounts (id integer PRIMARY KEY, balance integer NOT NULL)")
    sql.all("INSERT INTO accounts VALUES (42, 100)")
    ran = _run_previous(
        previous,
        str(script),
        DATABASE_URL=database_url,
        DISPATCH_ID="d-previous-1,d-previous-2",
        RESOLVER_RECEIPT_KEYS=f"k-previous={KEY_HEX}",
        RESOLVER_RECEIPT_SIGNING_KID="k-previous",
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.count("completion=<CompletionResult.COMMITTED") == 2, ran.stdout
    states = sql.all(
        "SELECT dispatch_id, state FROM approved_action_executions"
        " WHERE dispatch_id LIKE 'd-previous-%%' ORDER BY 1"
    )
    assert states == [
        {"dispatch_id": "d-previous-1", "state": "succeeded"},
        {"dispatch_id": "d-previous-2", "state": "succeeded"},
    ]
    assert sql.one("SELECT balance FROM accounts WHERE id = 42")["balance"] == 80


def test_a_database_that_lived_through_every_release_is_what_a_new_one_is(
    release_0_2_0: Path, previous: Path, databases: DatabaseFactory
) -> None:
    """0.1.0's database, upgraded by 0.2.0's own `resolver migrate`, then by 0.3.0's, then by
    this release's: the same catalog as a database this release creates, and back down to
    exactly what 0.3.0 had made of it."""
    new = databases.create()
    lived = databases.create_empty()
    try:
        load_release_0_1_0(lived)
        for release, stamp in (
            (release_0_2_0, RELEASE_0_2_0_STAMP),
            (previous, RELEASE_0_3_0_STAMP),
        ):
            upgraded = _run_previous(
                release, "-m", "resolver", "migrate", RESOLVER_DATABASE_URL=lived
            )
            assert upgraded.returncode == 0, upgraded.stderr
            assert migrate.current_revision(lived) == stamp
        as_0_3_0_left_it = catalog(lived)
        migrate.upgrade(lived)
        every = ("a new database", "0.1.0, 0.2.0, 0.3.0, now")
        diff = catalog_diff(catalog(new), catalog(lived), every)
        assert diff == "", diff
        migrate.downgrade(lived, RELEASE_0_3_0_STAMP)
        diff = catalog_diff(as_0_3_0_left_it, catalog(lived), ("0.3.0's upgrade", "downgraded"))
        assert diff == "", diff
    finally:
        databases.drop(new)
        databases.drop(lived)
