"""An executor built on the Python SDK that SIGKILLs itself before or after its side effect.

    python tests/integration/executor/sdk_crash_executor.py <database_url> <dispatch_id> before|after|after-completing

`after-completing` completes in the mutation's transaction (`complete=True`) and dies right
after its COMMIT.

A real crash: no finally block runs, no lease is handed back, nothing completes. The
receipt key comes from RESOLVER_RECEIPT_KEYS / RESOLVER_RECEIPT_SIGNING_KID.
"""

from __future__ import annotations

import os
import signal
import sys

from resolver.core.domain import Outcome
from resolver.evidence.receipts import KeyRing
from resolver.executor import PostgresExecutionStore, PostgresHandle
from resolver.executor.side_effects import SideEffectRunner


def crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(database_url: str, dispatch_id: str, point: str) -> None:
    with PostgresExecutionStore(PostgresHandle(database_url)) as store:
        runner = SideEffectRunner(
            store,
            database_url=database_url,
            owner="sdk-crasher",
            keys=KeyRing.from_environment(),
            # Long enough that the receipt commits under a live lease on a loaded machine
            # (receipts are fenced on it), short enough to run out soon after the crash.
            lease_seconds=2.0,
        )
        with runner.run(dispatch_id) as effect:
            if point == "before":
                crash()
            with effect.transaction(complete=point == "after-completing") as conn:
                conn.execute("UPDATE sdk_accounts SET balance = balance - 10 WHERE id = 42")
                effect.write_receipt(conn, Outcome.SUCCEEDED, "applied", receipt_id="ledger-9")
            crash()


if __name__ == "__main__":
    main(*sys.argv[1:4])
