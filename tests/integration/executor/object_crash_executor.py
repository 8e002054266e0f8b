"""An executor on the Python SDK that publishes its receipt to object storage and SIGKILLs
itself at one point of the publication.

    python object_crash_executor.py <database_url> <dispatch_id> <point> <settings json>

Points: `before_publish` (after the side effect), `put_in_flight` (blocks in the PUT: the
test's proxy holds the reply and the test kills this process), `after_publish` (before the
completion), `after_complete`. Credentials come from the environment (AWS_*), the receipt
key from RESOLVER_RECEIPT_KEYS / RESOLVER_RECEIPT_SIGNING_KID.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from resolver.core.domain import Outcome
from resolver.evidence.object_store import ObjectStoreSettings
from resolver.evidence.receipts import KeyRing
from resolver.executor import PostgresExecutionStore, PostgresHandle
from resolver.executor.object_receipts import ReceiptPublisher
from resolver.executor.side_effects import SideEffectRunner


def crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(database_url: str, dispatch_id: str, point: str, settings: str) -> None:
    publisher = ReceiptPublisher(ObjectStoreSettings(**json.loads(settings)))
    with PostgresExecutionStore(PostgresHandle(database_url)) as store:
        runner = SideEffectRunner(
            store,
            database_url=database_url,
            owner="object-crasher",
            keys=KeyRing.from_environment(),
            lease_seconds=float(os.environ.get("LEASE_SECONDS", "6")),
        )
        with runner.run(dispatch_id) as effect:
            print("effect", flush=True)  # the side effect happened here
            if point == "before_publish":
                crash()
            effect.publish_receipt(publisher, Outcome.SUCCEEDED, "pushed", receipt_id="art-1")
            if point == "after_publish":
                crash()
    if point == "after_complete":
        crash()


if __name__ == "__main__":
    main(*sys.argv[1:5])
