"""The Grafana dashboard: built from code, shipped by the chart, every query answered for real.

The JSON in deploy/grafana/ and the chart's copy must be what deploy/grafana/build_dashboard.py
builds; its structure is checked (template variables, data source, per-installation queries);
and a real Prometheus scraping a running `resolver run` and a running API (labelled as the
chart's ServiceMonitor labels them) answers every panel's query, template variables
substituted, with data.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.app.composition import ApiProcess, build_api
from resolver.app.config import load_settings
from resolver.human.auth import TokenVerifier
from tests.helpers.api import auth, grant_alice
from tests.helpers.database import SQL, World
from tests.helpers.k8s import CHART, render, validate_strict
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, jwks_file, signing_key, token
from tests.helpers.prometheus import RULES, Process, alert, http_json, query
from tests.helpers.telemetry import crashed_ago, free_port, wait_for

pytest.importorskip("grafana_foundation_sdk", reason="the test extra provides it")
from deploy.grafana import build_dashboard

__all__ = ["jwks_file", "signing_key"]  # fixtures

DASHBOARD = build_dashboard.OUTPUTS[0]
NAMESPACE, RELEASE = "shop", "rr"
# What Grafana puts in place of the variables for one selected installation.
SUBSTITUTIONS = {"$namespace": NAMESPACE, "$release": RELEASE, "$__rate_interval": "1m"}
DEADLINE_SECONDS = 90.0


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every query of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in dashboard()["panels"]
        for target in panel.get("targets", [])
    ]


def substitute(expr: str) -> str:
    for variable, value in SUBSTITUTIONS.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, expr
    return expr


# -- built from code, shipped by the chart ------------------------------------------------------


def test_both_json_files_are_the_current_build() -> None:
    built = build_dashboard.render()
    for path in build_dashboard.OUTPUTS:
        assert path.read_text() == built, f"{path} is stale: run deploy/grafana/build_dashboard.py"


def test_the_dashboard_has_installation_variables_and_panels_per_installation() -> None:
    model = dashboard()
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "release"):
        assert variables[name]["type"] == "query"
        assert variables[name]["multi"] and variables[name]["includeAll"], name
        assert variables[name]["allValue"] == ".*"
    assert "$namespace" in variables["release"]["query"]["query"]
    panels = model["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(set(ids)) == len(ids)
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel
        assert panel["targets"], panel["title"]
        assert 0 <= panel["gridPos"]["x"] < 24 and panel["gridPos"]["w"] <= 24
        for target in panel["targets"]:
            expr = target["expr"]
            assert 'namespace=~"$namespace"' in expr and 'release=~"$release"' in expr, expr
            # Aggregations keep the installation labels: releases side by side stay apart.
            for by in re.findall(r"\b(?:sum|max|count)\s*(?:by\s*\(([^)]*)\))?\s*\(", expr):
                assert by.startswith("namespace, release"), (panel["title"], expr)


def test_the_dashboard_covers_what_operators_look_at() -> None:
    used = " ".join(expr for _, expr in panel_queries())
    for metric in (
        "resolver_backlog_dispatches",
        "resolver_backlog_action_type_dispatches",
        "resolver_oldest_claimable_age_seconds",
        "resolver_oldest_manual_age_seconds",
        "resolver_resolutions_total",
        "resolver_findings_total",
        "resolver_fence_rejections_total",
        "resolver_provider_errors_total",
        "resolver_inspect_duration_seconds_bucket",
        "resolver_claim_duration_seconds_bucket",
        "resolver_commit_duration_seconds_bucket",
        "resolver_build_info",
        "resolver_api_build_info",
        "resolver_api_requests_total",
        "resolver_api_token_rejections_total",
        "resolver_manual_decision_replays_total",
    ):
        assert metric in used, metric


def test_the_chart_ships_the_dashboard_as_a_sidecar_config_map() -> None:
    assert not [
        m for m in render() if m["kind"] == "ConfigMap" and "dashboard" in m["metadata"]["name"]
    ]
    values = {"dashboard": {"enabled": True, "annotations": {"grafana_folder": "Recovery"}}}
    (config_map,) = [
        m
        for m in render(values)
        if m["kind"] == "ConfigMap"
        and m["metadata"]["name"] == "rr-approved-action-resolver-dashboard"
    ]
    validate_strict(config_map)
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Recovery"}
    assert config_map["metadata"]["namespace"] == "recovery"
    (text,) = config_map["data"].values()
    assert json.loads(text) == dashboard()
    assert (CHART / "files" / "grafana-dashboard.json").read_text() == DASHBOARD.read_text()
    moved = render({"dashboard": {"enabled": True, "namespace": "monitoring"}})
    assert "monitoring" in {m["metadata"].get("namespace") for m in moved}


# -- every query against a real Prometheus --------------------------------------------------------


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (into the backlog) and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])


@pytest.fixture
def worker(database_url: str, tmp_path: Path, silent_port: int) -> Iterator[tuple[Process, int]]:
    """`resolver run`, cycling fast, with one provider whose evidence source hangs (timeouts:
    provider errors, findings, latency, commits) and one manual-only action type."""
    config = {
        "action_types": {
            "payments.charge": {
                "provider": "http_receipt",
                "base_url": f"http://127.0.0.1:{silent_port}",
                "token_env": "DASHBOARD_RECEIPT_TOKEN",
                "timeout_seconds": 1,
            },
            "shell.exec": {"provider": "manual_only"},
        }
    }
    (tmp_path / "providers.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_CONFIG": str(tmp_path / "providers.yml"),
        "RESOLVER_RECEIPT_KEYS": "k1=" + "ab" * 32,
        "DASHBOARD_RECEIPT_TOKEN": "not-a-real-token",
        "RESOLVER_REPLICA_ID": "dashboard-replica",
        "RESOLVER_HTTP_HOST": "127.0.0.1",
        "RESOLVER_HTTP_PORT": str(port),
        "RESOLVER_CADENCE_SECONDS": "0.5",
        "RESOLVER_BACKOFF_BASE_SECONDS": "1",
        "RESOLVER_BACKOFF_MAX_SECONDS": "2",
        "RESOLVER_METRICS_CACHE_SECONDS": "0.2",
    }
    process = Process("worker", [sys.executable, "-m", "resolver", "run"], env, tmp_path)
    try:
        yield process, port
    finally:
        process.stop()


@pytest.fixture
def api(database_url: str, jwks_file: Path, sql: SQL) -> Iterator[ApiProcess]:
    grant_alice(sql)
    settings = load_settings(
        database_url=database_url, http_host="127.0.0.1", http_port=free_port()
    )
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    process = build_api(settings, verifier)
    try:
        yield process
    finally:
        process.close()


def prometheus_config(tmp_path: Path, worker_port: int, api_port: int) -> Path:
    """Two jobs labelled as the chart's ServiceMonitor labels them, and the real rules."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = "0s"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    labels = {"namespace": NAMESPACE, "release": RELEASE}
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(tmp_path / "rules.yml")],
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": labels}],
            }
            for job, port in (
                ("approved-action-resolver", worker_port),
                ("approved-action-resolver-api", api_port),
            )
        ],
    }
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def has_data(base: str, expr: str) -> list[dict[str, Any]] | None:
    """The result when at least one series has a number (histogram quantiles of idle
    windows are NaN: not data)."""
    result = query(base, expr)
    numbers = [float(item["value"][1]) for item in result]
    return result if any(not math.isnan(n) for n in numbers) else None


def test_every_panel_query_returns_data_from_a_real_prometheus(
    world: World,
    sql: SQL,
    worker: tuple[Process, int],
    api: ApiProcess,
    signing_key: rsa.RSAPrivateKey,
    prometheus: Path,
    tmp_path: Path,
) -> None:
    worker_process, worker_port = worker
    assert api.endpoints is not None
    crashed_ago(world, sql, 600, count=2, action_type="payments.charge")
    crashed_ago(world, sql, 600, count=1, action_type="shell.exec")
    config = prometheus_config(tmp_path, worker_port, api.endpoints.port)
    argv = [
        str(prometheus),
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{(port := free_port())}",
        "--log.level=warn",
    ]
    server = Process("prometheus", argv, dict(os.environ), tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        with Server(api.app) as client:
            # Decisions need a manual item; rejections a missing token and one signed by a key
            # the API does not know (what an identity-provider key rotation looks like).
            rotated = token(signing_key, kid="rotated-away")

            def traffic() -> bool:
                client.get("/v1/manual-queue", headers=auth(token(signing_key)))
                client.get("/v1/manual-queue")
                client.get("/v1/manual-queue", headers=auth(rotated))
                return True

            pending = dict(panel_queries())
            answered: dict[str, str] = {}

            def every_query_answers() -> bool | None:
                traffic()  # keeps the API's rate windows busy
                for title, expr in list(pending.items()):
                    if has_data(base, substitute(expr)) is not None:
                        answered[title] = expr
                        del pending[title]
                return True if not pending else None

            wait_for(
                "every dashboard query to return data",
                every_query_answers,
                timeout_seconds=DEADLINE_SECONDS,
                every=1.0,
            )
        assert len(answered) == len({title for title, _ in panel_queries()})

        # The template variables' own queries list the installation.
        for name, value in (("namespace", NAMESPACE), ("release", RELEASE)):
            selector = urllib.parse.urlencode(
                {"match[]": f'resolver_build_info{{namespace=~"{NAMESPACE}"}}'}
            )
            values = http_json(f"{base}/api/v1/label/{name}/values?{selector}")["data"]
            assert values == [value]

        # The API alert sees the rotation, labelled with the installation.
        firing = wait_for(
            "ResolverApiTokensRejected to fire",
            lambda: alert(base, "ResolverApiTokensRejected", "firing"),
            timeout_seconds=DEADLINE_SECONDS,
        )
        assert (firing["labels"]["namespace"], firing["labels"]["release"]) == (NAMESPACE, RELEASE)
        assert alert(base, "ResolverDown", "firing") is None
        assert alert(base, "ResolverApiDown", "firing") is None
    except BaseException:
        print("--- worker output ---\n" + worker_process.output())
        print("--- prometheus output ---\n" + server.output())
        print("--- still without data ---\n" + "\n".join(locals().get("pending", {}).values()))
        raise
    finally:
        server.stop()
