"""What the suite runs: dispatch plans and scripts from a seed, crashed seeds, live executors."""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from resolver.core.domain import (
    Completion,
    DispatchIdentity,
    DispatchSpec,
    ExecutionLease,
    FindingKind,
    Outcome,
)
from resolver.core.domain import action_digest as digest_of
from resolver.core.errors import FenceConflict, NotFound, NotLeasable, StorageUnavailable
from resolver.evidence.object_store import receipt_key
from resolver.evidence.receipts import KeyRing, encode_receipt, sign_receipt
from resolver.executor.client import ExecutionClient
from resolver_test_support.history import FileHistory, History
from resolver_test_support.scripted import SCRIPT_TABLE_DDL, Script, evidence_digest
from tests.helpers.stores import Storage

# After a failover under asynchronous replication an acknowledged write may be gone: the
# dispatch the executor created, the lease it took. The executor then meets these answers.
LOST_WRITE_ANSWERS = (NotLeasable, NotFound, FenceConflict)

SCRIPTED_TYPES = ("pay.charge", "db.mutate", "run.create")
ESCALATING_TYPE = "pkg.fetch"
"""Scripted, with an escalation window: evidence that stays `missing` goes to a human."""
ESCALATE_AFTER_SECONDS = 3
MANUAL_ONLY_TYPE = "shell.exec"
UNMAPPED_TYPE = "unmapped.thing"

K = FindingKind
VERIFIED_SHAPES: tuple[tuple[FindingKind, ...], ...] = (
    (K.VERIFIED_SUCCEEDED,),
    (K.VERIFIED_FAILED,),
    (K.MISSING, K.VERIFIED_SUCCEEDED),
    (K.UNAVAILABLE, K.VERIFIED_SUCCEEDED),
    (K.STILL_RUNNING, K.VERIFIED_FAILED),
    (K.MISSING, K.UNAVAILABLE, K.STILL_RUNNING, K.VERIFIED_SUCCEEDED),
)
MANUAL_SHAPES: tuple[tuple[FindingKind, ...], ...] = (
    (K.CONFLICT,),
    (K.UNSUPPORTED,),
    (K.MISSING, K.CONFLICT),
)


EVIDENCE_URL_ENV = "RESOLVER_EVIDENCE_DATABASE_URL"
RECEIPT_TYPE = "db.receipt"
"""Settled by the built-in `internal_mutation` provider from signed receipts."""
RECEIPT_KEYS = {"k1": "6b" * 32}
"""A test-only HMAC key (RESOLVER_RECEIPT_KEYS), never a real secret."""


OBJECT_TYPE = "obj.push"
"""Settled by `object_receipt` from signed receipt objects in S3-compatible storage (a run
with object storage only, `provider_config(object_settings=...)`)."""


def provider_config(object_settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The YAML document every replica loads (RESOLVER_CONFIG)."""
    # Evidence is read as a deployment reads it: through the evidence URL (replica_env).
    source = {"provider": "scripted", "timeout_seconds": 1, "database_url_env": EVIDENCE_URL_ENV}
    scripted = {t: dict(source) for t in SCRIPTED_TYPES}
    scripted[ESCALATING_TYPE] = {
        **source,
        "escalate_after_seconds": {"missing": ESCALATE_AFTER_SECONDS},
    }
    builtin = {
        MANUAL_ONLY_TYPE: {"provider": "manual_only"},
        RECEIPT_TYPE: {"provider": "internal_mutation", "timeout_seconds": 1},
    }
    if object_settings is not None:
        builtin[OBJECT_TYPE] = {"provider": "object_receipt", **object_settings}
    return {"action_types": {**scripted, **builtin}}


def receipt_key_env() -> dict[str, str]:
    return {
        "RESOLVER_RECEIPT_KEYS": ",".join(f"{kid}={key}" for kid, key in RECEIPT_KEYS.items()),
        "RESOLVER_RECEIPT_SIGNING_KID": next(iter(RECEIPT_KEYS)),
    }


# Who decides the manual queue in the run (tests/contention/operators.py), and what needs two.
OPERATORS = ("alice", "bob", "carol")
TWO_PERSON_RULE = ("pay.*", "confirm_succeeded")
PROJECTS = tuple(f"proj-{n}" for n in range(7))


class Kind(StrEnum):
    CRASHED_VERIFIED = "crashed_verified"
    """The executor died after the barrier; the evidence eventually proves the outcome."""
    CRASHED_MANUAL = "crashed_manual"
    """Evidence never settles it (conflict, unsupported, tampered, no provider)."""
    LIVE_REPLAY = "live_replay"
    """A slow executor completes late; the evidence agrees with it (exact replay)."""
    LIVE_DRIFT = "live_drift"
    """A slow executor completes late; the evidence says the opposite (drift)."""
    CRASHED_ESCALATED = "crashed_escalated"
    """The evidence stays missing: after its window the case escalates to a human."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What the harness intends for one dispatch; the checker judges against it."""

    spec: DispatchSpec
    kind: Kind
    script: Script | None
    tampered: bool = False
    executor_outcome: Outcome | None = None
    receipt_outcome: Outcome | None = None
    """For RECEIPT_TYPE: the outcome of the signed receipt the executor wrote, if any."""

    @property
    def provable_outcome(self) -> Outcome | None:
        """The outcome evidence bound to this identity can prove (None: it can prove none)."""
        if self.spec.action_type in (RECEIPT_TYPE, OBJECT_TYPE):
            return self.receipt_outcome
        if self.script is None or self.tampered or self.spec.action_type not in SCRIPTED_TYPES:
            return None
        return self.script.final_outcome

    def expected_digest(self, outcome: Outcome) -> str:
        s = self.spec
        code = self.script.result_code if self.script else "ok"
        return evidence_digest(s.dispatch_id, s.action_digest, s.idempotency_key, outcome, code)


def make_plans(
    rng: random.Random,
    count: int,
    base_ms: int,
    horizon_ms: int,
    wave: int,
    live_ratio: float,
    object_ratio: float = 0.0,
) -> list[Plan]:
    plans = []
    for n in range(count):
        dispatch_id = f"w{wave}-{n:06d}"
        if rng.random() < object_ratio:
            plans.append(_object_plan(rng, dispatch_id))
            continue
        roll = rng.random()
        if roll < live_ratio:
            plans.append(_live_plan(rng, dispatch_id, base_ms, horizon_ms))
        elif roll > 0.96:
            script = Script((K.MISSING,))
            spec = _spec(dispatch_id, ESCALATING_TYPE)
            plans.append(Plan(spec, Kind.CRASHED_ESCALATED, script))
        elif roll < live_ratio + 0.05:
            plans.append(Plan(_spec(dispatch_id, MANUAL_ONLY_TYPE), Kind.CRASHED_MANUAL, None))
        elif roll < live_ratio + 0.08:
            plans.append(Plan(_spec(dispatch_id, UNMAPPED_TYPE), Kind.CRASHED_MANUAL, None))
        elif roll < live_ratio + 0.20:
            shape = rng.choice(MANUAL_SHAPES)
            script = _script(rng, shape, base_ms, horizon_ms)
            plans.append(
                Plan(_spec(dispatch_id, rng.choice(SCRIPTED_TYPES)), Kind.CRASHED_MANUAL, script)
            )
        elif roll < live_ratio + 0.24:
            # Valid-looking success evidence bound to another action: must never settle it.
            script = _script(rng, (K.VERIFIED_SUCCEEDED,), base_ms, horizon_ms)
            spec = _spec(dispatch_id, rng.choice(SCRIPTED_TYPES))
            plans.append(Plan(spec, Kind.CRASHED_MANUAL, script, tampered=True))
        else:
            script = _script(rng, rng.choice(VERIFIED_SHAPES), base_ms, horizon_ms)
            spec = _spec(dispatch_id, rng.choice(SCRIPTED_TYPES))
            plans.append(Plan(spec, Kind.CRASHED_VERIFIED, script))
    return plans


def _object_plan(rng: random.Random, dispatch_id: str) -> Plan:
    """A crashed executor that published its receipt object (either outcome), or one whose
    object is bound to another attempt or tampered with (conflict: a person decides)."""
    spec = _spec(dispatch_id, OBJECT_TYPE)
    if rng.random() < 0.15:
        return Plan(spec, Kind.CRASHED_MANUAL, None, tampered=True)
    outcome = Outcome.SUCCEEDED if rng.random() < 0.7 else Outcome.FAILED
    return Plan(spec, Kind.CRASHED_VERIFIED, None, receipt_outcome=outcome)


def publish_object_receipt(
    conn: psycopg.Connection[Any], plan: Plan, client: Any, bucket: str, prefix: str
) -> None:
    """What the crashed executor left in the store: its receipt object, published once."""
    row = conn.execute(
        "SELECT attempt, started_at_ms FROM approved_action_executions WHERE dispatch_id = %s",
        (plan.spec.dispatch_id,),
    ).fetchone()
    if row is None or row["started_at_ms"] is None:
        return  # never crossed the barrier (a lost write): nothing was published
    s = plan.spec
    identity = DispatchIdentity(
        schema_version=1,
        dispatch_id=s.dispatch_id,
        approval_request_id=s.approval_request_id,
        project_id=s.project_id,
        action_type=s.action_type,
        action_digest=s.action_digest,
        attempt=row["attempt"] + (1 if plan.tampered else 0),  # tampered: another attempt's
        started_at_ms=row["started_at_ms"],
        idempotency_key=s.idempotency_key,
    )
    body = encode_receipt(
        sign_receipt(
            identity,
            outcome=plan.receipt_outcome or Outcome.SUCCEEDED,
            result_code="ok",
            finished_at_ms=row["started_at_ms"] + 1,
            receipt_id=f"obj-{s.dispatch_id}",
            keys=KeyRing(
                {k: bytes.fromhex(v) for k, v in RECEIPT_KEYS.items()},
                signing_kid=next(iter(RECEIPT_KEYS)),
            ),
        )
    )
    key = receipt_key(prefix, s.project_id, s.dispatch_id)
    client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")


def _live_plan(rng: random.Random, dispatch_id: str, base_ms: int, horizon_ms: int) -> Plan:
    outcome = rng.choice((Outcome.SUCCEEDED, Outcome.FAILED))
    drift = rng.random() < 0.3
    proven = _opposite(outcome) if drift else outcome
    final = K.VERIFIED_SUCCEEDED if proven is Outcome.SUCCEEDED else K.VERIFIED_FAILED
    # Evidence of a running execution first, then proof: a resolver may win the race.
    switch = base_ms + rng.randrange(500, max(1_000, horizon_ms // 4))
    script = Script((K.STILL_RUNNING, final), (switch,))
    kind = Kind.LIVE_DRIFT if drift else Kind.LIVE_REPLAY
    return Plan(_spec(dispatch_id, rng.choice(SCRIPTED_TYPES)), kind, script, False, outcome)


def _opposite(outcome: Outcome) -> Outcome:
    return Outcome.FAILED if outcome is Outcome.SUCCEEDED else Outcome.SUCCEEDED


def _script(
    rng: random.Random, shape: tuple[FindingKind, ...], base_ms: int, horizon_ms: int
) -> Script:
    switches = sorted(base_ms + rng.randrange(0, horizon_ms) for _ in shape[1:])
    return Script(shape, tuple(switches))


def _spec(dispatch_id: str, action_type: str) -> DispatchSpec:
    return DispatchSpec(
        dispatch_id=dispatch_id,
        approval_request_id=f"ar-{dispatch_id}",
        project_id=f"proj-{zlib.crc32(dispatch_id.encode()) % 7}",
        action_type=action_type,
        action_digest=digest_of({"type": action_type, "dispatch": dispatch_id}),
        idempotency_key=f"idem-{dispatch_id}",
    )


def write_scripts(conn: psycopg.Connection[Any], plans: list[Plan]) -> None:
    """Insert the evidence scripts (idempotent: a retried wave writes the same rows)."""
    conn.execute(SCRIPT_TABLE_DDL)
    rows = [
        (
            p.spec.dispatch_id,
            digest_of({"tampered": p.spec.dispatch_id}) if p.tampered else p.spec.action_digest,
            p.spec.idempotency_key,
            [k.value for k in p.script.kinds],
            list(p.script.until_ms),
            p.script.result_code,
        )
        for p in plans
        if p.script is not None
    ]
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO scripted_evidence VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            rows,
        )


T = TypeVar("T")


def retrying(call: Callable[[], T], history: History, f: str, deadline: float, **value: Any) -> T:
    """Retries storage failures (recording each as `info`) until the bounded deadline."""
    while True:
        history.record("invoke", f, **value)
        try:
            result = call()
        except StorageUnavailable:
            history.record("info", f, **value)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)  # back off while PostgreSQL is down or cut off
            continue
        if f != "complete":  # the caller records a completion's answer with its result
            history.record("ok", f, **value)
        return result


def seed_crashed(store: Storage, plan: Plan, history: History, lease_s: float) -> None:
    """An executor that crossed the barrier and died: create, lease, start, nothing more."""
    client = ExecutionClient(store, owner=f"seed-{plan.spec.dispatch_id}", lease_seconds=lease_s)
    deadline = time.monotonic() + 60
    d = plan.spec.dispatch_id
    retrying(lambda: client.create_dispatch(plan.spec), history, "create", deadline, dispatch_id=d)
    try:
        lease = retrying(lambda: client.lease(d), history, "lease", deadline, dispatch_id=d)
    except LOST_WRITE_ANSWERS as exc:
        # NotLeasable: our unknown lease won; never started. NotFound: the create was lost.
        history.record("fail", "lease", dispatch_id=d, error=type(exc).__name__)
        return
    _start(client, lease, history, deadline)


def _start(
    client: ExecutionClient, lease: ExecutionLease, history: History, deadline: float
) -> ExecutionLease | None:
    d = lease.dispatch_id
    history.record("invoke", "start", dispatch_id=d)
    try:
        started = client.start(lease)
    except StorageUnavailable:
        history.record("info", "start", dispatch_id=d)
        return None
    except LOST_WRITE_ANSWERS as exc:
        history.record("fail", "start", dispatch_id=d, error=type(exc).__name__)
        return None
    history.record("ok", "start", dispatch_id=d, **_lease_fields(started))
    return started


def _lease_fields(lease: ExecutionLease) -> dict[str, Any]:
    return {"version": lease.version, "lease_expires_at_ms": lease.lease_expires_at_ms}


@dataclass
class LiveExecutor:
    """A slow but alive executor: works in stretches that sometimes outlast its lease,
    renews between them, and completes late."""

    store: Storage
    history: History
    rng: random.Random
    lease_seconds: float

    def run(self, plan: Plan) -> None:
        d = plan.spec.dispatch_id
        client = ExecutionClient(self.store, owner=f"exec-{d}", lease_seconds=self.lease_seconds)
        deadline = time.monotonic() + 90
        retrying(
            lambda: client.create_dispatch(plan.spec),
            self.history,
            "create",
            deadline,
            dispatch_id=d,
        )
        try:
            lease = retrying(
                lambda: client.lease(d), self.history, "lease", deadline, dispatch_id=d
            )
        except LOST_WRITE_ANSWERS as exc:
            self.history.record("fail", "lease", dispatch_id=d, error=type(exc).__name__)
            return
        started = _start(client, lease, self.history, deadline)
        if started is None:
            return
        current: ExecutionLease | None = started
        for _ in range(self.rng.randrange(0, 4)):
            self._work()
            current = self._renew(client, current)
            if current is None:
                break
        self._work()
        self._complete(client, current or started, plan)

    def _work(self) -> None:
        # The side effect takes a while: sometimes longer than the lease (a stalled executor).
        time.sleep(self.rng.uniform(0.2, 1.5) * self.lease_seconds)

    def _renew(self, client: ExecutionClient, lease: ExecutionLease) -> ExecutionLease | None:
        d = lease.dispatch_id
        self.history.record("invoke", "renew", dispatch_id=d, version=lease.version)
        try:
            renewed = client.renew(lease)
        except StorageUnavailable:
            self.history.record("info", "renew", dispatch_id=d, version=lease.version)
            return None
        except LOST_WRITE_ANSWERS as exc:
            self.history.record("fail", "renew", dispatch_id=d, error=type(exc).__name__)
            return None
        self.history.record("ok", "renew", dispatch_id=d, **_lease_fields(renewed))
        return renewed

    def _complete(self, client: ExecutionClient, lease: ExecutionLease, plan: Plan) -> None:
        assert plan.executor_outcome is not None
        d = lease.dispatch_id
        completion = Completion(
            plan.executor_outcome,
            "ok",
            f"done-{d}",
            plan.expected_digest(plan.executor_outcome),
        )
        value = {"dispatch_id": d, "version": lease.version, "outcome": completion.outcome.value}
        deadline = time.monotonic() + 60
        try:
            result = retrying(
                lambda: client.complete(lease, completion),
                self.history,
                "complete",
                deadline,
                **value,
            )
        except LOST_WRITE_ANSWERS as exc:
            self.history.record("fail", "complete", **value, error=type(exc).__name__)
            return
        except StorageUnavailable:
            return  # already recorded as info; the outcome stays unknown
        self.history.record("ok", "complete", **value, result=result.value)


def executor_history(directory: Path, name: str) -> FileHistory:
    return FileHistory(directory / f"{name}.jsonl", name)
