"""Databases for tests: one migrated template, a fresh copy per test.

The server comes from `RESOLVER_TEST_DATABASE_URL` when set; else testcontainers when a
Docker engine answers; else a private cluster from the local PostgreSQL binaries.
"""

from __future__ import annotations

import importlib
import itertools
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from resolver.db import migrate
from resolver.demo import localpg


@contextmanager
def test_server() -> Iterator[str]:
    """Yields a URL of a maintenance database on a server the tests may create databases on."""
    url = os.environ.get("RESOLVER_TEST_DATABASE_URL")
    if url:
        yield url
        return
    container = _docker_postgres()
    if container is not None:
        with container as running:
            yield running
        return
    cluster = localpg.start(durable=False)
    try:
        yield cluster.url
    finally:
        cluster.stop()


def _docker_postgres() -> _ContainerURL | None:
    """testcontainers' PostgreSQL, only when the package is installed and an engine answers."""
    try:
        docker = importlib.import_module("docker")
        containers = importlib.import_module("testcontainers.postgres")
        docker.from_env().ping()
    except Exception:
        return None
    return _ContainerURL(containers.PostgresContainer("postgres:16-alpine", driver=None))


class _ContainerURL:
    def __init__(self, container: Any) -> None:
        self._container = container

    def __enter__(self) -> str:
        self._container.start()
        return str(self._container.get_connection_url())

    def __exit__(self, *exc: object) -> None:
        self._container.stop()


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


_DROPPERS = 8  # drops in flight at once per worker, each on its own connection


class DatabaseFactory:
    """Creates migrated databases by copying one template (fast: no per-test DDL).

    Both ends of a database's life run beside the tests instead of inside them. PostgreSQL
    forces a checkpoint for every DROP DATABASE (it must forget the dropped files' pending
    fsyncs), a second or more on a busy server: a dropped database is handed to background
    threads, which drop while the next tests run; drops that wait at the same time share one
    checkpoint (four at once took 1.4 s where four in a row took 13 s). And the next copy of the
    template is made in the background while the current test runs, so `create()` mostly
    finds one ready. Nothing a test sees changes: each still gets a fresh copy of its own,
    made before it starts, under a name no other test has; `close()` waits for both threads
    and drops everything left, the template last.
    """

    def __init__(self, server_url: str, prefix: str = "resolver_test") -> None:
        self._server_url = server_url
        self._prefix = f"{prefix}_{uuid.uuid4().hex[:8]}"
        self._template = f"{self._prefix}_tpl"
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._created: list[str] = []
        self._maker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="db-maker")
        self._dropper = ThreadPoolExecutor(max_workers=_DROPPERS, thread_name_prefix="db-dropper")
        self._drops: list[Future[None]] = []
        self._admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self._template)))
        migrate.upgrade(with_database(server_url, self._template))
        self._next: Future[str] = self._maker.submit(self._new, self._template)

    def _admin(self, statement: sql.Composed) -> None:
        with psycopg.connect(self._server_url, autocommit=True) as conn:
            conn.execute(statement)

    def create(self) -> str:
        """A fresh migrated database: the copy made in the background, and the next one begun."""
        ready, self._next = self._next, self._maker.submit(self._new, self._template)
        return with_database(self._server_url, ready.result())

    def create_empty(self) -> str:
        """A database with nothing in it (no migration): template0 is PostgreSQL's pristine one."""
        return with_database(self._server_url, self._new("template0"))

    def _new(self, template: str) -> str:
        name = f"{self._prefix}_{next(self._numbers)}"
        with self._lock:
            self._created.append(name)
        self._admin(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
        return name

    def drop(self, url: str) -> None:
        """Drops the database in the background; its connections are ended (FORCE)."""
        name = urlsplit(url).path.lstrip("/")
        self._drops.append(self._dropper.submit(self._drop, name))

    def _drop(self, name: str) -> None:
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        with self._lock:
            if name in self._created:
                self._created.remove(name)

    def close(self) -> None:
        self._maker.shutdown(wait=True)
        self._dropper.shutdown(wait=True)
        failed = [f.exception() for f in self._drops if f.exception() is not None]
        with self._lock:
            left = list(self._created)
        for name in [*left, self._template]:
            self._drop(name)
        assert not failed, failed


DatabaseMaker = Callable[[], str]
