"""The bundle a long-running component gets from the composition root instead of globals.

After River's `baseservice.Archetype`: one clock, one source of randomness, the logger, the
tracer and the metrics, and the cycle-event subscribers built from them. The defaults cost
nothing: no metrics, no tracer (no tracing subscriber, and the OpenTelemetry API is not
even imported), logs only.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from resolver.core.events import CycleEvents, Fanout
from resolver.telemetry.health import Heartbeat, ProviderHealth
from resolver.telemetry.logs import CycleLog
from resolver.telemetry.metrics import ResolverMetrics

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer


def _logger() -> Any:
    return structlog.get_logger("resolver")


@dataclass(frozen=True)
class Runtime:
    """`events` is every subscriber in one: the heartbeat (on `clock`), the providers' health
    (for readiness), logs, metrics (when
    given), traces (when the tracer records), then `subscribers` (test hooks installed by
    other distributions, a benchmark's timers)."""

    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    logger: Any = field(default_factory=_logger)
    tracer: Tracer | None = None
    metrics: ResolverMetrics | None = None
    subscribers: tuple[CycleEvents, ...] = ()
    heartbeat: Heartbeat = field(init=False)
    provider_health: ProviderHealth = field(init=False)
    events: Fanout = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "heartbeat", Heartbeat(self.clock))
        object.__setattr__(self, "provider_health", ProviderHealth())
        standard: list[CycleEvents] = [
            self.heartbeat,
            self.provider_health,
            CycleLog(self.logger),
        ]
        if self.metrics is not None:
            standard.append(self.metrics)
        if self.tracer is not None and _records(self.tracer):
            from resolver.telemetry.cycle_trace import CycleTrace

            standard.append(CycleTrace(self.tracer))
        object.__setattr__(self, "events", Fanout([*standard, *self.subscribers]))


def _records(tracer: Tracer) -> bool:
    # Imported only with a tracer given, which the caller has imported the API to make.
    from opentelemetry.trace import NoOpTracer

    return not isinstance(tracer, NoOpTracer)
