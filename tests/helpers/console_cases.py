"""Cases the console's browser tests open: a forged receipt's conflict, lost executions of a
project, waiting cases with and without an escalation window, an old payment for the alert's
link, and old settled dispatches for retention to prune. Each is written the way the platform
writes it (the executor API, a real reconciler cycle), never as rows planted in tables."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime

from resolver.core.domain import (
    ActionSummary,
    Completion,
    DispatchIdentity,
    Finding,
    FindingKind,
    Outcome,
)
from resolver.core.provider import build_registry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.evidence.receipts import KeyRing, encode_receipt, receipt_finding, sign_receipt
from resolver.executor import ExecutionClient
from tests.helpers.database import World, new_spec
from tests.helpers.providers import ScriptedProvider, fixed, reconciler, scripted_as, verified
from tests.helpers.stores import Storage

TRUSTED = KeyRing({"platform-1": b"p" * 32}, signing_kid="platform-1")
FORGER = KeyRing({"forger-9": b"f" * 32}, signing_kid="forger-9")
CHARGE = ActionSummary.of(
    "Charge 2,490.00 EUR to customer 4471", {"Amount": "2,490.00 EUR", "Order": "ord-7781"}
)


def forged_success(identity: DispatchIdentity) -> Finding:
    """What a receipt signed outside the ring proves: a conflict, with its reason."""
    receipt = sign_receipt(
        identity,
        outcome=Outcome.SUCCEEDED,
        result_code="charged",
        finished_at_ms=identity.started_at_ms + 5,
        receipt_id="forged-1",
        keys=FORGER,
    )
    return receipt_finding(encode_receipt(receipt), identity, TRUSTED, source="http_receipt")


def forged_case(store: Storage, world: World) -> str:
    """A charge with its summary, its executor lost, its receipt forged: in the manual queue."""
    executor = ExecutionClient(store, owner="pay-worker-3", lease_seconds=0.001)
    spec = executor.create_dispatch(new_spec("pay.charge", action_summary=CHARGE))
    world.specs[spec.dispatch_id] = spec
    started_ms = int(time.time() * 1000) + 1
    executor.at(started_ms).start(executor.at(started_ms).lease(spec.dispatch_id))
    reconciler(store, ScriptedProvider(forged_success), action_type="pay.charge").at(
        started_ms + 10
    ).run_cycle()
    return spec.dispatch_id


def lost_in(store: Storage, world: World, project_id: str, count: int) -> list[str]:
    """Cases of another project whose executor was lost, inspected once: in the manual queue."""
    executor = ExecutionClient(store, owner="node-7", lease_seconds=0.001)
    ids = []
    for _ in range(count):
        spec = executor.create_dispatch(new_spec(project_id=project_id))
        world.specs[spec.dispatch_id] = spec
        started_ms = int(time.time() * 1000) + 1
        executor.at(started_ms).start(executor.at(started_ms).lease(spec.dispatch_id))
        ids.append(spec.dispatch_id)
    reconciler(store, ScriptedProvider(fixed(FindingKind.UNSUPPORTED))).at(
        int(time.time() * 1000) + 20
    ).run_cycle()
    return ids


def waiting_cases(store: Storage, world: World) -> dict[str, str]:
    """Two lost executions inspected once on the real clock, evidence missing: a package
    install (escalates after its window) and an action type whose finding never escalates."""
    executor = ExecutionClient(store, owner="node-3", lease_seconds=0.001)
    ids = {}
    for action_type in ("pkg.install", "run.thing"):
        spec = executor.create_dispatch(new_spec(action_type))
        world.specs[spec.dispatch_id] = spec
        started_ms = int(time.time() * 1000) + 1
        executor.at(started_ms).start(executor.at(started_ms).lease(spec.dispatch_id))
        ids[action_type] = spec.dispatch_id
    config = {"pkg.install": {"provider": "package_install"}, "run.thing": {"provider": "runs"}}
    # Scripted findings under each provider's own declaration: package_install's window.
    answer = fixed(FindingKind.MISSING)
    registry = build_registry(
        config, {n: scripted_as(n, answer) for n in ("package_install", "runs")}
    )
    settings = ReconcilerSettings(owner="r", recovery_lease_ms=30_000, backoff_base_ms=60_000)
    Reconciler(store, registry, settings, Runtime(rng=random.Random(3))).at(
        int(time.time() * 1000) + 20
    ).run_cycle()
    return ids


def utc_text(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def oldest_payment(store: Storage, world: World, title: str = "Charge 18.50 EUR") -> str:
    """The oldest case of the queue: a payment whose executor was lost five hours ago, in the
    manual queue since (no provider can check it): what the 4-hour alert's link opens."""
    executor = ExecutionClient(store, owner="pay-worker-3", lease_seconds=0.001)
    summary = ActionSummary.of(title, {"Amount": "18.50 EUR", "Order": "ord-112"})
    spec = executor.create_dispatch(new_spec("pay.charge", action_summary=summary))
    world.specs[spec.dispatch_id] = spec
    long_ago = int(time.time() * 1000) - 5 * 3600 * 1000
    executor.at(long_ago).start(executor.at(long_ago).lease(spec.dispatch_id))
    reconciler(
        store, ScriptedProvider(fixed(FindingKind.UNSUPPORTED)), action_type="pay.charge"
    ).at(long_ago + 10).run_cycle()
    return spec.dispatch_id


def settled_long_ago(store: Storage, world: World, days: int = 40) -> dict[str, str]:
    """Two dispatches settled `days` ago: one completed by its executor, one settled
    automatically from verified evidence after its executor was lost."""
    old = int(time.time() * 1000) - days * 86_400_000
    executor = ExecutionClient(store, owner="executor-1", lease_seconds=1)
    completed = executor.create_dispatch(new_spec())
    lease = executor.at(old).start(executor.at(old).lease(completed.dispatch_id))
    executor.at(old + 100).complete(lease, Completion(Outcome.SUCCEEDED, "done", "m-old"))
    crashed = executor.create_dispatch(new_spec())
    executor.at(old).start(executor.at(old).lease(crashed.dispatch_id))
    reconciler(store, ScriptedProvider(verified)).at(old + 5_000).run_cycle()
    for spec in (completed, crashed):
        world.specs[spec.dispatch_id] = spec
    return {"completion": completed.dispatch_id, "automatic": crashed.dispatch_id}
