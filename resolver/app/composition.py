"""Composition root: settings in, a wired replica (store, registry, runtime bundle,
reconciler, lifecycle) or API process out. Telemetry (logs, metrics, traces, the providers'
health) joins the algorithm here, as cycle-event subscribers: `resolver.core` builds none."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client import (
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

from resolver.app.config import Settings, load_provider_config, load_settings
from resolver.core.errors import ConfigError
from resolver.core.events import CycleEvents
from resolver.core.late_evidence import LateEvidenceSettings, LateEvidenceWatcher
from resolver.core.liveness import Probe, liveness_bound_seconds
from resolver.core.ports import BacklogReader
from resolver.core.provider import (
    ProviderRegistry,
    build_registry,
    installed_entry_points,
    installed_reasons,
)
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.replica import LoopSettings, Replica
from resolver.core.runtime import Runtime
from resolver.db import migrate
from resolver.db.connect import Pooler
from resolver.db.retention import PostgresRetention
from resolver.db.store import PostgresHandle, Stores
from resolver.telemetry import jsonlogs
from resolver.telemetry.api_metrics import ApiMetrics
from resolver.telemetry.health import ProviderHealth, ReadinessCheck
from resolver.telemetry.logs import CycleLog
from resolver.telemetry.metrics import (
    BacklogCollector,
    ResolverMetrics,
    register_build_info,
    register_liveness_bound,
)
from resolver.telemetry.retention_metrics import PruneCollector
from resolver.telemetry.server import ObservabilityServer
from resolver.telemetry.tracing import tracing_from_env

if TYPE_CHECKING:
    from fastapi import FastAPI
    from opentelemetry.trace import Tracer

    from resolver.human.auth import TokenVerifier


# Cycle-event subscriber factories `(Settings) -> CycleEvents | None` installed by other
# distributions (the test rig's history and crash injection); the product registers none.
SUBSCRIBER_GROUP = "resolver.cycle_subscribers"
log = structlog.get_logger("resolver.composition")


def configure_logging(level: str = "INFO") -> None:
    """Structured JSON logs on stderr; the fields are codes and ids, never secrets."""
    jsonlogs.configure(level)


def migration_policy(settings: Settings) -> migrate.MigrationPolicy:
    return migrate.MigrationPolicy(
        connect_timeout_seconds=settings.connect_timeout_seconds,
        lock_timeout_ms=settings.migration_lock_timeout_ms,
        attempts=settings.migration_attempts,
        retry_delay_seconds=settings.migration_retry_delay_seconds,
        pooler=settings.database_pooler,
    )


def open_store(settings: Settings) -> Stores:
    """One handle on the database for this process, and each port's store on it."""
    handle = PostgresHandle(
        settings.require_database_url(),
        max_connections=settings.max_connections,
        connect_timeout_seconds=settings.connect_timeout_seconds,
        statement_timeout_ms=settings.statement_timeout_ms,
        lock_timeout_ms=settings.lock_timeout_ms,
        application_name=f"resolver:{settings.replica_id}"[:63],
        pooler=settings.database_pooler,
    )
    handle.open()
    return Stores.over(handle)


def open_retention(settings: Settings) -> PostgresRetention:
    """The prune command's session: its own connection, each batch its own transaction."""
    return PostgresRetention(
        settings.require_database_url(),
        connect_timeout_seconds=settings.connect_timeout_seconds,
        pooler=settings.database_pooler,
    )


def load_registry(settings: Settings) -> ProviderRegistry:
    registry = build_registry(load_provider_config(settings.config))
    settings.check_lease_budget(registry.longest_timeout_seconds)
    return registry


@dataclass(frozen=True)
class Telemetry:
    """The subscribers telemetry hangs on the cycle events, in order: the providers' health
    (for readiness), logs, metrics (when given), traces (when the tracer records)."""

    provider_health: ProviderHealth
    metrics: ResolverMetrics | None
    subscribers: tuple[CycleEvents, ...]


def build_telemetry(
    logger: Any = None, *, metrics: ResolverMetrics | None = None, tracer: Tracer | None = None
) -> Telemetry:
    """Logs go to `logger` (the runtime's; by default the "resolver" logger). No tracer (or
    one that records nothing): no tracing subscriber, and the OpenTelemetry API is not even
    imported."""
    health = ProviderHealth()
    logs = CycleLog(logger if logger is not None else structlog.get_logger("resolver"))
    subscribers: list[CycleEvents] = [health, logs]
    if metrics is not None:
        subscribers.append(metrics)
    if tracer is not None and _records(tracer):
        from resolver.telemetry.cycle_trace import CycleTrace

        subscribers.append(CycleTrace(tracer))
    return Telemetry(health, metrics, tuple(subscribers))


def _records(tracer: Tracer) -> bool:
    # Imported only with a tracer given, which the caller has imported the API to make.
    from opentelemetry.trace import NoOpTracer

    return not isinstance(tracer, NoOpTracer)


class ReplicaService(Replica[Stores]):
    """A replica as `resolver run` wires it: the loop, and the telemetry its endpoints read."""

    def __init__(self, *args: Any, telemetry: Telemetry, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.telemetry = telemetry


def _process_metrics(registry: CollectorRegistry) -> None:
    # `_created` samples would double the series of every counter for no alert or panel.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)


def build_metrics(
    settings: Settings, store: Stores, registry: CollectorRegistry
) -> ResolverMetrics:
    """Every metric on `registry` (never the process-global one): tests pass a fresh one."""
    _process_metrics(registry)
    register_build_info(registry, migrate.head_revision())
    register_liveness_bound(registry, liveness_bound(settings))
    backlog = store.backlog
    registry.register(BacklogCollector(backlog, ttl_seconds=settings.metrics_cache_seconds))
    registry.register(PruneCollector(backlog, ttl_seconds=settings.metrics_cache_seconds))
    return ResolverMetrics(registry)


def liveness_bound(settings: Settings) -> float:
    """The /healthz bound of these settings (also exported, for the stall alert)."""
    return liveness_bound_seconds(
        cadence_seconds=settings.cadence_seconds,
        cadence_jitter_ratio=settings.cadence_jitter_ratio,
        storage_retry_max_seconds=settings.storage_retry_max_seconds,
        recovery_lease_seconds=settings.recovery_lease_seconds,
    )


def installed_subscribers(settings: Settings) -> list[CycleEvents]:
    """The subscribers that installed factories (entry points) activate for these settings."""
    active: list[CycleEvents] = []
    for point in sorted(installed_entry_points(SUBSCRIBER_GROUP), key=lambda p: p.name):
        subscriber = point.load()(settings)
        if subscriber is not None:
            # Loud on purpose: in a deployment, an active hook is a surprise worth a look.
            log.warning("cycle_subscriber_active", name=point.name, target=point.value)
            active.append(subscriber)
    return active


def build_replica(
    settings: Settings,
    registry: ProviderRegistry | None = None,
    *,
    metrics_registry: CollectorRegistry | None = None,
    subscribers: Sequence[CycleEvents] = (),
) -> ReplicaService:
    """A replica wired from settings, not started. `subscribers` join the standard and the
    installed ones (a benchmark's timers)."""
    registry = registry if registry is not None else load_registry(settings)
    tracing = tracing_from_env(settings.replica_id)
    store = open_store(settings)
    metrics_registry = metrics_registry if metrics_registry is not None else CollectorRegistry()
    logger = structlog.get_logger("resolver")
    telemetry = build_telemetry(
        logger, metrics=build_metrics(settings, store, metrics_registry), tracer=tracing.tracer
    )
    runtime = Runtime(
        logger=logger,
        subscribers=(*telemetry.subscribers, *installed_subscribers(settings), *subscribers),
    )
    reconciler = Reconciler(
        store.recovery,
        registry,
        ReconcilerSettings(
            owner=settings.replica_id,
            page_size=settings.page_size,
            recovery_lease_ms=int(settings.recovery_lease_seconds * 1000),
            backoff_base_ms=int(settings.backoff_base_seconds * 1000),
            backoff_max_ms=int(settings.backoff_max_seconds * 1000),
            default_timeout_seconds=settings.default_provider_timeout_seconds,
            # One thread per item of a full page: a queued call would eat its own timeout.
            inspect_concurrency=settings.inspect_concurrency or settings.page_size,
        ),
        runtime,
    )
    late_evidence = LateEvidenceWatcher(
        store.late_evidence,
        registry,
        LateEvidenceSettings(
            owner=settings.replica_id,
            window_ms=int(settings.late_evidence_window_seconds * 1000),
            cadence_ms=int(settings.late_evidence_cadence_seconds * 1000),
            page_size=settings.page_size,
            lease_ms=int(settings.recovery_lease_seconds * 1000),
            default_timeout_seconds=settings.default_provider_timeout_seconds,
        ),
        runtime,
    )
    return ReplicaService(
        reconciler,
        LoopSettings(
            cadence_seconds=settings.cadence_seconds,
            cadence_jitter_ratio=settings.cadence_jitter_ratio,
            cadence_min_seconds=settings.cadence_min_seconds,
            storage_retry_max_seconds=settings.storage_retry_max_seconds,
        ),
        runtime,
        store,
        liveness_bound_seconds=liveness_bound(settings),
        # Provider pools, then spans still queued for export, then the store.
        resources=(registry.close, tracing.shutdown, store.close),
        late_evidence=late_evidence,
        telemetry=telemetry,
    )


def demo_replica(database_url: str, registry: ProviderRegistry) -> ReplicaService:
    """`resolver demo`'s replica: a short cadence and backoff, so the seeded crashes settle in
    seconds."""
    settings = load_settings(database_url=database_url, cadence_seconds=0.1, backoff_base_seconds=1)
    return build_replica(settings, registry)


def serve_endpoints(replica: ReplicaService, settings: Settings) -> ObservabilityServer | None:
    """Start /metrics, /healthz and /readyz when RESOLVER_HTTP_PORT is set (0: off); they
    stop when the replica closes."""
    if settings.http_port == 0:
        return None
    metrics = replica.telemetry.metrics
    registry = metrics.registry if metrics is not None else CollectorRegistry()
    readiness = readiness_check(
        replica.store.backlog,
        settings.require_database_url(),
        settings.connect_timeout_seconds,
        providers=replica.telemetry.provider_health.report,
        pooler=settings.database_pooler,
    )
    server = _listen(settings, registry, replica.health, readiness).start()
    replica.add_resource(server.stop)
    return server


def readiness_check(
    store: BacklogReader,
    url: str,
    connect_timeout_seconds: float = migrate.DEFAULT_CONNECT_TIMEOUT_SECONDS,
    *,
    providers: Callable[[], dict[str, dict[str, Any]]] | None = None,
    pooler: Pooler = Pooler.NONE,
) -> ReadinessCheck:
    """Database reachable and schema usable by this code: one check for worker and API.

    A newer release's schema is usable (migrations are additive, expand before contract), as
    `resolver run` itself accepts it: the pre-upgrade migration must not take every old pod
    out of service before the new ones are up. A known older revision is not. `providers`
    (the worker's `ProviderHealth`) adds the providers that could not answer.
    """
    return ReadinessCheck(
        store.ping,
        lambda: migrate.current_revision(url, connect_timeout_seconds, pooler),
        migrate.head_revision(),
        usable=lambda revision: migrate.classify(revision) is migrate.SchemaStatus.AHEAD,
        providers=providers,
    )


def _listen(
    settings: Settings,
    registry: CollectorRegistry,
    liveness: Callable[[], Probe],
    readiness: Callable[[], Probe],
) -> ObservabilityServer:
    try:
        return ObservabilityServer(
            host=settings.http_host,
            port=settings.http_port,
            registry=registry,
            liveness=liveness,
            readiness=readiness,
        )
    except OSError as exc:
        raise ConfigError(
            f"RESOLVER_HTTP_PORT={settings.http_port}: cannot listen on "
            f"{settings.http_host}:{settings.http_port} ({exc.strerror}); pick a free port"
        ) from None


def build_verifier(settings: Settings) -> TokenVerifier:
    """The token verifier of `resolver api`, its keys from the JWKS URL or file."""
    from resolver.human.auth import JwksUrl, TokenVerifier

    issuer, audience, keys = settings.require_oidc()
    if isinstance(keys, Path):
        return TokenVerifier.from_jwks_file(keys, issuer=issuer, audience=audience)
    source = JwksUrl(
        keys,
        cache_seconds=settings.oidc_jwks_cache_seconds,
        refetch_min_seconds=settings.oidc_jwks_refetch_min_seconds,
        timeout_seconds=settings.connect_timeout_seconds,
    )
    return TokenVerifier.from_jwks_url(source, issuer=issuer, audience=audience)


@dataclass
class ApiProcess:
    """`resolver api` composed: the ASGI app, its store and its own metrics endpoints."""

    app: FastAPI
    store: Stores
    metrics_registry: CollectorRegistry
    endpoints: ObservabilityServer | None = None

    def close(self) -> None:
        if self.endpoints is not None:
            self.endpoints.stop()
        self.store.close()


def build_api(
    settings: Settings,
    verifier: TokenVerifier,
    *,
    metrics_registry: CollectorRegistry | None = None,
) -> ApiProcess:
    """The API with a store, a readiness check and metrics; serves /metrics (and the probes
    again, with details) on RESOLVER_HTTP_PORT when set, like the worker."""
    # Imported here: `resolver run` never loads the web framework.
    from resolver.human.api import RateLimiter, create_app
    from resolver.human.manual import ManualResolutionService
    from resolver.human.signing import FactSigner

    url = settings.require_database_url()
    signer = FactSigner.from_file(*settings.require_audit_signing())
    console = settings.console()  # a bad console setting fails before anything is opened
    # Every installed provider's reason codes, for the console: a provider that does not
    # load, or two that give one code two meanings, fail here too.
    reasons = installed_reasons()
    store = open_store(settings)
    registry = metrics_registry if metrics_registry is not None else CollectorRegistry()
    _process_metrics(registry)
    # Not resolver_build_info: the worker alerts read that one as "a replica is up".
    register_build_info(registry, migrate.head_revision(), name="api_build")
    readiness = readiness_check(
        store.backlog, url, settings.connect_timeout_seconds, pooler=settings.database_pooler
    )
    app = create_app(
        store.human,
        verifier,
        service=ManualResolutionService(
            store.human,
            signer=signer,
            proposal_ttl_ms=settings.proposal_ttl_seconds * 1000,
            tampering=reasons.tampering,
        ),
        limiter=RateLimiter(settings.api_decisions_per_minute),
        observer=ApiMetrics(registry),
        readiness=readiness,
        console=console,
        reasons=reasons,
    )
    process = ApiProcess(app, store, registry)
    if settings.http_port != 0:
        try:
            server = _listen(settings, registry, _alive, readiness)
        except ConfigError:
            process.close()
            raise
        process.endpoints = server.start()
    return process


def _alive() -> Probe:
    # The API has no loop to stall: answering at all is the liveness signal.
    return Probe(True, {"status": "ok"})
