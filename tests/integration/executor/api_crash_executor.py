"""An executor on the Python SDK that asks a payments API for a refund with the dispatch's
idempotency key and binding, and SIGKILLs itself at one point of the call.

    python api_crash_executor.py <database_url> <dispatch_id> <point> <api json>

Points: `before_request`, `in_flight` (the API accepted the refund and is still processing it
when the executor dies), `after_response` (before the completion), `after_complete`.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import sys

import httpx

from resolver.core.domain import Outcome
from resolver.evidence.receipts import KeyRing
from resolver.executor import PostgresExecutionStore, PostgresHandle, idempotency_binding
from resolver.executor.side_effects import SideEffectRunner


def crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(database_url: str, dispatch_id: str, point: str, api: str) -> None:
    where = json.loads(api)
    tls = ssl.create_default_context(cafile=where["ca"])
    keys = KeyRing.from_environment()
    with PostgresExecutionStore(PostgresHandle(database_url)) as store:
        runner = SideEffectRunner(
            store, database_url=database_url, owner="api-crasher", keys=keys, lease_seconds=6
        )
        with runner.run(dispatch_id) as effect:
            identity = effect.identity()
            if point == "before_request":
                crash()
            headers = {
                "Authorization": "Bearer writer-token-1",
                "Idempotency-Key": identity.idempotency_key,
                "Resolver-Binding": idempotency_binding(identity, keys),
            }
            if point == "in_flight":
                headers["X-Test-Hold"] = "1"
            reply = httpx.post(
                f"{where['url']}/v1/refunds", json={"amount": 2490}, headers=headers, verify=tls
            )
            reply.raise_for_status()
            if point in ("in_flight", "after_response"):
                crash()
            effect.record(Outcome.SUCCEEDED, reply.json()["data"]["code"])
    if point == "after_complete":
        crash()


if __name__ == "__main__":
    main(*sys.argv[1:5])
