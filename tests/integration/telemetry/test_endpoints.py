"""/metrics, /healthz and /readyz over real HTTP on loopback, against real PostgreSQL."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from resolver import __version__
from resolver.app.composition import ReplicaService as Replica
from resolver.app.composition import build_replica, serve_endpoints
from resolver.app.config import load_settings
from resolver.core.errors import ConfigError
from resolver.core.liveness import Heartbeat, LivenessCheck, Probe, liveness_bound_seconds
from resolver.core.provider import ProviderRegistry
from resolver.db import migrate
from resolver.telemetry.health import ReadinessCheck
from resolver.telemetry.server import ObservabilityServer
from tests.helpers.database import SECRET, with_password
from tests.helpers.stores import Storage
from tests.helpers.telemetry import free_port


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


@pytest.fixture
def replica(database_url: str) -> Iterator[tuple[Replica, str]]:
    settings = load_settings(
        database_url=with_password(database_url),
        http_host="127.0.0.1",
        http_port=free_port(),
        replica_id="replica-http",
    )
    rep = build_replica(settings, ProviderRegistry({}))
    try:
        serve_endpoints(rep, settings)
        yield rep, f"http://127.0.0.1:{settings.http_port}"
    finally:
        rep.close()


def test_composed_replica_serves_metrics_health_and_readiness(
    replica: tuple[Replica, str],
) -> None:
    rep, base = replica
    rep.run(once=True)

    status, ctype, body = get(f"{base}/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    assert 'resolver_cycles_total{result="completed"} 1.0' in body
    assert "resolver_build_info{" in body and f'version="{__version__}"' in body
    assert 'resolver_backlog_dispatches{queue="due"} 0.0' in body
    assert "process_cpu_seconds_total" in body
    assert "_created" not in body

    status, ctype, body = get(f"{base}/healthz")
    assert (status, ctype) == (200, "application/json")
    assert json.loads(body)["status"] == "ok" and json.loads(body)["cycles"] == 1

    status, _, body = get(f"{base}/readyz")
    assert status == 200
    assert json.loads(body) == {"status": "ready", "schema_revision": migrate.head_revision()}

    assert get(f"{base}/nope")[0] == 404


def test_no_response_carries_the_database_password(replica: tuple[Replica, str]) -> None:
    rep, base = replica
    rep.run(once=True)
    for path in ("/metrics", "/healthz", "/readyz", "/nope"):
        assert SECRET not in get(base + path)[2]


def test_readyz_reports_a_schema_behind_head(database_url: str) -> None:
    migrate.downgrade(database_url, "base")
    readiness = ReadinessCheck(
        lambda: None, lambda: migrate.current_revision(database_url), migrate.head_revision()
    )
    with serving(readiness=readiness) as base:
        status, _, body = get(f"{base}/readyz")
    assert status == 503
    assert json.loads(body) == {
        "status": "not_ready",
        "reason": "schema_mismatch",
        "schema_revision": None,
        "expected_revision": migrate.head_revision(),
    }


def test_readyz_reports_an_unreachable_database_without_details() -> None:
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:1/nowhere"
    dead = Storage(url, connect_timeout_seconds=1)
    dead.open()
    try:
        readiness = ReadinessCheck(
            dead.ping, lambda: migrate.current_revision(url), migrate.head_revision()
        )
        with serving(readiness=readiness) as base:
            status, _, body = get(f"{base}/readyz")
    finally:
        dead.close()
    assert status == 503
    assert json.loads(body) == {"status": "not_ready", "reason": "database_unreachable"}


def test_healthz_fails_when_the_loop_stops_cycling() -> None:
    now = [1000.0]
    heartbeat = Heartbeat(clock=lambda: now[0])
    bound = liveness_bound_seconds(
        cadence_seconds=2,
        cadence_jitter_ratio=0.2,
        storage_retry_max_seconds=30,
        recovery_lease_seconds=60,
    )
    assert bound == 2 * (30 + 60)
    with serving(liveness=LivenessCheck(heartbeat, bound)) as base:
        now[0] += bound
        assert get(f"{base}/healthz")[0] == 200
        now[0] += 0.5
        status, _, body = get(f"{base}/healthz")
        assert status == 503 and json.loads(body)["status"] == "stalled"
        heartbeat.beat()  # a cycle attempt ends (a storage failure counts: loop alive)
        assert get(f"{base}/healthz")[0] == 200


class Exploding:
    """A collector whose failure message holds a DSN: the endpoint must not echo it."""

    def collect(self) -> Iterable[Metric]:
        raise RuntimeError(f"postgresql://postgres:{SECRET}@db/app is down")

    def describe(self) -> Iterable[Metric]:
        return []


def test_endpoint_errors_are_masked() -> None:
    registry = CollectorRegistry()
    registry.register(Exploding())  # type: ignore[arg-type]

    def broken() -> Probe:
        raise RuntimeError(f"postgresql://postgres:{SECRET}@db/app")

    with serving(registry=registry, readiness=broken) as base:
        for path in ("/metrics", "/readyz"):
            status, _, body = get(base + path)
            assert (status, body) == (500, "internal error\n")


def test_a_taken_port_is_a_configuration_error(database_url: str) -> None:
    with serving() as base:
        port = int(base.rsplit(":", 1)[1])
        settings = load_settings(database_url=database_url, http_host="127.0.0.1", http_port=port)
        rep = build_replica(settings, ProviderRegistry({}))
        try:
            with pytest.raises(ConfigError, match=f"RESOLVER_HTTP_PORT={port}"):
                serve_endpoints(rep, settings)
        finally:
            rep.close()


@contextmanager
def serving(
    *,
    registry: CollectorRegistry | None = None,
    liveness: Callable[[], Probe] | None = None,
    readiness: Callable[[], Probe] | None = None,
) -> Iterator[str]:
    """An ObservabilityServer on an ephemeral loopback port with the given parts."""
    server = ObservabilityServer(
        host="127.0.0.1",
        port=0,
        registry=registry or CollectorRegistry(),
        liveness=liveness or (lambda: Probe(True, {"status": "ok"})),
        readiness=readiness or (lambda: Probe(True, {"status": "ready"})),
    ).start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()
