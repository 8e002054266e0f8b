"""Prometheus metrics of the manual-resolution API process; implements `ApiObserver`."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from resolver.core.domain import Decision, ExecutionState, ManualResult, ResolutionSource
from resolver.telemetry.metrics import LATENCY_BUCKETS, PREFIX, resolutions_counter

MANUAL_OUTCOMES = tuple(d.terminal_state for d in Decision)
TOKEN_REJECTION_REASONS = (
    "missing",
    "malformed",
    "unknown_key",
    "algorithm",
    "signature",
    "expired",
    "audience",
    "issuer",
    "claims",
    "invalid",
)


class ApiMetrics:
    """The API's metrics on one registry (never the process-global one)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # The worker's family, not a twin: committed manual decisions are resolutions too.
        self.resolutions = resolutions_counter(registry)
        self.replays = Counter(
            f"{PREFIX}_manual_decision_replays",
            "Manual decisions answered as an idempotent replay of a committed one, by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.requests = Counter(
            f"{PREFIX}_api_requests",
            "Manual-resolution API requests by route template and status class.",
            ["route", "status_class"],
            registry=registry,
        )
        self.request_seconds = Histogram(
            f"{PREFIX}_api_request_duration_seconds",
            "Manual-resolution API request time by route template.",
            ["route"],
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.token_rejections = Counter(
            f"{PREFIX}_api_token_rejections",
            "Bearer tokens refused, by reason class (never the token or its claims).",
            ["reason"],
            registry=registry,
        )
        self.step_ups = Counter(
            f"{PREFIX}_api_step_up_required",
            "Decisions answered 401 step_up_required (no strong factor, or authentication "
            "older than 5 minutes).",
            registry=registry,
        )
        # Known label values start at 0 so rate() and increase() see the first event.
        for outcome in MANUAL_OUTCOMES:
            self.resolutions.labels(ResolutionSource.MANUAL.value, outcome.value)
            self.replays.labels(outcome.value)
        for reason in TOKEN_REJECTION_REASONS:
            self.token_rejections.labels(reason)

    def request(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, f"{status // 100}xx").inc()
        self.request_seconds.labels(route).observe(seconds)

    def token_rejected(self, reason: str) -> None:
        known = reason if reason in TOKEN_REJECTION_REASONS else "invalid"
        self.token_rejections.labels(known).inc()

    def step_up_required(self) -> None:
        self.step_ups.inc()

    def decided(self, outcome: ExecutionState, result: ManualResult) -> None:
        if result is ManualResult.COMMITTED:
            self.resolutions.labels(ResolutionSource.MANUAL.value, outcome.value).inc()
        elif result is ManualResult.REPLAYED:
            self.replays.labels(outcome.value).inc()
        # A proposal settles nothing: it is counted when its confirmation commits.
