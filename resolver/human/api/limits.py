"""How fast one account may decide: a token bucket per user, per replica."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class RateLimiter:
    """Token bucket per user, per replica: bounds how fast one account can decide."""

    per_minute: int = 30
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allow(self, user_id: str, cost: int = 1) -> bool:
        """Take `cost` tokens (a bulk request takes more than one) or none if too few are left."""
        rate = self.per_minute / 60.0
        with self._lock:
            now = self.clock()
            tokens, at = self._buckets.get(user_id, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - at) * rate)
            allowed = tokens >= cost
            self._buckets[user_id] = (tokens - cost if allowed else tokens, now)
            return allowed
