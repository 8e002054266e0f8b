"""`resolver demo --object-store URL`: one action type settled from receipt objects.

The demo plays an executor whose side effect lands outside PostgreSQL (an artifact push): it
publishes its receipt to the S3-compatible store at URL through the SDK
(`SideEffect.publish_receipt`), then "crashes" before reporting completion; the
`object_receipt` provider settles it from the object. Credentials come from the standard
chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile, ...). Needs the `s3` extra.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from resolver.core.domain import DispatchSpec, Outcome, action_digest
from resolver.core.ports import ExecutionStore
from resolver.evidence.object_store import ObjectStoreSettings, make_client
from resolver.evidence.receipts import KeyRing
from resolver.executor.object_receipts import ReceiptPublisher
from resolver.executor.side_effects import SideEffectRunner

OBJECT = "demo.object"
# Long enough for one PUT (1 s to connect, 1 s for the reply), the margin (a quarter of
# the lease) and a renewal on a loaded machine.
OBJECT_LEASE_SECONDS = 6.0
OBJECT_TIMEOUT_SECONDS = 1.0


class _Crash(Exception):
    """The demo executor dying after its publication, before its completion."""


def settings(endpoint_url: str, bucket: str) -> ObjectStoreSettings:
    return ObjectStoreSettings(
        bucket=bucket,
        endpoint_url=endpoint_url,
        addressing_style="path",
        timeout_seconds=OBJECT_TIMEOUT_SECONDS,
    )


def action_types(endpoint_url: str, bucket: str) -> dict[str, dict[str, object]]:
    config: dict[str, object] = {"provider": "object_receipt"}
    config.update(settings(endpoint_url, bucket).model_dump(exclude_defaults=True))
    return {OBJECT: config}


def ensure_bucket(endpoint_url: str, bucket: str) -> None:
    """The demo's store may be empty (a fresh MinIO or moto): make the bucket if it is, with
    versioning on (`object_receipt` reads no bucket that could overwrite silently)."""
    client: Any = make_client(settings(endpoint_url, bucket), max_pool=1, read_only=False)
    try:
        existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
        if bucket not in existing:
            client.create_bucket(Bucket=bucket)
            client.put_bucket_versioning(
                Bucket=bucket, VersioningConfiguration={"Status": "Enabled"}
            )
    finally:
        client.close()


def seed(
    store: ExecutionStore, url: str, keys: KeyRing, count: int, endpoint_url: str, bucket: str
) -> dict[str, str]:
    """Crashed executions that published their receipt object; dispatch id -> story."""
    publisher = ReceiptPublisher(settings(endpoint_url, bucket))
    runner = SideEffectRunner(
        store,
        database_url=url,
        owner="demo-pusher",
        keys=keys,
        lease_seconds=OBJECT_LEASE_SECONDS,
    )
    seeded: dict[str, str] = {}
    try:
        for n in range(count):
            outcome = Outcome.SUCCEEDED if n % 2 == 0 else Outcome.FAILED
            dispatch_id = _dispatch(runner)
            publish_then_crash(runner, publisher, dispatch_id, outcome)
            seeded[dispatch_id] = f"{OBJECT} (receipt object, {outcome.value})"
    finally:
        publisher.close()
        runner.close()
    return seeded


def _dispatch(runner: SideEffectRunner) -> str:
    dispatch_id = f"d-{uuid.uuid4().hex[:12]}"
    runner.client.create_dispatch(
        DispatchSpec(
            dispatch_id=dispatch_id,
            approval_request_id=f"ar-{dispatch_id}",
            project_id="demo",
            action_type=OBJECT,
            action_digest=action_digest({"type": OBJECT, "id": dispatch_id}),
            idempotency_key=f"idem-{dispatch_id}",
        )
    )
    return dispatch_id


def publish_then_crash(
    runner: SideEffectRunner, publisher: ReceiptPublisher, dispatch_id: str, outcome: Outcome
) -> None:
    try:
        with runner.run(dispatch_id) as effect:
            # (the artifact push would run here)
            effect.publish_receipt(
                publisher,
                outcome,
                "pushed" if outcome is Outcome.SUCCEEDED else "rejected",
                receipt_id=f"artifact-{dispatch_id}",
            )
            raise _Crash
    except _Crash:
        pass  # no completion: recovery settles it from the object


def wait_for_leases() -> None:
    time.sleep(OBJECT_LEASE_SECONDS + 0.2)  # let the crashed publishers' leases lapse
