"""Composition root: settings in, a wired store, registry, reconciler and worker out."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

import structlog

from resolver.config import Settings, load_provider_config
from resolver.db.repository import PostgresStore
from resolver.evidence import ProviderRegistry, build_registry
from resolver.reconciler import Reconciler, ReconcilerSettings
from resolver.worker import Worker, WorkerSettings


def configure_logging(level: str = "INFO") -> None:
    """Structured JSON logs on stderr; the fields are codes and ids, never secrets."""
    logging.basicConfig(level=level, stream=sys.stderr, format="%(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars()


def open_store(settings: Settings) -> PostgresStore:
    store = PostgresStore(
        settings.require_database_url(),
        max_connections=settings.max_connections,
        connect_timeout_seconds=settings.connect_timeout_seconds,
        statement_timeout_ms=settings.statement_timeout_ms,
        application_name=f"resolver:{settings.replica_id}"[:63],
    )
    store.open()
    return store


def load_registry(settings: Settings) -> ProviderRegistry:
    registry = build_registry(load_provider_config(settings.config))
    settings.check_lease_budget(
        max(registry.longest_timeout_seconds, settings.default_provider_timeout_seconds)
    )
    return registry


@dataclass
class Replica:
    store: PostgresStore
    reconciler: Reconciler
    worker: Worker
    registry: ProviderRegistry

    def close(self) -> None:
        self.reconciler.close()
        self.registry.close()  # provider connection pools
        self.store.close()


def build_replica(settings: Settings, registry: ProviderRegistry | None = None) -> Replica:
    registry = registry if registry is not None else load_registry(settings)
    store = open_store(settings)
    reconciler = Reconciler(
        store,
        registry,
        ReconcilerSettings(
            owner=settings.replica_id,
            page_size=settings.page_size,
            recovery_lease_ms=int(settings.recovery_lease_seconds * 1000),
            backoff_base_ms=int(settings.backoff_base_seconds * 1000),
            backoff_max_ms=int(settings.backoff_max_seconds * 1000),
            default_timeout_seconds=settings.default_provider_timeout_seconds,
            inspect_concurrency=settings.inspect_concurrency,
        ),
    )
    worker = Worker(
        reconciler,
        WorkerSettings(
            cadence_seconds=settings.cadence_seconds,
            cadence_jitter_ratio=settings.cadence_jitter_ratio,
            storage_retry_max_seconds=settings.storage_retry_max_seconds,
        ),
    )
    return Replica(store, reconciler, worker, registry)
