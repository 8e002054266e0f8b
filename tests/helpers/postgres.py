"""Databases for tests: one migrated template, a fresh copy per test.

The server comes from `RESOLVER_TEST_DATABASE_URL` when set; else testcontainers when a
Docker engine answers; else a private cluster from the local PostgreSQL binaries.
"""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import Callable, Iterator
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


class DatabaseFactory:
    """Creates migrated databases by copying one template (fast: no per-test DDL)."""

    def __init__(self, server_url: str, prefix: str = "resolver_test") -> None:
        self._server_url = server_url
        self._prefix = f"{prefix}_{uuid.uuid4().hex[:8]}"
        self._template = f"{self._prefix}_tpl"
        self._created: list[str] = []
        self._admin(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self._template)))
        migrate.upgrade(with_database(server_url, self._template))

    def _admin(self, statement: sql.Composed) -> None:
        with psycopg.connect(self._server_url, autocommit=True) as conn:
            conn.execute(statement)

    def create(self) -> str:
        return self._new(self._template)

    def create_empty(self) -> str:
        """A database with nothing in it (no migration): template0 is PostgreSQL's pristine one."""
        return self._new("template0")

    def _new(self, template: str) -> str:
        name = f"{self._prefix}_{len(self._created)}"
        self._admin(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
        self._created.append(name)
        return with_database(self._server_url, name)

    def drop(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        self._admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def close(self) -> None:
        for name in [*self._created, self._template]:
            self._admin(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


DatabaseMaker = Callable[[], str]
