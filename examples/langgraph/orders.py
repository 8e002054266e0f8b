"""A small order service (an ERP's orders and stock) in PostgreSQL: the downstream the example
agent's tools change.

It keeps its own idempotency record: a request whose idempotency key it has seen answers what
it answered the first time and changes nothing. It also logs every request that reached it and
committed (`erp.requests`), replays included, so a test can count what it saw: for one key,
more than one row means the agent sent the same effect twice.

Every operation runs in the caller's transaction (the executor writes the receipt in the same
one), and answers `(applied, result_code, response)`; `applied` is false for a business
refusal (unknown order, not enough stock), which changes nothing but the request log.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA = """
CREATE SCHEMA IF NOT EXISTS erp;
CREATE TABLE IF NOT EXISTS erp.products (
    sku text PRIMARY KEY,
    name text NOT NULL,
    stock integer NOT NULL CHECK (stock >= 0)
);
CREATE TABLE IF NOT EXISTS erp.orders (
    order_id text PRIMARY KEY,
    customer text NOT NULL,
    sku text NOT NULL REFERENCES erp.products (sku),
    quantity integer NOT NULL CHECK (quantity > 0),
    status text NOT NULL
);
CREATE TABLE IF NOT EXISTS erp.idempotency (
    idempotency_key text PRIMARY KEY,
    operation text NOT NULL,
    response jsonb NOT NULL
);
CREATE TABLE IF NOT EXISTS erp.requests (
    request_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    idempotency_key text NOT NULL,
    operation text NOT NULL,
    replayed boolean NOT NULL
);
"""

Answer = tuple[bool, str, dict[str, Any]]
STATUSES = ("open", "packed", "shipped", "delivered", "cancelled")


def install(conn: Any) -> None:
    conn.execute(SCHEMA)


def seed(conn: Any) -> None:
    """Two products with stock, for the example."""
    conn.execute(
        "INSERT INTO erp.products VALUES ('widget', 'Widget', 10), ('gadget', 'Gadget', 5)"
        " ON CONFLICT DO NOTHING"
    )


def _once(conn: Any, key: str, operation: str, apply: Any) -> Answer:
    """The service's idempotency: the first request with `key` applies, later ones replay."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))
    seen = conn.execute(
        "SELECT response FROM erp.idempotency WHERE idempotency_key = %s", (key,)
    ).fetchone()
    conn.execute(
        "INSERT INTO erp.requests (idempotency_key, operation, replayed) VALUES (%s, %s, %s)",
        (key, operation, seen is not None),
    )
    if seen is not None:
        stored = _row(seen)["response"]
        return bool(stored["applied"]), str(stored["result_code"]), dict(stored["response"])
    applied, code, response = apply()
    stored = {"applied": applied, "result_code": code, "response": response}
    conn.execute(
        "INSERT INTO erp.idempotency VALUES (%s, %s, %s)", (key, operation, json.dumps(stored))
    )
    return applied, code, response


def _row(row: Any) -> dict[str, Any]:
    return row if isinstance(row, dict) else {"response": row[0]}


def _one(conn: Any, query: str, *params: Any) -> tuple[Any, ...] | None:
    with conn.cursor() as cur:
        cur.execute(query, params)
        row = cur.fetchone()
    if row is None or isinstance(row, tuple):
        return row
    return tuple(row.values())


def create_order(
    conn: Any, key: str, *, order_id: str, customer: str, sku: str, quantity: int
) -> Answer:
    def apply() -> Answer:
        taken = _one(
            conn,
            "UPDATE erp.products SET stock = stock - %s WHERE sku = %s AND stock >= %s"
            " RETURNING stock",
            quantity,
            sku,
            quantity,
        )
        if taken is None:
            return False, "insufficient_stock", {"sku": sku}
        placed = _one(
            conn,
            "INSERT INTO erp.orders VALUES (%s, %s, %s, %s, 'open')"
            " ON CONFLICT (order_id) DO NOTHING RETURNING order_id",
            order_id,
            customer,
            sku,
            quantity,
        )
        if placed is None:
            conn.execute(
                "UPDATE erp.products SET stock = stock + %s WHERE sku = %s", (quantity, sku)
            )
            return False, "order_exists", {"order_id": order_id}
        return True, "order_created", {"order_id": order_id, "stock_left": taken[0]}

    return _once(conn, key, "create_order", apply)


def cancel_order(conn: Any, key: str, *, order_id: str) -> Answer:
    def apply() -> Answer:
        order = _one(
            conn,
            "UPDATE erp.orders SET status = 'cancelled' WHERE order_id = %s"
            " AND status NOT IN ('shipped', 'delivered', 'cancelled') RETURNING sku, quantity",
            order_id,
        )
        if order is None:
            return False, "not_cancellable", {"order_id": order_id}
        conn.execute(
            "UPDATE erp.products SET stock = stock + %s WHERE sku = %s", (order[1], order[0])
        )
        return True, "order_cancelled", {"order_id": order_id}

    return _once(conn, key, "cancel_order", apply)


def adjust_stock(conn: Any, key: str, *, sku: str, delta: int) -> Answer:
    def apply() -> Answer:
        row = _one(
            conn,
            "UPDATE erp.products SET stock = stock + %s WHERE sku = %s AND stock + %s >= 0"
            " RETURNING stock",
            delta,
            sku,
            delta,
        )
        if row is None:
            return False, "stock_refused", {"sku": sku}
        return True, "stock_adjusted", {"sku": sku, "stock": row[0]}

    return _once(conn, key, "adjust_stock", apply)


def set_status(conn: Any, key: str, *, order_id: str, status: str) -> Answer:
    def apply() -> Answer:
        if status not in STATUSES:
            return False, "unknown_status", {"status": status}
        row = _one(
            conn,
            "UPDATE erp.orders SET status = %s WHERE order_id = %s AND status <> 'cancelled'"
            " RETURNING order_id",
            status,
            order_id,
        )
        if row is None:
            return False, "not_found", {"order_id": order_id}
        return True, "status_set", {"order_id": order_id, "status": status}

    return _once(conn, key, "set_status", apply)
