"""Traces: OpenTelemetry's no-op tracer unless the standard OTEL_* variables ask for export,
and the cycle's spans, made by a subscriber of the cycle events."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opentelemetry.context import Context
from opentelemetry.trace import NoOpTracer, Span, Status, StatusCode, Tracer, set_span_in_context

from resolver import __version__
from resolver.core.domain import ClaimedItem, CommitReport, ItemOutcome
from resolver.core.errors import ConfigError
from resolver.core.events import CycleEvents, CycleReport, InspectedPage, Stage

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

DEFAULT_SERVICE_NAME = "approved-action-resolver"
TRACER_NAME = "resolver"
_OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_HTTP_PROTOBUF = "http/protobuf"


@dataclass(frozen=True, slots=True)
class Tracing:
    """A tracer and how to flush it at shutdown (a no-op when tracing is off)."""

    tracer: Tracer = field(default_factory=NoOpTracer)
    shutdown: Callable[[], None] = lambda: None

    @property
    def enabled(self) -> bool:
        return not isinstance(self.tracer, NoOpTracer)


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


class CycleTrace(CycleEvents):
    """One trace per cycle: a `resolver.cycle` span, parent of the claim, inspect, commit and
    release spans.

    Child spans are made after the fact with the times the events carry, on the cycle's
    thread, so no context travels into the inspect pool and no span is left open across a
    phase. Only added when the tracer records (see `resolver.core.runtime`).
    """

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._owner = ""
        self._cycle: Span | None = None
        self._context: Context | None = None
        self._mark_ns = 0  # start of the phase in progress

    def cycle_started(self, owner: str) -> None:
        self._owner = owner
        self._mark_ns = time.time_ns()
        self._cycle = self._tracer.start_span("resolver.cycle", start_time=self._mark_ns)
        self._context = set_span_in_context(self._cycle)

    def claimed(self, items: Sequence[ClaimedItem], seconds: float) -> None:
        self._child("resolver.claim", self._mark_ns, {"resolver.claimed": len(items)})
        self._mark_ns = time.time_ns()

    def released(self, items: Sequence[ClaimedItem], released: int, seconds: float) -> None:
        now = time.time_ns()
        self._child("resolver.release", now - int(seconds * 1e9), {"resolver.released": released})

    def inspected(self, page: InspectedPage) -> None:
        for call in page.calls:
            end_ns = call.started_ns + int(call.seconds * 1e9)
            for identity in call.identities:
                attributes = {
                    "resolver.provider": call.label,
                    "resolver.action_type": identity.action_type,
                    "resolver.dispatch_id": identity.dispatch_id,
                    "resolver.finding": call.findings[identity.dispatch_id].kind.value,
                }
                if call.failure is not None:
                    attributes["resolver.provider_failure"] = call.failure.value
                span = self._tracer.start_span(
                    "resolver.inspect",
                    context=self._context,
                    start_time=call.started_ns,
                    attributes=attributes,
                )
                span.end(end_time=end_ns)

    def before_commit(self, outcomes: Sequence[ItemOutcome]) -> None:
        self._mark_ns = time.time_ns()

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        self._child(
            "resolver.commit",
            self._mark_ns,
            {
                "resolver.items": len(outcomes),
                "resolver.accepted": len(report.accepted),
                "resolver.fence_rejected": len(report.rejected),
            },
        )

    def cycle_completed(self, report: CycleReport, seconds: float) -> None:
        if self._cycle is None:
            return
        self._cycle.set_attributes(
            {
                "resolver.replica_id": self._owner,
                "resolver.claimed": report.claimed,
                "resolver.accepted": len(report.accepted),
                "resolver.fence_rejected": len(report.rejected),
                "resolver.released": report.released,
            }
        )
        self._end()

    def cycle_failed(self, stage: Stage, error: BaseException, seconds: float) -> None:
        if self._cycle is None:
            return
        if stage is not Stage.INSPECT:  # the claim, commit or release statement failed
            span = self._tracer.start_span(
                f"resolver.{stage.value}", context=self._context, start_time=self._mark_ns
            )
            _failed(span, error)
            span.end()
        self._cycle.set_attribute("resolver.replica_id", self._owner)
        _failed(self._cycle, error)
        self._end()

    def _child(self, name: str, start_ns: int, attributes: dict[str, int]) -> None:
        span = self._tracer.start_span(
            name, context=self._context, start_time=start_ns, attributes=attributes
        )
        span.end()

    def _end(self) -> None:
        assert self._cycle is not None
        self._cycle.end()
        self._cycle = self._context = None


def _failed(span: Span, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
