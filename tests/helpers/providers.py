"""Scripted evidence providers for tests: deterministic findings, recorded calls."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

from resolver.core.domain import (
    DispatchIdentity,
    Finding,
    FindingKind,
    Outcome,
    sha256_hex,
)
from resolver.core.provider import Capability, ProviderRegistry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.db.repository import PostgresStore


def verified(identity: DispatchIdentity, outcome: Outcome = Outcome.SUCCEEDED) -> Finding:
    return Finding.verified(outcome, sha256_hex(f"receipt:{identity.dispatch_id}"), "ok")


class ScriptedProvider:
    """Answers from a function of the identity; records every inspect call."""

    capability = Capability.AUTOMATIC

    def __init__(
        self,
        answer: Callable[[DispatchIdentity], Finding],
        *,
        timeout_seconds: float = 2.0,
        gate: threading.Event | None = None,
        entered: threading.Event | None = None,
    ) -> None:
        self._answer = answer
        self.timeout_seconds = timeout_seconds
        self.calls: list[DispatchIdentity] = []
        self._lock = threading.Lock()
        self._gate = gate
        self._entered = entered

    def inspect(self, identity: DispatchIdentity) -> Finding:
        with self._lock:
            self.calls.append(identity)
        if self._entered is not None:
            self._entered.set()
        if self._gate is not None:
            self._gate.wait(10)
        return self._answer(identity)


def fixed(kind: FindingKind) -> Callable[[DispatchIdentity], Finding]:
    if kind is FindingKind.VERIFIED_SUCCEEDED:
        return verified
    if kind is FindingKind.VERIFIED_FAILED:
        return lambda i: verified(i, Outcome.FAILED)
    return lambda _i: Finding(kind)


def registry(action_type: str, provider: object) -> ProviderRegistry:
    return ProviderRegistry({action_type: provider})  # type: ignore[dict-item]


REC_LEASE_MS = 30_000


def reconciler(
    store: PostgresStore,
    provider: object,
    owner: str = "replica-a",
    page_size: int = 16,
    action_type: str = "test.action",
) -> Reconciler:
    return Reconciler(
        store,
        registry(action_type, provider),
        ReconcilerSettings(
            owner=owner,
            page_size=page_size,
            recovery_lease_ms=REC_LEASE_MS,
            backoff_base_ms=1_000,
            backoff_max_ms=8_000,
        ),
        Runtime(rng=random.Random(7)),
    )
