"""Connections the platform owns, for code outside `db/` that must not import the driver:
the executor's mutation transaction (receipts are written in it) and the demo playing the
platform."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from resolver.db.connect import Profile, connect, pooler_from_env

# What an executor hands to `resolver.executor.write_receipt`: its own psycopg connection.
Connection = psycopg.Connection[Any]


@contextmanager
def connection(
    url: str, *, application_name: str, autocommit: bool = False
) -> Iterator[Connection]:
    """A connection made by the one builder; the pooler comes from RESOLVER_DATABASE_POOLER."""
    profile = Profile(application_name=application_name, pooler=pooler_from_env())
    with connect(url, profile, autocommit=autocommit) as conn:
        yield conn


@contextmanager
def transaction(url: str, *, application_name: str) -> Iterator[Connection]:
    """One connection and one transaction on it, committed when the block ends cleanly."""
    with connection(url, application_name=application_name) as conn, conn.transaction():
        yield conn


def require_open_transaction(conn: Connection, *, caller: str) -> None:
    # In autocommit mode outside a transaction block an insert would commit on its own,
    # and a receipt could then exist for a mutation that rolled back.
    if conn.autocommit and conn.info.transaction_status is TransactionStatus.IDLE:
        raise ValueError(
            f"{caller} needs the mutation's transaction: call it inside "
            "`with conn.transaction():` or on a connection with autocommit off"
        )
