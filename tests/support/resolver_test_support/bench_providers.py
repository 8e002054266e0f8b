"""Benchmark-only providers: fabricated verified findings at zero or a fixed latency.

They measure the resolver's own overhead and are never evidence: each refuses to start
unless its config says `benchmark_only: true`, so a production config cannot pick one by
accident.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from resolver.core.domain import DispatchIdentity, Finding, Outcome, sha256_hex
from resolver.core.errors import ConfigError
from resolver.core.provider import Capability

_ALLOWED = frozenset({"benchmark_only", "latency_ms", "timeout_seconds"})


class BenchmarkProvider:
    """Answers `verified_succeeded` for every dispatch after `latency_ms` (default 0)."""

    capability = Capability.AUTOMATIC

    def __init__(self, settings: Mapping[str, Any]) -> None:
        unknown = set(settings) - _ALLOWED
        if unknown:
            raise ConfigError(f"unknown benchmark provider settings {sorted(unknown)}")
        if settings.get("benchmark_only") is not True:
            raise ConfigError(
                "benchmark providers fabricate evidence; set benchmark_only: true to use one "
                "(never in production)"
            )
        self.latency_seconds = float(settings.get("latency_ms", 0)) / 1000
        self.timeout_seconds = float(settings.get("timeout_seconds", 2.0))
        if not 0 <= self.latency_seconds < self.timeout_seconds:
            raise ConfigError("latency_ms must be >= 0 and below timeout_seconds")

    def inspect(self, identity: DispatchIdentity) -> Finding:
        if self.latency_seconds:
            time.sleep(self.latency_seconds)
        digest = sha256_hex(f"benchmark:{identity.dispatch_id}:{identity.attempt}")
        return Finding.verified(Outcome.SUCCEEDED, digest, "ok")


def instant(settings: Mapping[str, Any]) -> BenchmarkProvider:
    """Entry point `bench_instant`: zero latency."""
    return BenchmarkProvider({**settings, "latency_ms": settings.get("latency_ms", 0)})


def delayed(settings: Mapping[str, Any]) -> BenchmarkProvider:
    """Entry point `bench_delayed`: 5 ms per inspect unless `latency_ms` says otherwise."""
    return BenchmarkProvider({**settings, "latency_ms": settings.get("latency_ms", 5)})
