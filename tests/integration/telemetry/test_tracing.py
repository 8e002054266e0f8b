"""Spans of a real cycle: in memory, and exported over OTLP/HTTP to a loopback receiver."""

from __future__ import annotations

import gzip
import random
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer, StatusCode, Tracer

from resolver.app.composition import Telemetry, build_telemetry
from resolver.core.domain import FindingKind
from resolver.core.errors import ConfigError, StorageUnavailable
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.telemetry.tracing import exporters_requested, tracing_from_env
from tests.helpers.database import EXEC_LEASE_MS, T0, World
from tests.helpers.providers import ScriptedProvider, fixed, registry, verified
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> Tracer:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test")


def reconciler(store: Storage, provider: object, tracer: Tracer) -> Reconciler:
    return Reconciler(
        store,
        registry("test.action", provider),
        ReconcilerSettings(owner="replica-t", recovery_lease_ms=30_000),
        Runtime(rng=random.Random(1), subscribers=build_telemetry(tracer=tracer).subscribers),
    )


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def test_a_cycle_is_one_trace_with_claim_inspect_and_commit_children(
    world: World, store: Storage, tracer: Tracer, exporter: InMemorySpanExporter
) -> None:
    leases = world.crashed(2)
    rec = reconciler(store, ScriptedProvider(verified), tracer)
    try:
        rec.at(AFTER).run_cycle()
    finally:
        rec.close()
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == [
        "resolver.claim",
        "resolver.commit",
        "resolver.cycle",
        "resolver.inspect",
        "resolver.inspect",
    ]
    (cycle,) = by_name(spans, "resolver.cycle")
    assert cycle.parent is None and cycle.context is not None
    for child in spans:
        if child is not cycle:
            assert child.parent is not None and child.parent.span_id == cycle.context.span_id
            assert child.context is not None
            assert child.context.trace_id == cycle.context.trace_id
    assert cycle.attributes is not None
    assert cycle.attributes["resolver.replica_id"] == "replica-t"
    assert cycle.attributes["resolver.claimed"] == cycle.attributes["resolver.accepted"] == 2
    inspects = by_name(spans, "resolver.inspect")
    assert {dict(s.attributes or {})["resolver.dispatch_id"] for s in inspects} == {
        x.dispatch_id for x in leases
    }
    for span in inspects:
        attrs = dict(span.attributes or {})
        assert attrs["resolver.provider"] == "ScriptedProvider"
        assert attrs["resolver.action_type"] == "test.action"
        assert attrs["resolver.finding"] == "verified_succeeded"
        assert "resolver.provider_failure" not in attrs
        assert span.start_time is not None and span.end_time is not None
        assert cycle.start_time is not None and cycle.end_time is not None
        assert cycle.start_time <= span.start_time <= span.end_time <= cycle.end_time
    (commit,) = by_name(spans, "resolver.commit")
    assert dict(commit.attributes or {})["resolver.accepted"] == 2


def test_a_timed_out_inspection_is_marked_on_its_span(
    world: World, store: Storage, tracer: Tracer, exporter: InMemorySpanExporter
) -> None:
    world.crashed(1)
    gate = threading.Event()
    rec = reconciler(store, ScriptedProvider(verified, timeout_seconds=0.1, gate=gate), tracer)
    try:
        rec.at(AFTER).run_cycle()
    finally:
        gate.set()
        rec.close()
    (inspect,) = by_name(exporter.get_finished_spans(), "resolver.inspect")
    attrs = dict(inspect.attributes or {})
    assert (attrs["resolver.finding"], attrs["resolver.provider_failure"]) == (
        "unavailable",
        "timeout",
    )


def test_a_storage_failure_ends_the_cycle_span_in_error(
    tracer: Tracer, exporter: InMemorySpanExporter
) -> None:
    dead = Storage("postgresql://postgres@127.0.0.1:1/nowhere", connect_timeout_seconds=1)
    dead.open()
    rec = reconciler(dead, ScriptedProvider(fixed(FindingKind.MISSING)), tracer)
    try:
        with pytest.raises(StorageUnavailable):
            rec.run_cycle()
    finally:
        rec.close()
        dead.close()
    spans = exporter.get_finished_spans()
    (cycle,) = by_name(spans, "resolver.cycle")
    assert cycle.status.status_code is StatusCode.ERROR
    assert [e.name for e in cycle.events] == ["exception"]
    # The statement that failed is the claim: its span, a child of the cycle, is in error too.
    (claim,) = by_name(spans, "resolver.claim")
    assert claim.status.status_code is StatusCode.ERROR
    assert claim.parent is not None and cycle.context is not None
    assert claim.parent.span_id == cycle.context.span_id


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "otlp,console"}, ["otlp", "console"]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, []),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, []),
    ],
)
def test_tracing_is_off_unless_the_otel_variables_ask(
    environ: dict[str, str], expected: list[str]
) -> None:
    assert exporters_requested(environ) == expected


def test_an_unknown_exporter_or_protocol_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError, match="zipkin"):
        exporters_requested({"OTEL_TRACES_EXPORTER": "zipkin"})
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(ConfigError, match="http/protobuf"):
        tracing_from_env("r")


def test_by_default_there_is_no_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    tracing = tracing_from_env("r")
    assert tracing.tracer is None and not tracing.enabled


def test_neither_no_tracer_nor_the_no_op_one_adds_a_span_subscriber(tracer: Tracer) -> None:
    from resolver.telemetry.cycle_trace import CycleTrace

    def traced(telemetry: Telemetry) -> bool:
        return any(isinstance(s, CycleTrace) for s in telemetry.subscribers)

    assert not traced(build_telemetry())
    assert not traced(build_telemetry(tracer=NoOpTracer()))
    assert traced(build_telemetry(tracer=tracer))


class Collector:
    """A minimal OTLP/HTTP trace receiver on loopback: keeps every decoded request."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        received = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.append(request)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/traces"

    def span_names(self) -> list[str]:
        return [
            span.name
            for request in self.requests
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]

    def resource_attributes(self) -> dict[str, str]:
        return {
            kv.key: kv.value.string_value
            for request in self.requests
            for resource_spans in request.resource_spans
            for kv in resource_spans.resource.attributes
        }


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    c.thread.start()
    yield c
    c.httpd.shutdown()
    c.httpd.server_close()


def test_spans_are_exported_over_otlp_when_configured(
    world: World, store: Storage, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.endpoint)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "resolver-under-test")
    world.crashed(1)
    tracing = tracing_from_env("replica-otlp")
    assert tracing.enabled
    rec = reconciler(store, ScriptedProvider(verified), tracing.tracer)
    try:
        rec.at(AFTER).run_cycle()
    finally:
        rec.close()
        tracing.shutdown()  # flushes the batch processor: the export happens here
    assert sorted(collector.span_names()) == [
        "resolver.claim",
        "resolver.commit",
        "resolver.cycle",
        "resolver.inspect",
    ]
    resource = collector.resource_attributes()
    assert resource["service.name"] == "resolver-under-test"
    assert resource["service.instance.id"] == "replica-otlp"
