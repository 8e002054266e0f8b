"""`resolver demo`: seed crashed executions on a (private) PostgreSQL and resolve them."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from resolver import localpg
from resolver.app import build_replica
from resolver.config import load_settings
from resolver.db import migrate as migrations
from resolver.domain import DispatchSpec, action_digest
from resolver.evidence import build_registry
from resolver.execution import ExecutionClient

# action type -> provider config; `demo.unmapped` deliberately has none.
DEMO_ACTION_TYPES: dict[str, dict[str, object]] = {"demo.shell": {"provider": "manual_only"}}
CRASHED_LEASE_SECONDS = 0.2


def run(*, count: int, data_dir: Path, echo: Callable[[str], None]) -> None:
    url = os.environ.get("RESOLVER_DATABASE_URL")
    cluster = None
    if not url:
        echo(f"RESOLVER_DATABASE_URL is unset: starting a private PostgreSQL in {data_dir}")
        cluster = localpg.start(data_dir / "pg")
        url = cluster.url
    try:
        migrations.upgrade(url)
        settings = load_settings(database_url=url, cadence_seconds=0.1, backoff_base_seconds=1)
        replica = build_replica(settings, build_registry(DEMO_ACTION_TYPES))
        try:
            seeded = seed(
                ExecutionClient(
                    replica.store, owner="demo-executor", lease_seconds=CRASHED_LEASE_SECONDS
                ),
                count,
            )
            echo(f"seeded {len(seeded)} executions that crashed after the start barrier")
            time.sleep(CRASHED_LEASE_SECONDS * 2)  # let the crashed executors' leases lapse
            report = replica.reconciler.run_cycle()
            findings = {k.value: v for k, v in report.findings.items()}
            echo(
                f"one cycle: claimed {report.claimed}, findings {findings}, "
                f"committed {len(report.accepted)}"
            )
            snapshot = replica.store.status_snapshot()
            echo(f"controls by status: {snapshot.controls_by_status}; due now: {snapshot.due}")
        finally:
            replica.close()
    finally:
        if cluster is not None:
            cluster.stop()


def seed(client: ExecutionClient, count: int) -> list[str]:
    seeded = []
    for action_type in (*DEMO_ACTION_TYPES, "demo.unmapped"):
        for _ in range(count):
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
            client.start(client.lease(dispatch_id))
            seeded.append(dispatch_id)
    return seeded
