"""Set-based seeding: due controls, settled history, live executions and signed receipts."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from benchmarks import sql
from resolver.core.domain import DispatchIdentity, Outcome, canonical_json
from resolver.evidence.receipts import KeyRing, sign_receipt

BATCH = 200_000


# A fixed benchmark key: replicas get it as RESOLVER_RECEIPT_KEYS, the seeder signs with it.
BENCH_KEYS = KeyRing(
    {"bench-1": hashlib.sha256(b"benchmark receipt key").digest()}, signing_kid="bench-1"
)


def keys_env(keys: KeyRing) -> dict[str, str]:
    """The environment a replica verifies these keys from."""
    return {
        "RESOLVER_RECEIPT_KEYS": ",".join(f"{k}={v.hex()}" for k, v in keys.keys.items()),
        "RESOLVER_RECEIPT_SIGNING_KID": keys.current_kid,
    }


def db_now_ms(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(sql.DB_NOW_MS).fetchone()
    assert row is not None
    return int(row[0] if isinstance(row, tuple) else row["now_ms"])


def _in_batches(
    conn: psycopg.Connection[Any], statement: Any, count: int, first: int, **params: Any
) -> None:
    start = first
    while start < first + count:
        last = min(first + count, start + BATCH) - 1
        with conn.transaction():
            conn.execute(sql.IMPORT_HISTORY)
            conn.execute(statement, {"first": start, "last": last, **params})
        start = last + 1


def seed_due(
    conn: psycopg.Connection[Any], count: int, *, action_type: str, prefix: str, due_ms: int
) -> None:
    """`count` executions that crossed the barrier and whose lease expired at `due_ms`."""
    _in_batches(
        conn,
        sql.SEED_ARMED,
        count,
        1,
        prefix=prefix,
        action_type=action_type,
        lease_expires_at_ms=due_ms,
        started_at_ms=due_ms - 30_000,
    )


def seed_closed(
    conn: psycopg.Connection[Any], count: int, *, first: int, prefix: str, now_ms: int
) -> None:
    """Settled dispatches: terminal executions, resolved controls, half with a resolution."""
    _in_batches(
        conn,
        sql.SEED_CLOSED,
        count,
        first,
        prefix=prefix,
        action_type="bench.closed",
        now_ms=now_ms,
    )


def seed_manual(conn: psycopg.Connection[Any], count: int, *, prefix: str, now_ms: int) -> None:
    """The manual queue: recovery_required executions whose controls wait for a human."""
    _in_batches(
        conn,
        sql.SEED_MANUAL,
        count,
        1,
        prefix=prefix,
        action_type="bench.manual",
        lease_expires_at_ms=now_ms - 3_600_000,
        started_at_ms=now_ms - 3_630_000,
    )


def seed_waiting(conn: psycopg.Connection[Any], count: int, *, prefix: str, now_ms: int) -> None:
    """The waiting list: expired leases whose controls were inspected once and re-armed."""
    _in_batches(
        conn,
        sql.SEED_WAITING,
        count,
        1,
        prefix=prefix,
        action_type="bench.waiting",
        now_ms=now_ms,
        lease_expires_at_ms=now_ms - 1_800_000,
        started_at_ms=now_ms - 1_830_000,
    )


def seed_proposals(conn: psycopg.Connection[Any], count: int, *, prefix: str, now_ms: int) -> None:
    """Open two-person proposals on the first `count` manual cases seeded under `prefix`."""
    _in_batches(conn, sql.SEED_PROPOSALS, count, 1, prefix=prefix, now_ms=now_ms)


def seed_late_window(
    conn: psycopg.Connection[Any],
    count: int,
    *,
    prefix: str,
    action_type: str,
    now_ms: int,
    window_ms: int,
) -> None:
    """A full late-evidence window: `count` dispatches settled by a human inside the last
    `window_ms`, each with the open watch its resolution's trigger opened."""
    _in_batches(
        conn,
        sql.SEED_LATE,
        count,
        1,
        prefix=prefix,
        action_type=action_type,
        now_ms=now_ms,
        window_ms=window_ms,
        total=max(1, count),
    )


def seed_live(conn: psycopg.Connection[Any], count: int, *, prefix: str, now_ms: int) -> None:
    """Executions still running under a live lease: armed, never claimable."""
    _in_batches(
        conn,
        sql.SEED_ARMED,
        count,
        1,
        prefix=prefix,
        action_type="bench.live",
        lease_expires_at_ms=now_ms + 86_400_000,
        started_at_ms=now_ms,
    )


def signed_receipts(
    url: str, *, prefix: str, keys: KeyRing, finished_ms: int
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(identity row, signed receipt v1) for every executing dispatch under `prefix`."""
    with psycopg.connect(url, row_factory=dict_row) as conn:
        rows = conn.execute(
            sql.SEEDED_IDENTITIES, {"low": prefix, "high": prefix + "\uffff"}
        ).fetchall()
    for row in rows:
        yield (
            row,
            sign_receipt(
                DispatchIdentity(schema_version=1, **row),
                outcome=Outcome.SUCCEEDED,
                result_code="ok",
                finished_at_ms=finished_ms,
                receipt_id=f"receipt:{row['dispatch_id']}",
                keys=keys,
            ),
        )


def seed_receipts(url: str, *, prefix: str, keys: KeyRing, finished_ms: int) -> int:
    """One signed receipt v1 per executing dispatch under `prefix`, as its executor wrote it."""
    written = 0
    with psycopg.connect(url) as conn:
        conn.execute(sql.IMPORT_HISTORY)
        with conn.cursor().copy(sql.RECEIPTS_COPY) as copy:
            for row, receipt in signed_receipts(
                url, prefix=prefix, keys=keys, finished_ms=finished_ms
            ):
                copy.write_row((row["dispatch_id"], json.dumps(receipt), finished_ms))
                written += 1
        conn.commit()
    return written


def write_receipt_file(
    url: str, path: Path, *, prefix: str, keys: KeyRing, finished_ms: int
) -> int:
    """The receipts a remote receipt service holds, by idempotency key (key TAB body)."""
    written = 0
    with path.open("wb") as out:
        for row, receipt in signed_receipts(url, prefix=prefix, keys=keys, finished_ms=finished_ms):
            out.write(row["idempotency_key"].encode() + b"\t" + canonical_json(receipt) + b"\n")
            written += 1
    return written


def reset(conn: psycopg.Connection[Any]) -> None:
    """Empty every table (TRUNCATE fires no row trigger; the insert-only triggers stay)."""
    conn.execute(sql.TRUNCATE_ALL)
