"""Shared fixtures: a real PostgreSQL (never a mock), one fresh migrated database per test."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import dict_row

from resolver.db.readonly import ReadOnlyDatabase
from resolver.db.repository import PostgresStore
from resolver.executor.client import ExecutionClient
from resolver_test_support.postgres import DatabaseFactory, test_server
from tests.helpers.database import EXEC_LEASE_MS, SQL, World

# The provider contract kit, used the way a provider author would: as a pytest plugin.
pytest_plugins = ["resolver.evidence.contract"]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    with test_server() as url:
        yield url


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
def store(database_url: str) -> Iterator[PostgresStore]:
    with PostgresStore(database_url, max_connections=8) as s:
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
def world(store: PostgresStore) -> World:
    return World(
        store, ExecutionClient(store, owner="executor-1", lease_seconds=EXEC_LEASE_MS / 1000)
    )
