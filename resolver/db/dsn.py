"""Connection strings: parsed, checked and redacted with libpq's own rules (psycopg's
conninfo tools), in every form libpq accepts: URL, key=value, `?password=` in a URL."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from resolver.core.errors import ConfigError

if TYPE_CHECKING:
    # Imported where used: `resolver run` never loads SQLAlchemy (start-up time).
    import sqlalchemy as sa

SCHEMES = ("postgresql", "postgres")
SECRET_KEYS = frozenset({"password", "sslpassword"})
EXAMPLE = "postgresql://resolver@db:5432/app (or key=value: host=db dbname=app user=resolver)"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def parse(dsn: str) -> dict[str, str]:
    """The libpq parameters of `dsn`, or a ConfigError that never quotes the string (it may
    hold a password). A SQLAlchemy `+driver` suffix is accepted and dropped."""
    text = dsn.strip()
    match = _SCHEME.match(text)
    if match is not None:
        scheme = match.group(1)
        if scheme.split("+", 1)[0].lower() not in SCHEMES:
            raise ConfigError(
                f"{scheme}:// is not a PostgreSQL connection string; the resolver stores its "
                f"state in PostgreSQL only: use {EXAMPLE}"
            )
        text = "postgresql" + text[len(scheme) :]
    if not text:
        raise ConfigError(f"the connection string is empty; use {EXAMPLE}")
    try:
        params = {k: str(v) for k, v in conninfo_to_dict(text).items()}
    except psycopg.ProgrammingError:
        # libpq's message quotes the string: it is not repeated.
        raise ConfigError(
            f"not a PostgreSQL URL or key=value connection string; use {EXAMPLE}"
        ) from None
    _check_ports(params.get("port"))
    return params


def _check_ports(port: str | None) -> None:
    for part in (port or "").split(","):
        if part and not (part.isdigit() and 1 <= int(part) <= 65535):
            raise ConfigError(f"port {part!r} is not a TCP port (1-65535); use {EXAMPLE}")


def libpq_dsn(dsn: str) -> str:
    """The same database as a key=value string psycopg connects with."""
    return make_conninfo("", **parse(dsn))


def sqlalchemy_url(dsn: str) -> sa.engine.URL:
    """The same database as a SQLAlchemy URL on the psycopg 3 driver. Host and port travel
    as query parameters, so several hosts and socket directories survive the translation."""
    import sqlalchemy as sa

    params = parse(dsn)
    user, password, dbname = (
        params.pop("user", None),
        params.pop("password", None),
        params.pop("dbname", None),
    )
    return sa.engine.URL.create(
        "postgresql+psycopg", username=user, password=password, database=dbname, query=params
    )


def redact(dsn: str) -> str:
    """`dsn` without its secrets, safe for logs and error messages."""
    try:
        params = parse(dsn)
    except ConfigError:
        return "<invalid connection string>"
    return make_conninfo("", **{k: "***" if k in SECRET_KEYS else v for k, v in params.items()})
