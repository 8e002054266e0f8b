"""Readiness (database reachable, schema at head, providers answering) for the probes.

Liveness (the loop is cycling) is the algorithm's own: `resolver.core.liveness`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from resolver.core.domain import ProviderFailure
from resolver.core.errors import ResolverError
from resolver.core.events import CycleEvents, InspectedPage
from resolver.core.liveness import Probe

log = structlog.get_logger("resolver.telemetry")


class ProviderHealth(CycleEvents):
    """A cycle-events subscriber: which providers could not answer in their latest page, why.

    `report()` feeds `/readyz`. A provider stays listed until a later page is inspected
    through it without a failure, so the answer does not flap between cycles; a provider
    with nothing to inspect keeps its last answer. Read from the probe's thread, hence the
    lock. (The `provider_failed` log line, once per page, is `CycleLog`'s.)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, dict[str, Any]] = {}

    def inspected(self, page: InspectedPage) -> None:
        if not page.calls:
            return
        troubles: dict[str, dict[str, Any]] = {}
        seen: set[str] = set()
        for call in page.calls:
            seen.add(call.label)
            if call.failure is not None:
                trouble = troubles.setdefault(
                    call.label, {"kinds": set(), "action_types": set(), "causes": set()}
                )
                trouble["kinds"].add(call.failure)
                if call.cause:
                    trouble["causes"].add(call.cause)
                trouble["action_types"].update(i.action_type for i in call.identities)
        with self._lock:
            for provider in seen:
                failed = troubles.get(provider)
                if failed is None:
                    self._latest.pop(provider, None)
                else:
                    self._latest[provider] = _trouble_detail(failed)

    def report(self) -> dict[str, dict[str, Any]]:
        """Provider name -> {kind, action_types} of every provider whose latest page failed."""
        with self._lock:
            return {name: dict(detail) for name, detail in sorted(self._latest.items())}


def _trouble_detail(trouble: dict[str, Any]) -> dict[str, Any]:
    kinds: set[ProviderFailure] = trouble["kinds"]
    # The kind that needs a human wins: an outage on top of a GRANT problem is still that.
    kind = next((k for k in kinds if k.needs_operator), next(iter(sorted(kinds))))
    detail: dict[str, Any] = {"kind": kind.value, "action_types": sorted(trouble["action_types"])}
    if trouble["causes"]:
        detail["causes"] = sorted(trouble["causes"])
    return detail


class ReadinessCheck:
    """Ready when PostgreSQL answers and its schema is at the revision this code needs.

    The answer is cached for `ttl_seconds` so probes from several sources do not open a
    connection each.
    """

    def __init__(
        self,
        ping: Callable[[], None],
        current_revision: Callable[[], str | None],
        head_revision: str,
        *,
        ttl_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        usable: Callable[[str | None], bool] = lambda _revision: False,
        providers: Callable[[], dict[str, dict[str, Any]]] | None = None,
    ) -> None:
        """`usable` may accept a revision other than head (a newer release's schema);
        `providers` (a `ProviderHealth.report`) lists providers that could not answer."""
        self._usable = usable
        self._providers = providers
        self._ping = ping
        self._current_revision = current_revision
        self._head = head_revision
        self._ttl = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, Probe] | None = None

    def __call__(self) -> Probe:
        with self._lock:
            if self._cached is None or self._clock() - self._cached[0] >= self._ttl:
                self._cached = (self._clock(), self._check())
            probe = self._cached[1]
        return self._with_providers(probe)

    def _with_providers(self, probe: Probe) -> Probe:
        """A failing provider degrades readiness but keeps the replica in service (200).

        Every replica shares the provider config, so a GRANT or query problem fails on all of
        them at once: taking them out of service would drop their /metrics from the Service
        (and with it the alert that names the provider) and stall rollouts, while every other
        action type still resolves. The alert and this detail are the signal instead.
        """
        troubles = self._providers() if self._providers is not None else {}
        if not probe.ok or not troubles:
            return probe
        needs_operator = any(ProviderFailure(t["kind"]).needs_operator for t in troubles.values())
        status = "degraded" if needs_operator else probe.detail.get("status", "ready")
        return Probe(True, {**probe.detail, "status": status, "providers": troubles})

    def _check(self) -> Probe:
        try:
            self._ping()
            current = self._current_revision()
        except ResolverError as exc:
            # The reason is a fixed word: the exception text may name hosts or users.
            log.warning("readiness_failed", error=type(exc).__name__)
            return Probe(False, {"status": "not_ready", "reason": "database_unreachable"})
        except Exception as exc:  # a probe answers 503, it never takes the endpoint down
            log.warning("readiness_failed", error=type(exc).__name__)
            return Probe(False, {"status": "not_ready", "reason": "check_failed"})
        if current != self._head and not self._usable(current):
            return Probe(
                False,
                {
                    "status": "not_ready",
                    "reason": "schema_mismatch",
                    "schema_revision": current,
                    "expected_revision": self._head,
                },
            )
        detail = {"status": "ready", "schema_revision": current}
        if current != self._head:
            detail["expected_revision"] = self._head
        return Probe(True, detail)
