"""The executor's statements run in the caller's own transaction (the mutation's): the
receipt's identity and write, and the completion that may commit with them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from resolver.core.domain import Completion, ExecutionLease
from resolver.db.protocol import protocol_error
from resolver.db.statements import statement
from resolver.db.store.handle import Row
from resolver.db.store.rows import completion_params, fence


def receipt_identity(conn: psycopg.Connection[Any], lease: ExecutionLease) -> Row:
    """The identity a receipt must carry, with the database clock (`db_now_ms`); the
    execution stays locked FOR SHARE under the lease until the caller's transaction ends."""
    return _call_in(conn, "receipt_identity", fence(lease, now_ms=None))


def receipt_write(
    conn: psycopg.Connection[Any], lease: ExecutionLease, receipt: Mapping[str, Any]
) -> Row:
    """Insert a signed receipt v1 in the caller's transaction, fenced on the lease; the row
    names the transaction (`xact_id`), by which a lost COMMIT reply is judged."""
    return _call_in(conn, "receipt_write", fence(lease, receipt=Jsonb(dict(receipt))))


def receipt_write_complete(
    conn: psycopg.Connection[Any],
    lease: ExecutionLease,
    receipt: Mapping[str, Any],
    completion: Completion,
) -> Row:
    """`receipt_write` and the completion (fenced on the same lease, with the receipt's
    digest) in one statement of the caller's transaction: the terminal state commits with the
    mutation and its receipt, or nothing does. The row names the transaction (`xact_id`) and
    what the completion did (`result`: `committed`, or `replayed` for an exact replay)."""
    params = completion_params(lease, completion, None)
    return _call_in(conn, "receipt_write_complete", {**params, "receipt": Jsonb(dict(receipt))})


def _call_in(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> Row:
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(statement(name), params).fetchone()
    except psycopg.DatabaseError as exc:
        refused = protocol_error(exc)
        if refused is None:
            raise
        raise refused from exc
    assert row is not None  # the protocol functions answer one row or raise
    return row
