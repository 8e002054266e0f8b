"""A read-only MariaDB / MySQL source for SQL evidence providers (the `mysql` extra, PyMySQL).

Each read is one `START TRANSACTION READ ONLY`, in a session whose default is read only too
(`SET SESSION TRANSACTION READ ONLY`): the server refuses any write the statement attempts.
Like the PostgreSQL source, that stops accidents, not intent; the login's own grants (SELECT
only) are what make writing impossible (docs/providers.md).

Every wait is bounded by `timeout_seconds`: connect, read and write timeouts of the socket,
and `max_statement_time` on the server. Failures are typed as for PostgreSQL: no answer (a
refused, reset or timed-out connection, a server going away) is `StorageUnavailable`; a refusal
the server will give again (a missing grant, a wrong password, an unknown table or column, a
query error) is `SourceMisconfigured` with the cause `mysql_<error number>`.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from resolver.core.declarations import Reason
from resolver.core.errors import ConfigError, SourceMisconfigured, StorageUnavailable

Row = dict[str, Any]

__all__ = ["MARIADB_SOURCE_REASONS", "ReadOnlyMariaDatabase"]

# Client-side error numbers: the connection could not be made, was lost, or timed out.
_UNREACHABLE = frozenset({2002, 2003, 2005, 2006, 2013, 2055})
# Server errors a retry can cure: lock wait, deadlock, too many connections, statement
# interrupted by max_statement_time, server shutting down.
_TRANSIENT = frozenset({1205, 1213, 1040, 1969, 1053, 1317})
MARIADB_SOURCE_REASONS = (
    Reason("mysql_1142", "the evidence source refused the read (no SELECT grant on the table)"),
    Reason("mysql_1044", "the evidence source refused the login access to the database"),
    Reason("mysql_1045", "the evidence source refused the login"),
    Reason("mysql_1146", "the evidence table does not exist"),
    Reason("mysql_1054", "the configured query names a column the table does not have"),
)


class ReadOnlyMariaDatabase:
    """One connection, opened on first use and again after a failure, every read READ ONLY.

    `database_url`: `mysql://user[:password]@host[:port]/database` (or `mariadb://`)."""

    def __init__(self, database_url: str, *, timeout_seconds: float = 5.0) -> None:
        self._url = redact(database_url)
        self._params = _connect_params(database_url, timeout_seconds)
        self._timeout_seconds = timeout_seconds
        self._driver: Any = importlib.import_module("pymysql")  # untyped; the `mysql` extra
        self._lock = threading.Lock()
        self._conn: Any = None

    def open(self) -> None:
        """Nothing to do: a dead source must not block start-up; a read reports it."""

    def close(self) -> None:
        with self._lock:
            self._drop()

    def fetch(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        """The configured query's rows, in one READ ONLY transaction."""
        with self._lock:
            try:
                conn = self._connection()
                with conn.cursor() as cursor:
                    cursor.execute("START TRANSACTION READ ONLY")
                    try:
                        cursor.execute(query, dict(params))
                        rows = [dict(row) for row in cursor.fetchall()]
                    finally:
                        cursor.execute("ROLLBACK")
                return rows
            except self._driver.MySQLError as exc:
                self._drop()
                raise self._typed(exc) from exc

    def _connection(self) -> Any:
        if self._conn is None:
            conn = self._driver.connect(**self._params)
            with conn.cursor() as cursor:
                cursor.execute("SET SESSION TRANSACTION READ ONLY")
                # The server stops a statement at the timeout too (seconds, fractional).
                cursor.execute(f"SET SESSION max_statement_time = {self._timeout_seconds:.3f}")
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            # A connection already gone closes as it is.
            with contextlib.suppress(Exception):
                conn.close()

    def _typed(self, exc: BaseException) -> StorageUnavailable | SourceMisconfigured:
        number = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        name = type(exc).__name__
        if number is None or number in _UNREACHABLE or number in _TRANSIENT:
            return StorageUnavailable(f"evidence source {self._url} failed: {name}")
        # The server's message may quote the query or a user name: only the number travels.
        return SourceMisconfigured(
            f"evidence source {self._url} refused the query: {name} ({number})",
            cause=f"mysql_{number}",
        )


def redact(database_url: str) -> str:
    """The URL without its password, safe for logs and error messages."""
    parts = urlsplit(database_url)
    if not parts.hostname:
        return "<invalid MariaDB URL>"
    user = f"{unquote(parts.username)}@" if parts.username else ""
    return f"{parts.scheme}://{user}{parts.hostname}:{parts.port or 3306}{parts.path}"


def _connect_params(database_url: str, timeout_seconds: float) -> dict[str, Any]:
    parts = urlsplit(database_url)
    if parts.scheme not in ("mysql", "mariadb") or not parts.hostname:
        raise ConfigError(
            f"{redact(database_url)}: a MariaDB URL is mysql://user@host:port/database"
        )
    database = parts.path.lstrip("/")
    if not database:
        raise ConfigError(f"{redact(database_url)}: name the database in the URL's path")
    timeout = max(1, int(timeout_seconds + 0.999))
    return {
        "host": parts.hostname,
        "port": parts.port or 3306,
        "user": unquote(parts.username or ""),
        "password": unquote(parts.password or ""),
        "database": unquote(database),
        "connect_timeout": timeout,
        "read_timeout": timeout,
        "write_timeout": timeout,
        "autocommit": True,
        "charset": "utf8mb4",
        "cursorclass": importlib.import_module("pymysql.cursors").DictCursor,
    }
