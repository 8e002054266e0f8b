"""Traces: off (no tracer) unless the standard OTEL_* variables ask for export; the cycle's
spans are made by a subscriber of the cycle events (`resolver.telemetry.cycle_trace`).

The OpenTelemetry API and SDK are imported only when tracing is on: a replica without
OTEL_* loads neither at start-up."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import msgspec

from resolver import __version__
from resolver.core.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

DEFAULT_SERVICE_NAME = "approved-action-resolver"
TRACER_NAME = "resolver"
_OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_HTTP_PROTOBUF = "http/protobuf"


class Tracing(msgspec.Struct, frozen=True):
    """A tracer and how to flush it at shutdown (no tracer when tracing is off)."""

    tracer: Tracer | None = None
    shutdown: Callable[[], None] = lambda: None

    @property
    def enabled(self) -> bool:
        return self.tracer is not None


def exporters_requested(environ: Mapping[str, str]) -> list[str]:
    """Exporter names from OTEL_TRACES_EXPORTER; tracing is off by default.

    Off when OTEL_SDK_DISABLED is true or the exporter is `none`; with no exporter named,
    on (`otlp`) only when an OTLP endpoint variable is set.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    raw = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not raw:
        return ["otlp"] if any(environ.get(name) for name in _OTLP_ENDPOINTS) else []
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if names == ["none"]:
        return []
    unknown = sorted(set(names) - {"otlp", "console"})
    if unknown:
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER: {', '.join(unknown)} is not supported; use otlp, console "
            "or none"
        )
    return names


def tracing_from_env(replica_id: str) -> Tracing:
    """Tracing as the process's OTEL_* variables configure it, read at call time (never at
    import). The OTLP exporter reads its own OTEL_EXPORTER_OTLP_* variables (endpoint,
    headers, timeout, compression) from the same environment."""
    env = os.environ
    names = exporters_requested(env)
    if not names:
        return Tracing()
    # The SDK is imported only when tracing is on: a replica without OTEL_* skips its
    # import at start-up.
    from opentelemetry.sdk.resources import (
        SERVICE_INSTANCE_ID,
        SERVICE_NAME,
        SERVICE_VERSION,
        Resource,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporters = [_exporter(name, env) for name in names]
    attributes = {SERVICE_INSTANCE_ID: replica_id, SERVICE_VERSION: __version__}
    if not env.get("OTEL_SERVICE_NAME"):
        attributes[SERVICE_NAME] = DEFAULT_SERVICE_NAME
    # Resource.create also merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME.
    provider = TracerProvider(resource=Resource.create(attributes))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider.get_tracer(TRACER_NAME, __version__), provider.shutdown)


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or _HTTP_PROTOBUF
    )
    if protocol.strip().lower() != _HTTP_PROTOBUF:
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: only {_HTTP_PROTOBUF} is supported "
            "(collectors accept it on port 4318)"
        )
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise ConfigError(
            "OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter: install "
            "approved-action-resolver[otlp]"
        ) from None
    return OTLPSpanExporter()
