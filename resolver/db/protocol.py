"""The SQLSTATEs of the database's own refusals (the executor protocol's, and a person's acts')
and the typed errors they become."""

from __future__ import annotations

from typing import Final

import psycopg

from resolver.core.errors import (
    ActRefused,
    ConstraintViolation,
    FactConsumed,
    FenceConflict,
    InvalidDispatch,
    LeaseLost,
    NotFound,
    NotLeasable,
    ResolverError,
)

FENCE_CONFLICT: Final = "RS001"
LEASE_LOST: Final = "RS002"
NOT_LEASABLE: Final = "RS003"
NOT_FOUND: Final = "RS004"
INVALID_INPUT: Final = "RS005"
STATE_MACHINE: Final = "RS006"
FACT_CONSUMED: Final = "RS007"
ACT_REFUSED: Final = "RS008"

_ERRORS: Final[dict[str, type[ResolverError]]] = {
    FENCE_CONFLICT: FenceConflict,
    LEASE_LOST: LeaseLost,
    NOT_LEASABLE: NotLeasable,
    NOT_FOUND: NotFound,
    INVALID_INPUT: InvalidDispatch,
    FACT_CONSUMED: FactConsumed,
    ACT_REFUSED: ActRefused,
}


def protocol_error(exc: psycopg.Error) -> ResolverError | None:
    """The typed error for a protocol refusal, or None for any other database error.

    Decided by SQLSTATE alone, never by message text; the message (which fence did not hold)
    is the database's.
    """
    message = exc.diag.message_primary or str(exc)
    if exc.sqlstate == STATE_MACHINE:
        return ConstraintViolation(message, "state_machine")
    error = _ERRORS.get(exc.sqlstate or "")
    return None if error is None else error(message)
