"""Backoff is capped, exponential and jittered within its bounds."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from resolver.core.provider import ProviderRegistry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime


class _NoStore:
    pass


def _reconciler(seed: int) -> Reconciler:
    settings = ReconcilerSettings(owner="r", backoff_base_ms=1_000, backoff_max_ms=60_000)
    return Reconciler(_NoStore(), ProviderRegistry({}), settings, Runtime(rng=random.Random(seed)))  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=0, max_value=2**32))
def test_backoff_stays_within_equal_jitter_bounds(count: int, seed: int) -> None:
    rec = _reconciler(seed)
    ceiling = min(60_000, 1_000 * 2 ** min(count, 30))
    delay = rec.backoff_ms(count)
    rec.close()
    assert ceiling // 2 <= delay <= ceiling


def test_backoff_grows_then_caps() -> None:
    rec = _reconciler(1)
    lows = [rec.backoff_ms(n) for n in range(10)]
    rec.close()
    assert lows[0] <= 1_000 and lows[3] >= 4_000 and max(lows) <= 60_000
