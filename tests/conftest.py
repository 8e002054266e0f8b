"""Shared fixtures: a real PostgreSQL (never a mock), one fresh migrated database per test."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Generator, Iterator
from typing import Any

import psycopg
import pytest
import structlog
from psycopg.rows import dict_row

from resolver.db.evidence import ReadOnlyDatabase
from resolver.executor.client import ExecutionClient
from tests.helpers.database import EXEC_LEASE_MS, SQL, World
from tests.helpers.mariadb import MariaDb, running_mariadb
from tests.helpers.mariadb import available as mariadb_available
from tests.helpers.postgres import DatabaseFactory, test_server
from tests.helpers.stores import Storage

# The provider contract kit, used the way a provider author would: as a pytest plugin.
pytest_plugins = ["resolver.evidence.contract"]

# Log lines a test does not capture read as the console renders them, with a plain traceback:
# structlog's default draws every frame's locals, which takes seconds for an app's frames and
# would time a test's HTTP client out. The services configure their own JSON logs.
structlog.configure(
    processors=[
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback),
    ]
)

# Fixtures whose state outlives a worker's own databases (cluster-wide roles, a directory the
# Node.js tests share): every test that uses one runs on the same worker, one after another.
SHARED_STATE_GROUPS = {
    "role_db": "database-roles",
    "node_sdk": "node-sdk",
}


# The modules that take longest (an image build, model-checked and multi-replica suites, the
# benchmark harness, the browser suites), longest first. They are handed out before the rest,
# so each starts while short tests fill the other workers, instead of one of them starting
# last and the run waiting for it alone. Measured with --durations on a 2-core machine.
LONGEST_FIRST = (
    "tests/deploy/test_image.py",
    "tests/langgraph/test_crash_matrix.py",
    "tests/contention/test_stateful.py",
    "tests/contention/test_failover.py",
    "tests/contention/test_cluster.py",
    "tests/contention/test_outcome_switchover.py",
    "tests/integration/api/test_console.py",
    "tests/integration/api/test_console_informed.py",
    "tests/integration/api/test_console_one_view.py",
    "tests/integration/api/test_console_truth.py",
    "tests/integration/api/test_console_sessions.py",
    "tests/integration/pooler/test_pgbouncer.py",
    "tests/integration/commands/test_benchmark_smoke.py",
    "tests/contention/test_late_stateful.py",
    "tests/integration/outcomes/test_feed_race.py",
    "tests/unit/test_public_imports.py",
    "tests/protocol/test_node_object_publication.py",
    "tests/contention/test_crash_matrix.py",
)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, object, object]:
    """`python -m pytest` alone runs in parallel: one worker per core, tests handed out one at
    a time except the groups below. `-n0` or `-p no:xdist` run everything in this process."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        # A worker parses the command line again, where the run's `--dist` may not be (set
        # here, below): the controller says whether groups are handed out whole.
        config.option.loadgroup = bool(workerinput.get("loadgroup"))
    elif config.pluginmanager.hasplugin("xdist") and config.option.dist == "no":
        # `-n N` hands groups out whole as well (`-n0`: xdist sets `--dist no` again).
        if config.option.numprocesses is None:
            config.option.numprocesses = "auto"
        config.option.dist = "loadgroup"
    return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(pytest-xdist, on the controller, for each worker it starts.)"""
    node.workerinput["loadgroup"] = node.config.option.dist == "loadgroup"


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, object, object]:
    """Keep together on one worker what must not be split (pytest-xdist's `loadgroup`): a
    module whose fixtures live longer than a test (built once, not once per worker or every
    time tests of another module came in between), and tests sharing state beyond a database.
    Then put the longest modules first (a stable sort: every other order is kept).

    Marks before xdist reads them, and checks after that xdist tagged each marked test with
    its group; without xdist the marks change nothing.
    """
    _group(items)
    result = yield
    if getattr(config, "workerinput", {}).get("loadgroup"):
        _require_group_tags(config, items)
    return result


def _group(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        group = next(
            (SHARED_STATE_GROUPS[f] for f in item.fixturenames if f in SHARED_STATE_GROUPS), None
        )
        if group is None and _has_fixture_beyond_a_test(item):
            group = item.nodeid.split("::", 1)[0]
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def _require_group_tags(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest-xdist hands a group out whole by the tag it appends to each marked test's id; a
    pytest that keeps the id elsewhere leaves it untagged and every group split across
    workers (shared state raced, module fixtures built once per worker): refuse to run so.
    (Said on the worker's stderr, which the run's own shares: xdist reports a worker's error
    in collection as its internal error alone.)"""
    untagged = [
        i.nodeid for i in items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid
    ]
    if not untagged:
        return
    reason = (
        f"pytest-xdist did not tag {len(untagged)} grouped tests with their group (pytest "
        f"{pytest.__version__}; first: {untagged[0]}): install the versions the test extra in "
        "pyproject.toml names"
    )
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\nerror: {reason}", file=sys.stderr, flush=True)
    raise pytest.UsageError(reason)


def _has_fixture_beyond_a_test(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        defs[-1].scope in ("class", "module", "package")
        for defs in info.name2fixturedefs.values()
        if defs
    )


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    with test_server() as url:
        yield url


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDb]:
    """A private MariaDB server (Debian's mariadb-server binaries) for the session."""
    if not mariadb_available():
        pytest.skip("Debian's mariadb-server (mariadbd, mariadb-install-db) is not installed")
    with running_mariadb() as server:
        yield server


@pytest.fixture(scope="session")
def databases(pg_server: str) -> Iterator[DatabaseFactory]:
    factory = DatabaseFactory(pg_server)
    yield factory
    factory.close()


@pytest.fixture
def database_url(databases: DatabaseFactory) -> Iterator[str]:
    url = databases.create()
    yield url
    databases.drop(url)


@pytest.fixture
def store(database_url: str) -> Iterator[Storage]:
    with Storage(database_url, max_connections=8) as s:
        yield s


@pytest.fixture
def readonly(database_url: str) -> Iterator[ReadOnlyDatabase]:
    """The evidence providers' read-only pool over this test's database."""
    db = ReadOnlyDatabase(database_url, timeout_seconds=2)
    db.open()
    yield db
    db.close()


@pytest.fixture
def sql(database_url: str) -> Iterator[SQL]:
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        yield SQL(conn)


@pytest.fixture
def world(store: Storage) -> World:
    return World(
        store, ExecutionClient(store, owner="executor-1", lease_seconds=EXEC_LEASE_MS / 1000)
    )
