"""Metrics, traces, logs and the HTTP endpoints."""
