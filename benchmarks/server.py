"""The PostgreSQL the benchmark measures: a private cluster by default, or a given server."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from resolver.db import migrate
from resolver.demo import localpg

# Settings of the private cluster. pg_stat_statements counts statements per resolution.
PRIVATE_SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "shared_buffers": "256MB",
    "max_wal_size": "2GB",
    "checkpoint_timeout": "15min",
}
# Settings of the preloaded library, known to the server only once it is loaded: planning
# time per statement too, for where the server's time goes (each drain's lines).
LOADED_SETTINGS = {"pg_stat_statements.track_planning": "on"}


@dataclass(frozen=True, slots=True)
class Server:
    """A server the benchmark may create databases on, and what it knows about it."""

    url: str
    private: bool
    version: str
    has_pg_stat_statements: bool

    def database(self, name: str) -> str:
        parts = urlsplit(self.url)
        return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@contextlib.contextmanager
def open_server(
    url: str | None,
    *,
    durable: bool,
    data_dir: Path | None = None,
    settings: dict[str, str] | None = None,
    loaded_settings: dict[str, str] | None = None,
) -> Iterator[Server]:
    """A private cluster started from the local binaries unless a URL is given; `settings`
    are added to the private cluster's own before its restart, `loaded_settings` (those of a
    preloaded library) after it (a given server keeps its)."""
    if url:
        yield describe(url, private=False)
        return
    created = data_dir is None
    # An explicit directory: localpg deletes the temporary ones it makes itself on stop, and
    # this cluster is stopped once to be restarted with its preload settings.
    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="resolver-bench-"))
    cluster = localpg.start(data_dir, durable=durable)
    try:
        _alter_system(cluster.url, {**PRIVATE_SETTINGS, **(settings or {})})
        cluster.stop()
        # Same data directory, new port: the preload library needs a restart.
        cluster = localpg.start(cluster.data_dir, durable=durable)
        _alter_system(cluster.url, {**LOADED_SETTINGS, **(loaded_settings or {})})
        yield describe(cluster.url, private=True)
    finally:
        cluster.stop()
        if created:  # a throwaway cluster: a run leaves no gigabyte behind in /tmp
            shutil.rmtree(cluster.data_dir, ignore_errors=True)


def _alter_system(url: str, settings: dict[str, str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for name, value in settings.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
        conn.execute("SELECT pg_reload_conf()")


def describe(url: str, *, private: bool) -> Server:
    """What the server at `url` is and has (a cluster started another way included)."""
    with psycopg.connect(url, autocommit=True) as conn:
        version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        row = conn.execute(
            "SELECT count(*) FROM pg_settings WHERE name = 'shared_preload_libraries'"
            " AND setting LIKE '%pg_stat_statements%'"
        ).fetchone()
    return Server(url, private, version, bool(row and row[0]))


class Databases:
    """Databases created for one run; names are unique so a shared server is never disturbed."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._prefix = f"bench_{uuid.uuid4().hex[:8]}"
        self._created: list[str] = []

    def create(self, role: str, *, migrated: bool, extensions: tuple[str, ...] = ()) -> str:
        name = f"{self._prefix}_{role}"
        with psycopg.connect(self._server.url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self._created.append(name)
        url = self._server.database(name)
        with psycopg.connect(url, autocommit=True) as conn:
            for extension in extensions:
                conn.execute(
                    sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(extension))
                )
        if migrated:
            migrate.upgrade(url)
        return url

    def adopt(self, name: str) -> None:
        """A database made here another way (a template's copy): dropped with the others."""
        self._created.append(name)

    def drop(self, url: str) -> None:
        name = url.rsplit("/", 1)[-1]
        with psycopg.connect(self._server.url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        if name in self._created:
            self._created.remove(name)

    def close(self) -> None:
        for name in list(self._created):
            self.drop(self._server.database(name))
