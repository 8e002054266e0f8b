"""The one translation of driver errors into the typed errors of `resolver.core.errors`.

Decided by exception class, which psycopg derives from the SQLSTATE, never by message text.
"""

from __future__ import annotations

import psycopg
import psycopg_pool

from resolver.core.errors import (
    ConstraintViolation,
    LockTimeout,
    MigrationFailed,
    ResolverError,
    RetentionRefused,
    SourceMisconfigured,
    StatementTimeout,
    StorageUnavailable,
)
from resolver.db.protocol import protocol_error

_UNREACHABLE = (psycopg.OperationalError, psycopg.InterfaceError, psycopg_pool.PoolTimeout)


def unavailable(url: str, exc: BaseException) -> StorageUnavailable:
    """PostgreSQL could not be reached, or the connection broke; `url` is already redacted."""
    return StorageUnavailable(f"PostgreSQL at {url} is unavailable: {exc}")


def unreachable(url: str, exc: BaseException) -> StorageUnavailable:
    """A command's one connection (migrate, status) could not be made or broke."""
    return StorageUnavailable(f"cannot reach {url}: {exc}")


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


# SQLSTATEs the prune functions raise for a request they refuse (nothing was deleted).
_PRUNE_REFUSALS = frozenset({"22023", "P0002"})


def retention_error(exc: BaseException, url: str) -> ResolverError | None:
    """The typed error for a failure of `resolver prune`'s session, or None (re-raise).

    A cancelled statement stays StorageUnavailable: a prune run is retried as a whole.
    """
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return RetentionRefused(
            f"this role may not prune: {exc.diag.message_primary}; connect as the "
            "retention role (deploy/sql/roles.sql)"
        )
    if isinstance(exc, psycopg.errors.UndefinedFunction):
        return RetentionRefused("the prune functions are missing: run `resolver migrate` first")
    if isinstance(exc, psycopg.Error) and exc.sqlstate in _PRUNE_REFUSALS:
        return RetentionRefused(str(exc.diag.message_primary))
    if isinstance(exc, _UNREACHABLE):
        return storage_error(exc, url, statement_timeout_typed=False)
    return None


def migration_error(step: str, url: str, exc: BaseException | None) -> ResolverError:
    """The typed error for a failed `resolver migrate` step (nothing was changed: one
    transaction); `url` is already redacted."""
    if isinstance(exc, _UNREACHABLE):
        return unreachable(url, exc)
    return MigrationFailed(f"{step}: PostgreSQL refused it, nothing was changed: {first_line(exc)}")


def first_line(exc: BaseException | None) -> str:
    # psycopg's message carries the server's DETAIL/HINT lines; the first says what failed.
    return str(exc).splitlines()[0] if exc is not None and str(exc) else "unknown error"


# SQLSTATE classes of failures that heal by themselves: connection exceptions (08),
# transaction rollbacks such as serialization failures (40), insufficient resources (53),
# lock or object state (55), operator intervention: admin or crash shutdown, cannot connect
# now, statement timeout (57), system errors (58) and internal errors (XX).
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "55", "57", "58", "XX"})


def is_transient(exc: Exception) -> bool:
    """Transient by SQLSTATE class, never by message text.

    An error the server answered with any other class (42 syntax or access rule, such as a
    missing GRANT or an undefined table; 3D/3F missing database or schema; 22 data; 25 a
    write refused in a read-only transaction; ...) fails the same way on every retry: a
    configuration error. Without a SQLSTATE (a refused or reset connection, a pool timeout,
    a failed connection attempt, for which libpq reports no code) the source is unreachable,
    which is an outage.
    """
    sqlstate = getattr(exc, "sqlstate", None)
    return sqlstate is None or sqlstate[:2] in TRANSIENT_SQLSTATE_CLASSES


def source_error(url: str, exc: Exception) -> StorageUnavailable | SourceMisconfigured:
    """The typed error for a failure of a read-only evidence source: an outage or a
    configuration error, see `is_transient`."""
    # Nothing moved either way: providers only read. The message names the class, not the
    # server's text, which may quote the query or a role name.
    if is_transient(exc):
        return StorageUnavailable(f"evidence source {url} failed: {type(exc).__name__}")
    sqlstate = getattr(exc, "sqlstate", None)
    return SourceMisconfigured(
        f"evidence source {url} refused the query: {type(exc).__name__} (SQLSTATE {sqlstate})",
        cause=f"sqlstate_{sqlstate.lower()}" if sqlstate else None,
    )
