"""Backoff is capped, exponential and jittered within its bounds: the formula as pure logic."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from resolver.core.reconciler import backoff_ms

BASE_MS, MAX_MS = 1_000, 60_000
draws = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


def _backoff(count: int, draw: float) -> int:
    return backoff_ms(count, base_ms=BASE_MS, max_ms=MAX_MS, draw=draw)


@given(st.integers(min_value=0, max_value=10_000), draws)
def test_backoff_stays_within_equal_jitter_bounds(count: int, draw: float) -> None:
    ceiling = min(MAX_MS, BASE_MS * 2 ** min(count, 30))
    assert ceiling // 2 <= _backoff(count, draw) <= ceiling


def test_backoff_grows_then_caps() -> None:
    lows = [_backoff(n, 0.0) for n in range(10)]
    highs = [_backoff(n, 0.999_999) for n in range(10)]
    assert lows[:7] == [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000]
    assert lows[7:] == [30_000] * 3 and max(highs) <= MAX_MS
    assert lows[0] <= 1_000 and lows[3] >= 4_000 and max(lows) <= 60_000


@given(st.integers(min_value=0, max_value=40), draws, draws)
def test_a_larger_draw_never_waits_less(count: int, a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert _backoff(count, low) <= _backoff(count, high)


def test_the_reconciler_draws_from_its_runtime() -> None:
    # The method is the formula fed by the runtime's seeded randomness, nothing more.
    import random

    from resolver.core.provider import ProviderRegistry
    from resolver.core.reconciler import Reconciler, ReconcilerSettings
    from resolver.core.runtime import Runtime

    settings = ReconcilerSettings(owner="r", backoff_base_ms=BASE_MS, backoff_max_ms=MAX_MS)
    rec = Reconciler(None, ProviderRegistry({}), settings, Runtime(rng=random.Random(7)))  # type: ignore[arg-type]
    try:
        got = [rec.backoff_ms(n) for n in range(5)]
    finally:
        rec.close()
    expected_draws = random.Random(7)
    assert got == [_backoff(n, expected_draws.random()) for n in range(5)]
