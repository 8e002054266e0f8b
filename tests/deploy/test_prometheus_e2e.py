"""A real Prometheus scrapes a running `resolver run` whose database holds an ageing backlog.

The resolver runs as a subprocess with a one-hour cadence: after its first cycle it sleeps,
so executions that crash afterwards age as they would behind a stuck fleet. Prometheus
loads the real alert rules with every `for:` set to 0s (promtool's unit tests cover the
durations; here the expressions meet real scraped series), and the test waits on
Prometheus's HTTP API with bounded deadlines.
"""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers.cli import RESOLVER
from tests.helpers.database import SQL, World
from tests.helpers.prometheus import RULES, Process, alert, query
from tests.helpers.telemetry import crashed_ago, free_port, wait_for

DEADLINE_SECONDS = 60.0


def http_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode())


@pytest.fixture
def resolver(database_url: str, tmp_path: Path) -> Iterator[tuple[Process, int]]:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_REPLICA_ID": "e2e-replica",
        "RESOLVER_HTTP_HOST": "127.0.0.1",
        "RESOLVER_HTTP_PORT": str(port),
        "RESOLVER_CADENCE_SECONDS": "3600",
        "RESOLVER_METRICS_CACHE_SECONDS": "0.2",
    }
    process = Process("resolver", [*RESOLVER, "run"], env, tmp_path)
    try:
        yield process, port
    finally:
        process.stop()


@pytest.fixture
def prometheus_server(
    prometheus: Path, resolver: tuple[Process, int], tmp_path: Path
) -> Iterator[tuple[Process, str]]:
    _, resolver_port = resolver
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = "0s"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(tmp_path / "rules.yml")],
        # Labelled as the chart's ServiceMonitor labels the series (the rules select the job
        # and group by namespace and release).
        "scrape_configs": [
            {
                "job_name": "approved-action-resolver",
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{resolver_port}"],
                        "labels": {"namespace": "shop", "release": "rr"},
                    }
                ],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    argv = [
        str(prometheus),
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    process = Process("prometheus", argv, dict(os.environ), tmp_path)
    try:
        yield process, f"http://127.0.0.1:{port}"
    finally:
        process.stop()


def scalar(base: str, promql: str) -> float | None:
    result = query(base, promql)
    return float(result[0]["value"][1]) if result else None


def test_prometheus_scrapes_an_ageing_backlog_and_fires_the_paging_alert(
    world: World,
    sql: SQL,
    resolver: tuple[Process, int],
    prometheus_server: tuple[Process, str],
) -> None:
    replica, resolver_port = resolver
    server, base = prometheus_server
    metrics_url = f"http://127.0.0.1:{resolver_port}/metrics"
    try:
        # The replica's first cycle has run (and found nothing) before the crashes happen.
        wait_for(
            "the resolver's first cycle",
            lambda: (
                True
                if 'resolver_cycles_total{result="completed"} 1.0' in http_text(metrics_url)
                else None
            ),
            timeout_seconds=DEADLINE_SECONDS,
        )
        leases = crashed_ago(world, sql, 3600, count=3, action_type="payments.charge")

        due = wait_for(
            "Prometheus to scrape the due backlog",
            lambda: scalar(base, 'max(resolver_backlog_dispatches{queue="due"}) == 3'),
            timeout_seconds=DEADLINE_SECONDS,
        )
        assert due == 3
        by_type = query(base, "resolver_backlog_action_type_dispatches")
        assert [(r["metric"]["queue"], r["metric"]["action_type"]) for r in by_type] == [
            ("due", "payments.charge")
        ]
        age = scalar(base, "max(resolver_oldest_claimable_age_seconds)")
        assert age is not None and 3600 <= age < 3600 + DEADLINE_SECONDS * 2
        assert scalar(base, 'up{job="approved-action-resolver"}') == 1.0
        assert scalar(base, "resolver_build_info") == 1.0

        firing = wait_for(
            "ResolverOldestClaimableTooOld to fire",
            lambda: alert(base, "ResolverOldestClaimableTooOld", "firing"),
            timeout_seconds=DEADLINE_SECONDS,
        )
        assert firing["labels"]["severity"] == "critical"
        assert (firing["labels"]["namespace"], firing["labels"]["release"]) == ("shop", "rr")
        assert firing["annotations"]["runbook_url"].endswith("#resolveroldestclaimabletooold")
        assert "1h" in firing["annotations"]["summary"]
        for quiet in ("ResolverDown", "ResolverLoopStalled", "ResolverBacklogUnknown"):
            assert alert(base, quiet, "firing") is None, quiet
        assert len(leases) == 3

        # The only replica goes away (its target stays): failed scrapes make ResolverDown
        # fire for this installation.
        assert replica.stop() == 0
        down = wait_for(
            "ResolverDown to fire",
            lambda: alert(base, "ResolverDown", "firing"),
            timeout_seconds=DEADLINE_SECONDS,
        )
        assert (down["labels"]["namespace"], down["labels"]["release"]) == ("shop", "rr")
    except BaseException:
        print("--- resolver output ---\n" + replica.output())
        print("--- prometheus output ---\n" + server.output())
        raise
