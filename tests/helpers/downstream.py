"""A downstream service's own database, on real PostgreSQL and real MariaDB: its idempotency
records table, the service's writer login and the resolver's SELECT-only reader.

What the service does with a request is played here by its writer login (the service's own
write of its own record), so tests decide exactly what the record says when an executor dies.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql as pgsql
from psycopg.rows import dict_row

from tests.helpers.mariadb import MariaDb

TABLE = "idempotency_records"
QUERY = (
    f"SELECT status, result_code, binding FROM {TABLE} WHERE idempotency_key = %(idempotency_key)s"
)
STATUSES = {"succeeded": ["completed"], "failed": ["declined"], "still_running": ["processing"]}
PASSWORD = "reader-pw-1"


class ServiceDatabase(Protocol):
    dialect: str

    def reader_url(self) -> str: ...

    def dead_url(self) -> str: ...

    def record(
        self, key: str, binding: str | None, status: str, result_code: str | None = None
    ) -> None: ...

    def update(self, key: str, status: str, result_code: str | None) -> None: ...

    def rows(self) -> list[dict[str, Any]]: ...

    def as_reader(self, statement: str) -> None: ...

    def close(self) -> None: ...


def settings(service: ServiceDatabase, env: str, **more: Any) -> dict[str, Any]:
    """The provider's settings for `service`, its reader URL in the variable `env`."""
    return {
        "provider": "idempotency_record",
        "dialect": service.dialect,
        "database_url_env": env,
        "query": QUERY,
        "statuses": STATUSES,
        "timeout_seconds": 5,
        **more,
    }


@dataclass
class PostgresService:
    """The records table in a test database of its own; a reader role per instance."""

    admin_url: str
    dialect: str = "postgresql"
    role: str = field(default_factory=lambda: f"svc_reader_{uuid.uuid4().hex[:10]}")

    def __post_init__(self) -> None:
        self.conn = psycopg.connect(self.admin_url, autocommit=True, row_factory=dict_row)
        self.conn.execute(
            f"CREATE TABLE {TABLE} (idempotency_key text PRIMARY KEY, binding text,"
            " status text NOT NULL, result_code text, response text,"
            " created_at timestamptz NOT NULL DEFAULT now())"
        )
        role = pgsql.Identifier(self.role)
        self.conn.execute(
            pgsql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, pgsql.Literal(PASSWORD))
        )
        database = pgsql.Identifier(urlsplit(self.admin_url).path.lstrip("/"))
        self.conn.execute(pgsql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, role))
        self.conn.execute(
            pgsql.SQL("GRANT SELECT ON {} TO {}").format(pgsql.Identifier(TABLE), role)
        )

    def reader_url(self) -> str:
        parts = urlsplit(self.admin_url)
        netloc = f"{self.role}:{PASSWORD}@{parts.hostname}:{parts.port or 5432}"
        return urlunsplit(parts._replace(netloc=netloc))

    def dead_url(self) -> str:
        return f"postgresql://{self.role}@127.0.0.1:1/nowhere"

    def record(
        self, key: str, binding: str | None, status: str, result_code: str | None = None
    ) -> None:
        self.conn.execute(
            f"INSERT INTO {TABLE} (idempotency_key, binding, status, result_code, response)"
            " VALUES (%s, %s, %s, %s, 'the service response')",
            (key, binding, status, result_code),
        )

    def update(self, key: str, status: str, result_code: str | None) -> None:
        self.conn.execute(
            f"UPDATE {TABLE} SET status = %s, result_code = %s WHERE idempotency_key = %s",
            (status, result_code, key),
        )

    def rows(self) -> list[dict[str, Any]]:
        return self.conn.execute(
            f"SELECT xmin::text AS xmin, t::text AS row FROM {TABLE} AS t ORDER BY 2"
        ).fetchall()

    def as_reader(self, statement: str) -> None:
        with psycopg.connect(self.reader_url(), autocommit=True) as reader:
            reader.execute(statement)  # type: ignore[arg-type]

    def close(self) -> None:
        self.conn.execute(f"DROP TABLE {TABLE}")
        role = pgsql.Identifier(self.role)
        database = pgsql.Identifier(urlsplit(self.admin_url).path.lstrip("/"))
        self.conn.execute(pgsql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(database, role))
        self.conn.execute(pgsql.SQL("DROP ROLE {}").format(role))
        self.conn.close()


@dataclass
class MariaDbService:
    """The records table in a MariaDB database of its own; a SELECT-only reader user."""

    server: MariaDb
    dialect: str = "mariadb"
    name: str = field(default_factory=lambda: f"svc_{uuid.uuid4().hex[:10]}")

    def __post_init__(self) -> None:
        self.reader = f"rd_{self.name[4:]}"
        self.server.execute(f"CREATE DATABASE {self.name}")
        self.server.execute(
            f"CREATE TABLE {self.name}.{TABLE} (idempotency_key varchar(128) PRIMARY KEY,"
            " binding text, status varchar(32) NOT NULL, result_code varchar(64), response text,"
            " created_at timestamp(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))"
        )
        self.server.execute(f"CREATE USER '{self.reader}'@'%' IDENTIFIED BY '{PASSWORD}'")
        self.server.execute(f"GRANT SELECT ON {self.name}.{TABLE} TO '{self.reader}'@'%'")

    def reader_url(self) -> str:
        return self.server.url(self.reader, PASSWORD, self.name)

    def dead_url(self) -> str:
        return f"mysql://{self.reader}@127.0.0.1:1/{self.name}"

    def record(
        self, key: str, binding: str | None, status: str, result_code: str | None = None
    ) -> None:
        self.server.execute(
            f"INSERT INTO {self.name}.{TABLE} (idempotency_key, binding, status, result_code,"
            " response) VALUES (%s, %s, %s, %s, 'the service response')",
            (key, binding, status, result_code),
        )

    def update(self, key: str, status: str, result_code: str | None) -> None:
        self.server.execute(
            f"UPDATE {self.name}.{TABLE} SET status = %s, result_code = %s"
            " WHERE idempotency_key = %s",
            (status, result_code, key),
        )

    def rows(self) -> list[dict[str, Any]]:
        return self.server.execute(f"SELECT * FROM {self.name}.{TABLE} ORDER BY idempotency_key")

    def as_reader(self, statement: str) -> None:
        conn = self.server.connect(self.reader, PASSWORD, self.name)
        try:
            with conn.cursor() as cursor:
                cursor.execute(statement)
        finally:
            conn.close()

    def reader_statements(self) -> list[str]:
        return self.server.statements_by(self.reader)

    def close(self) -> None:
        self.server.execute(f"DROP USER '{self.reader}'@'%'")
        self.server.execute(f"DROP DATABASE {self.name}")
