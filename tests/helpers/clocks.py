"""A clock a test moves by hand: code that takes a `clock` callable (monotonic seconds) reads
`now`, which the test sets or advances instead of waiting."""

from __future__ import annotations


class FakeClock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
