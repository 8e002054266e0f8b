"""An executor of release 0.3.0, run by tests/deploy/test_previous_release.py with that release's
code first on the path: it crosses the start barrier through that release's SDK, writes each
mutation's receipt and dies without completing. Prints the ids whose receipt it wrote.

    python previous_release_executor.py DATABASE_URL COUNT
"""

from __future__ import annotations

import sys
import uuid

import psycopg

import resolver
from resolver.executor import (
    DispatchSpec,
    ExecutionClient,
    KeyRing,
    LeaseLost,
    Outcome,
    PostgresExecutionStore,
    PostgresHandle,
    action_digest,
    write_receipt,
)

KEYS = KeyRing({"k-previous": bytes(range(32))}, signing_kid="k-previous")


def main(url: str, count: int) -> None:
    print(f"version {resolver.__version__}", file=sys.stderr)
    with PostgresExecutionStore(PostgresHandle(url)) as store:
        _crash(url, ExecutionClient(store, owner="previous-executor", lease_seconds=1), count)


def _crash(url: str, client: ExecutionClient, count: int) -> None:
    written = 0
    for _ in range(count * 4):
        dispatch_id = f"prev-{uuid.uuid4().hex[:12]}"
        client.create_dispatch(
            DispatchSpec(
                dispatch_id=dispatch_id,
                approval_request_id=f"ar-{dispatch_id}",
                project_id="p-previous",
                action_type="db.mutation",
                action_digest=action_digest({"id": dispatch_id}),
                idempotency_key=f"idem-{dispatch_id}",
            )
        )
        try:
            lease = client.start(client.lease(dispatch_id))
            with psycopg.connect(url) as conn, conn.transaction():
                write_receipt(
                    conn,
                    lease,
                    outcome=Outcome.SUCCEEDED,
                    result_code="applied",
                    receipt_id=f"r-{dispatch_id}",
                    keys=KEYS,
                )
        except LeaseLost:  # a lease that lapsed on a loaded host: another takes its place
            continue
        print(dispatch_id)
        written += 1
        if written == count:
            break


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
