"""The bundle a long-running component gets from the composition root instead of globals.

After River's `baseservice.Archetype`: one clock, one source of randomness, the logger, and
the cycle-event subscribers. The algorithm builds only its own heartbeat (liveness); logs,
metrics, traces and the providers' health are telemetry, which the composition root
(`resolver.app.composition`) builds and hands in as `subscribers`. The default costs
nothing: the heartbeat alone.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from resolver.core.events import CycleEvents, Fanout
from resolver.core.liveness import Heartbeat


def _logger() -> Any:
    return structlog.get_logger("resolver")


@dataclass(frozen=True)
class Runtime:
    """`events` is every subscriber in one: the heartbeat (on `clock`), then `subscribers`
    in order (the composition root's logs, metrics, traces and providers' health, test hooks
    installed by other distributions, a benchmark's timers)."""

    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    logger: Any = field(default_factory=_logger)
    subscribers: tuple[CycleEvents, ...] = ()
    heartbeat: Heartbeat = field(init=False)
    events: Fanout = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "heartbeat", Heartbeat(self.clock))
        object.__setattr__(self, "events", Fanout([self.heartbeat, *self.subscribers]))
