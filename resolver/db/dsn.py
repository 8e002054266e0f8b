"""Connection-string helpers shared by the runtime (psycopg) and migrations (SQLAlchemy)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def libpq_dsn(url: str) -> str:
    """Turn a SQLAlchemy-style URL into one libpq accepts (drop the `+driver` suffix)."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme == "postgres":
        scheme = "postgresql"
    return urlunsplit((scheme, *parts[1:]))


def sqlalchemy_url(url: str) -> str:
    """The same database as a SQLAlchemy URL on the psycopg 3 driver."""
    parts = urlsplit(libpq_dsn(url))
    return urlunsplit(("postgresql+psycopg", *parts[1:]))


def redact(url: str) -> str:
    """The URL without its password, safe for logs and error messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, *parts[2:]))
