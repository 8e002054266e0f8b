"""How every command ends on a failure: one line on stderr and one exit code per failure class.

0 done; 1 a failure of its own kind (a run whose last cycle outlived the shutdown grace, a
migration PostgreSQL refused) or an unexpected error (its traceback is in the JSON log); 2
configuration or usage error; 3 database unreachable or schema not migrated; 4 a prune batch
hit its lock timeout; 5 the prune export could not be written; 6 a prune the database refused.
Every expected failure is one line, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn, TypeVar

import click
import msgspec
import structlog

from resolver.core.errors import (
    ConfigError,
    LockTimeout,
    ResolverError,
    RetentionRefused,
    SchemaNotReady,
    StorageUnavailable,
)
from resolver.retention.pruning import ExportFailed

F = TypeVar("F", bound=Callable[..., Any])
log = structlog.get_logger("resolver.cli")

EXIT_FAILED = 1
EXIT_CONFIG = 2  # click's own code for bad options, kept for refusals of the same kind
EXIT_STORAGE = 3
EXIT_LOCK_TIMEOUT = 4
EXIT_EXPORT = 5
EXIT_REFUSED = 6


class FailureClass(msgspec.Struct, frozen=True):
    kind: type[ResolverError]
    prefix: str
    code: int
    # The work committed before the failure stands, so running again is the way out.
    retryable: bool = False


# The first matching class wins: subclasses before the classes they refine.
FAILURE_CLASSES = (
    FailureClass(ConfigError, "configuration error", EXIT_CONFIG),
    FailureClass(LockTimeout, "prune stopped", EXIT_LOCK_TIMEOUT, retryable=True),
    FailureClass(StorageUnavailable, "database error", EXIT_STORAGE, retryable=True),
    FailureClass(SchemaNotReady, "database error", EXIT_STORAGE),
    FailureClass(ExportFailed, "export error", EXIT_EXPORT),
    FailureClass(RetentionRefused, "refused", EXIT_REFUSED),
    FailureClass(ResolverError, "error", EXIT_FAILED),
)


def fail(prefix: str, exc: BaseException, code: int, *, hint: str = "") -> NoReturn:
    # libpq messages span lines ("Is the server running…"): the answer is one line.
    click.echo(f"{prefix}: {' '.join(str(exc).split())}{hint}", err=True)
    sys.exit(code)


def failure_class(exc: ResolverError) -> FailureClass:
    return next(c for c in FAILURE_CLASSES if isinstance(exc, c.kind))


def exit_codes(*, retry_hint: str | None = None) -> Callable[[F], F]:
    """Known failures end with one line on stderr and their exit code, no traceback.

    `retry_hint` is added to a retryable failure's line: a command whose committed work
    stands (a prune's whole batches) says that running it again is safe.
    """

    def decorate(func: F) -> F:
        @wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except ResolverError as exc:
                known = failure_class(exc)
                hint = f"; {retry_hint}" if retry_hint and known.retryable else ""
                fail(known.prefix, exc, known.code, hint=hint)
            except click.ClickException:
                raise  # a usage error: click prints it and exits 2
            except Exception as exc:
                log.exception("unexpected_error", error=type(exc).__name__)
                fail("error", RuntimeError(f"unexpected {type(exc).__name__}; see the log"), 1)

        return wrapper  # type: ignore[return-value]

    return decorate
