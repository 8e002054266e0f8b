"""`resolver demo`: seed crashed executions on a (private) PostgreSQL and resolve them."""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from resolver.core.domain import (
    DispatchSpec,
    ExecutionLease,
    ExecutionState,
    Outcome,
    action_digest,
)
from resolver.core.ports import ExecutionStore
from resolver.core.provider import ProviderRegistry, build_registry
from resolver.core.replica import Replica
from resolver.db import migrate as migrations
from resolver.db import session
from resolver.db.connect import pooler_from_env
from resolver.db.store import Stores
from resolver.demo import localpg
from resolver.evidence.receipts import KEYS_ENV, KeyRing
from resolver.executor.client import ExecutionClient
from resolver.executor.receipts import write_receipt

# `demo.internal` has internal receipts, `demo.shell` is manual-only, `demo.unmapped` has no
# provider at all.
INTERNAL, SHELL, UNMAPPED = "demo.internal", "demo.shell", "demo.unmapped"
# Long enough for a lease, the start after it and the receipt written under it on a loaded
# host or through a pooler (0.2 s lapsed in between); the demo waits twice this for the
# leases to lapse.
CRASHED_LEASE_SECONDS = 1.0

# A replica on the given database and providers, not started: the composition root's to
# build (`resolver.app.composition.demo_replica`), so the demo never imports the app shell.
ReplicaFactory = Callable[[str, ProviderRegistry], Replica[Stores]]


def run(
    *,
    count: int,
    data_dir: Path,
    echo: Callable[[str], None],
    build_replica: ReplicaFactory,
    object_store: str | None = None,
    object_bucket: str = "receipts",
) -> None:
    url = os.environ.get("RESOLVER_DATABASE_URL")
    cluster = None
    if not url:
        echo(f"RESOLVER_DATABASE_URL is unset: starting a private PostgreSQL in {data_dir}")
        cluster = localpg.start(data_dir / "pg")
        echo(f"  server binaries: {cluster.bin_dir}")
        url = cluster.url
    try:
        migrations.upgrade(url, policy=migrations.MigrationPolicy(pooler=pooler_from_env()))
        keys = KeyRing.ephemeral(f"demo-{uuid.uuid4().hex[:8]}")
        echo(
            f"receipts are signed with an ephemeral HMAC key generated for this run "
            f"(kid {keys.current_kid}); real deployments load keys from RESOLVER_RECEIPT_KEYS "
            "or RESOLVER_SECRETS_DIR"
        )
        objects = None if object_store is None else (object_store, object_bucket)
        if objects is not None:
            from resolver.demo import objects as object_demo

            object_demo.ensure_bucket(*objects)
            echo(f"receipt objects go to {object_store}, bucket {object_bucket}")
        replica = build_replica(url, demo_registry(url, keys, objects))
        try:
            client = ExecutionClient(
                replica.store.execution, owner="demo-executor", lease_seconds=CRASHED_LEASE_SECONDS
            )
            expected = seed(client, url, keys, count)
            if objects is not None:
                expected |= object_demo.seed(replica.store.execution, url, keys, count, *objects)
            echo(f"seeded {len(expected)} executions that crashed after the start barrier")
            time.sleep(CRASHED_LEASE_SECONDS * 2)  # let the crashed executors' leases lapse
            if objects is not None:
                object_demo.wait_for_leases()
            findings: Counter[str] = Counter()
            while True:
                report = replica.reconciler.run_cycle()
                findings.update(k.value for k in report.findings.elements())
                if not report.page_full:
                    break
            echo(f"findings: {dict(sorted(findings.items()))}")
            for line in outcome_lines(replica.store.execution, expected):
                echo(line)
            snapshot = replica.store.backlog.backlog_snapshot(count_cap=10_000)
            echo(f"open controls by queue: {snapshot.by_queue()}")
        finally:
            replica.close()
    finally:
        if cluster is not None:
            cluster.stop()


def demo_registry(
    url: str, keys: KeyRing, objects: tuple[str, str] | None = None
) -> ProviderRegistry:
    """The built-in providers as `resolver run` finds them, through the entry-point registry:
    they read the evidence database URL and the receipt keys from the environment, so the
    demo's own (possibly private) database and ephemeral key are exported while they start."""
    action_types: dict[str, dict[str, object]] = {
        INTERNAL: {"provider": "internal_mutation", "timeout_seconds": 5.0},
        SHELL: {"provider": "manual_only"},
    }
    if objects is not None:
        from resolver.demo import objects as object_demo

        action_types.update(object_demo.action_types(*objects))
    secrets = ",".join(f"{kid}={secret.hex()}" for kid, secret in keys.keys.items())
    with _exported({"RESOLVER_DATABASE_URL": url, KEYS_ENV: secrets}):
        return build_registry(action_types)


@contextmanager
def _exported(variables: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def seed(client: ExecutionClient, url: str, keys: KeyRing, count: int) -> dict[str, str]:
    """Crashed executions, dispatch id -> what the demo planted before the "crash"."""
    forged = KeyRing.ephemeral("not-in-the-ring")
    plan = [(INTERNAL, "succeeded" if n % 2 == 0 else "failed") for n in range(count)]
    plan += [(INTERNAL, "crashed before its mutation"), (INTERNAL, "forged receipt")]
    plan += [(SHELL, "no query possible")] * count + [(UNMAPPED, "no provider")] * count
    seeded: dict[str, str] = {}
    for action_type, story in plan:
        lease = start(client, action_type)
        if story in ("succeeded", "failed"):
            mutate_with_receipt(url, lease, Outcome(story), keys)
        elif story == "forged receipt":
            mutate_with_receipt(url, lease, Outcome.SUCCEEDED, forged)
        seeded[lease.dispatch_id] = f"{action_type} ({story})"
    return seeded


def start(client: ExecutionClient, action_type: str) -> ExecutionLease:
    dispatch_id = f"d-{uuid.uuid4().hex[:12]}"
    client.create_dispatch(
        DispatchSpec(
            dispatch_id=dispatch_id,
            approval_request_id=f"ar-{dispatch_id}",
            project_id="demo",
            action_type=action_type,
            action_digest=action_digest({"type": action_type, "id": dispatch_id}),
            idempotency_key=f"idem-{dispatch_id}",
        )
    )
    return client.start(client.lease(dispatch_id))


def mutate_with_receipt(url: str, lease: ExecutionLease, outcome: Outcome, keys: KeyRing) -> None:
    """The executor's side: its mutation and the signed receipt commit together, then it
    "crashes" before reporting completion."""
    # The demo plays the platform's executor, which owns this connection.
    with session.transaction(url, application_name="resolver-demo-executor") as conn:
        # (the platform's own internal mutation would run here, on the same connection)
        write_receipt(
            conn,
            lease,
            outcome=outcome,
            result_code="applied" if outcome is Outcome.SUCCEEDED else "rejected",
            receipt_id=f"mutation-{lease.dispatch_id}",
            keys=keys,
        )


def outcome_lines(store: ExecutionStore, seeded: dict[str, str]) -> list[str]:
    lines = []
    for dispatch_id, story in seeded.items():
        view = store.get_execution(dispatch_id)
        state = view.state.value if view else "?"
        how = f"{view.resolution_source} resolution" if view and view.resolution_source else ""
        if view is not None and view.state is ExecutionState.EXECUTING:
            how = "still unknown: waits for evidence or a human"
        lines.append(f"  {dispatch_id}  {story:<42} -> {state} ({how})")
    return lines
