"""Set-based seeding: due controls, settled history, live executions and signed receipts."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from benchmarks import sql

BATCH = 200_000


@dataclass(frozen=True, slots=True)
class ReceiptKey:
    kid: str
    secret: bytes

    @property
    def env_value(self) -> str:
        """The `RESOLVER_RECEIPT_KEYS` form: kid=hexsecret."""
        return f"{self.kid}={self.secret.hex()}"


BENCH_KEY = ReceiptKey("bench-1", hashlib.sha256(b"benchmark receipt key").digest())


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
            conn.execute(statement, {"first": start, "last": last, **params})
        start = last + 1


def seed_due(
    conn: psycopg.Connection[Any], count: int, *, action_type: str, prefix: str, due_ms: int
) -> None:
    """`count` executions that crossed the barrier and whose lease expired at `due_ms`."""
    _in_batches(conn, sql.SEED_DUE, count, 1, prefix=prefix, action_type=action_type, due_ms=due_ms)


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


def seed_live(conn: psycopg.Connection[Any], count: int, *, prefix: str, now_ms: int) -> None:
    """Executions still running under a live lease: armed, never claimable."""
    _in_batches(
        conn, sql.SEED_LIVE, count, 1, prefix=prefix, action_type="bench.live", now_ms=now_ms
    )


def sign_receipt(fields: dict[str, Any], key: ReceiptKey) -> dict[str, Any]:
    """Receipt v1: HMAC-SHA256 over the canonical JSON of every key but `sig`."""
    body = {**fields, "kid": key.kid}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    sig = hmac.new(key.secret, canonical.encode("utf-8"), hashlib.sha256).hexdigest()
    return {**body, "sig": sig}


def seed_receipts(
    url: str, *, prefix: str, key: ReceiptKey, finished_ms: int, outcome: str = "succeeded"
) -> int:
    """One signed receipt per executing dispatch under `prefix`, as the executor wrote it."""
    with psycopg.connect(url, row_factory=dict_row) as conn:
        conn.execute(sql.RECEIPTS_TABLE)
        rows = conn.execute(
            sql.SEEDED_IDENTITIES, {"low": prefix, "high": prefix + "\uffff"}
        ).fetchall()
        with conn.cursor().copy(sql.RECEIPTS_COPY) as copy:
            for row in rows:
                receipt = sign_receipt(_receipt_fields(row, outcome, finished_ms), key)
                copy.write_row((row["dispatch_id"], json.dumps(receipt), finished_ms))
        conn.commit()
    return len(rows)


def _receipt_fields(row: dict[str, Any], outcome: str, finished_ms: int) -> dict[str, Any]:
    return {
        "v": 1,
        "dispatch_id": row["dispatch_id"],
        "approval_request_id": row["approval_request_id"],
        "project_id": row["project_id"],
        "action_type": row["action_type"],
        "action_digest": row["action_digest"],
        "attempt": row["attempt"],
        "started_at_ms": row["started_at_ms"],
        "idempotency_key": row["idempotency_key"],
        "outcome": outcome,
        "result_code": "ok",
        "finished_at_ms": finished_ms,
        "receipt_identity_digest": hashlib.sha256(
            f"receipt:{row['dispatch_id']}".encode()
        ).hexdigest(),
    }


def reset(conn: psycopg.Connection[Any]) -> None:
    """Empty every recovery table (TRUNCATE fires no row trigger: insert-only stays intact)."""
    with conn.transaction():
        conn.execute(sql.TRUNCATE_ALL)
        conn.execute(sql.RECEIPTS_TABLE)
        conn.execute(sql.TRUNCATE_RECEIPTS)
