"""Waiting for the database at start: backoff, limit, stop request (a fake clock, no sleep)."""

from __future__ import annotations

import pytest

from resolver.app.lifecycle import wait_until_ready
from resolver.core.errors import ConfigError, SchemaNotReady, StorageUnavailable


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        self.now += seconds
        return False


def failing(times: int, error: Exception) -> tuple[list[int], object]:
    calls = [0]

    def check() -> None:
        calls[0] += 1
        if calls[0] <= times:
            raise error

    return calls, check


def test_backs_off_exponentially_up_to_the_cap_then_succeeds() -> None:
    clock = Clock()
    calls, check = failing(5, StorageUnavailable("down"))
    assert wait_until_ready(
        check, limit_seconds=60, max_delay_seconds=3, sleep=clock.sleep, clock=clock
    )  # type: ignore[arg-type]
    assert calls[0] == 6
    assert clock.sleeps == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_an_unmigrated_schema_is_waited_for_too() -> None:
    clock = Clock()
    calls, check = failing(2, SchemaNotReady("run `resolver migrate` first"))
    assert wait_until_ready(
        check, limit_seconds=60, max_delay_seconds=3, sleep=clock.sleep, clock=clock
    )  # type: ignore[arg-type]
    assert calls[0] == 3


def test_past_the_limit_the_last_error_is_raised_and_the_last_wait_is_trimmed() -> None:
    clock = Clock()
    _calls, check = failing(100, StorageUnavailable("still down"))
    with pytest.raises(StorageUnavailable, match="still down"):
        wait_until_ready(
            check, limit_seconds=4, max_delay_seconds=30, sleep=clock.sleep, clock=clock
        )  # type: ignore[arg-type]
    assert clock.sleeps == [0.5, 1.0, 2.0, 0.5]  # never past the limit
    assert clock.now == 4


def test_a_zero_limit_is_one_attempt() -> None:
    clock = Clock()
    _calls, check = failing(1, StorageUnavailable("down"))
    with pytest.raises(StorageUnavailable):
        wait_until_ready(
            check, limit_seconds=0, max_delay_seconds=1, sleep=clock.sleep, clock=clock
        )  # type: ignore[arg-type]
    assert clock.sleeps == []


def test_a_stop_request_ends_the_wait() -> None:
    retries: list[tuple[str, float]] = []
    _calls, check = failing(100, StorageUnavailable("down"))
    stopped = wait_until_ready(
        check,  # type: ignore[arg-type]
        limit_seconds=60,
        max_delay_seconds=1,
        sleep=lambda _s: True,
        on_retry=lambda exc, delay: retries.append((type(exc).__name__, delay)),
    )
    assert stopped is False and retries == [("StorageUnavailable", 0.5)]


def test_other_errors_are_not_retried() -> None:
    clock = Clock()
    _calls, check = failing(1, ConfigError("bad"))
    with pytest.raises(ConfigError):
        wait_until_ready(
            check, limit_seconds=60, max_delay_seconds=1, sleep=clock.sleep, clock=clock
        )  # type: ignore[arg-type]
    assert clock.sleeps == []
