"""Throughput, scan-cost and idle-write figures of the resolver (docs/performance.md)."""
