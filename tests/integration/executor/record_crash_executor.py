"""An executor on the Python SDK that calls a downstream service with the dispatch's
idempotency key and binding, and SIGKILLs itself at one point of the call.

    python record_crash_executor.py <database_url> <dispatch_id> <point> <service json>

The service's own handling is played by its writer (tests/helpers/downstream.py's table): it
records the request as `processing` with the binding it was sent, does the work, then marks it
`completed`. Points: `before_request`, `in_flight` (the service recorded the request, the
executor dies before the answer), `after_response` (before the completion), `after_complete`.
The receipt key comes from RESOLVER_RECEIPT_KEYS / RESOLVER_RECEIPT_SIGNING_KID.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import psycopg
import pymysql

from resolver.core.domain import Outcome
from resolver.evidence.bindings import IDEMPOTENCY_RECORD, binding_evidence_digest
from resolver.evidence.receipts import KeyRing
from resolver.executor import PostgresExecutionStore, PostgresHandle, idempotency_binding
from resolver.executor.side_effects import SideEffectRunner


def crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Service:
    """The downstream service's own writes to its own idempotency records."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def write(self, statement: str, args: tuple[Any, ...]) -> None:
        table = self.spec["table"]
        if self.spec["dialect"] == "mariadb":
            conn = pymysql.connect(autocommit=True, **self.spec["connect"])
            try:
                with conn.cursor() as cursor:
                    cursor.execute(statement.format(table=table), args)
            finally:
                conn.close()
        else:
            with psycopg.connect(self.spec["url"], autocommit=True) as conn:
                conn.execute(statement.format(table=table), args)  # type: ignore[arg-type]


def main(database_url: str, dispatch_id: str, point: str, service_spec: str) -> None:
    service = Service(json.loads(service_spec))
    keys = KeyRing.from_environment()
    with PostgresExecutionStore(PostgresHandle(database_url)) as store:
        runner = SideEffectRunner(
            store, database_url=database_url, owner="record-crasher", keys=keys, lease_seconds=6
        )
        with runner.run(dispatch_id) as effect:
            identity = effect.identity()
            token = idempotency_binding(identity, keys)
            if point == "before_request":
                crash()
            # The request, with Idempotency-Key and Resolver-Binding: the service records it.
            service.write(
                "INSERT INTO {table} (idempotency_key, binding, status) VALUES (%s, %s, %s)",
                (identity.idempotency_key, token, "processing"),
            )
            if point == "in_flight":
                crash()
            service.write(
                "UPDATE {table} SET status = %s, result_code = %s WHERE idempotency_key = %s",
                ("completed", "refunded", identity.idempotency_key),
            )
            if point == "after_response":
                crash()
            record = f"{identity.idempotency_key}:completed:refunded"
            effect.record(
                Outcome.SUCCEEDED,
                "refunded",
                evidence_digest=binding_evidence_digest(IDEMPOTENCY_RECORD, record, token),
            )
    if point == "after_complete":
        crash()


if __name__ == "__main__":
    main(*sys.argv[1:5])
