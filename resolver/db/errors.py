"""The one translation of driver errors into the typed errors of `resolver.core.errors`.

Decided by exception class, which psycopg derives from the SQLSTATE, never by message text.
"""

from __future__ import annotations

import psycopg
import psycopg_pool

from resolver.core.errors import (
    ConstraintViolation,
    LockTimeout,
    ResolverError,
    StatementTimeout,
    StorageUnavailable,
)
from resolver.db.protocol import protocol_error

_UNREACHABLE = (psycopg.OperationalError, psycopg.InterfaceError, psycopg_pool.PoolTimeout)


def unavailable(url: str, exc: BaseException) -> StorageUnavailable:
    """PostgreSQL could not be reached, or the connection broke; `url` is already redacted."""
    return StorageUnavailable(f"PostgreSQL at {url} is unavailable: {exc}")


def storage_error(
    exc: BaseException, url: str, *, statement_timeout_typed: bool = True
) -> ResolverError | None:
    """The typed error for a failure of the resolver's own database, or None if the caller
    has no rule for it (the caller then re-raises or applies its own refusals).

    `statement_timeout_typed=False` keeps a cancelled statement (SQLSTATE 57014) a plain
    StorageUnavailable, as `resolver prune` reports it: a prune batch is retried as a whole.
    """
    # The order matters: lock and cancel errors are OperationalErrors in psycopg's hierarchy.
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return LockTimeout(f"a row is locked by another transaction: {exc}")
    if statement_timeout_typed and isinstance(exc, psycopg.errors.QueryCanceled):
        return StatementTimeout(f"the statement was cancelled: {exc}")
    # Serialization failures and deadlocks (class 40) are OperationalErrors too: transient.
    if isinstance(
        exc, psycopg.OperationalError | psycopg.InterfaceError | psycopg_pool.PoolTimeout
    ):
        return unavailable(url, exc)
    if isinstance(exc, psycopg.IntegrityError):
        constraint = exc.diag.constraint_name
        return ConstraintViolation(
            f"constraint {constraint or exc.sqlstate} rejected the write", constraint
        )
    if isinstance(exc, psycopg.DatabaseError):
        # The executor protocol's own refusals (SQLSTATE class RS) become typed errors.
        return protocol_error(exc)
    return None
