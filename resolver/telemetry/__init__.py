"""Observability: metrics, health endpoints and traces, wired in by the composition root."""

from resolver.telemetry.observer import NullObserver, RecoveryObserver, Telemetry

__all__ = ["NullObserver", "RecoveryObserver", "Telemetry"]
