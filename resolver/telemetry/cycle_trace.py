"""The cycle's spans: a subscriber of the cycle events, loaded only with a recording tracer.

Apart from `resolver.telemetry.tracing` so that a replica with tracing off (no `OTEL_*`
variable) never imports the OpenTelemetry API at start-up.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode, Tracer, set_span_in_context

from resolver.core.domain import ClaimedItem, CommitReport, ItemOutcome
from resolver.core.events import CycleEvents, CycleReport, InspectedPage, Stage


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
