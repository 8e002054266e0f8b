"""Observability: metrics, health endpoints, traces and logs, wired in by the composition root.

The cycle's metrics (`metrics.ResolverMetrics`), spans (`tracing.CycleTrace`), log lines
(`logs.CycleLog`) and heartbeat (`health.Heartbeat`) are subscribers of `resolver.core.events`.
"""
