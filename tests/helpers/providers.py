"""Helpers around the scripted provider: fixed findings, a registry, a reconciler for tests."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from resolver.core.declarations import DeclaredFactory
from resolver.core.domain import DispatchIdentity, Finding, FindingKind, Outcome
from resolver.core.provider import ProviderRegistry, installed_declarations
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver_test_support.scripted import ScriptedProvider, verified
from tests.helpers.stores import Storage

__all__ = ["ScriptedProvider", "fixed", "reconciler", "registry", "scripted_as", "verified"]


def fixed(kind: FindingKind) -> Callable[[DispatchIdentity], Finding]:
    if kind is FindingKind.VERIFIED_SUCCEEDED:
        return verified
    if kind is FindingKind.VERIFIED_FAILED:
        return lambda i: verified(i, Outcome.FAILED)
    return lambda _i: Finding(kind)


def scripted_as(
    name: str, answer: Callable[[DispatchIdentity], Finding]
) -> Callable[[Mapping[str, Any]], ScriptedProvider]:
    """A factory of scripted findings that declares what the installed provider `name`
    declares (its windows, its reasons), as the registry reads it; a name no installed
    provider has declares nothing."""
    declared = installed_declarations().get(name)

    def build(_settings: Mapping[str, Any]) -> ScriptedProvider:
        return ScriptedProvider(answer)

    return build if declared is None else DeclaredFactory(build, declared)


def registry(
    action_type: str, provider: object, more_action_types: tuple[str, ...] = ()
) -> ProviderRegistry:
    """One provider answering for `action_type` (and `more_action_types`)."""
    types = (action_type, *more_action_types)
    return ProviderRegistry(dict.fromkeys(types, provider))  # type: ignore[arg-type]


REC_LEASE_MS = 30_000


def reconciler(
    store: Storage,
    provider: object,
    owner: str = "replica-a",
    page_size: int = 16,
    action_type: str = "test.action",
    more_action_types: tuple[str, ...] = (),
) -> Reconciler:
    """A replica whose one provider answers for `action_type` (and `more_action_types`)."""
    return Reconciler(
        store,
        registry(action_type, provider, more_action_types),
        ReconcilerSettings(
            owner=owner,
            page_size=page_size,
            recovery_lease_ms=REC_LEASE_MS,
            backoff_base_ms=1_000,
            backoff_max_ms=8_000,
        ),
        Runtime(rng=random.Random(7)),
    )
