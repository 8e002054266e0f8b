"""The chart's optional `resolver api` Deployment, rendered by the real Helm engine."""

from __future__ import annotations

import re
from typing import Any

import pytest

from resolver.app.config import Settings
from tests.helpers.k8s import (
    Manifest,
    assert_hardened,
    assert_lints_clean,
    assert_valid_kubernetes,
    by_kind,
    env_of,
    one,
    render,
    render_error,
)

DB_PEER = {"ipBlock": {"cidr": "10.20.0.0/24"}}
PROXY_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}
OIDC = {"issuer": "https://idp.example", "audience": "resolver-api", "jwksConfigMap": "idp-jwks"}
API = {"enabled": True, "oidc": OIDC}
URL_OIDC = {**OIDC, "jwksConfigMap": "", "jwksUrl": "https://idp.example/.well-known/jwks.json"}
IDP_EGRESS = {"to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}], "ports": [{"port": 443}]}

VALUE_SETS: dict[str, dict[str, Any]] = {
    "api": {"api": API},
    "api-everything": {
        "api": {
            **API,
            "replicaCount": 3,
            "port": 8443,
            "metricsPort": 9100,
            "decisionsPerMinute": 12,
            "proposalTtlSeconds": 900,
            "oidc": {**OIDC, "jwksKey": "keys.json"},
            "networkPolicy": {"from": [PROXY_PEER]},
        },
        "serviceMonitor": {"enabled": True},
        "networkPolicy": {"enabled": True, "database": {"to": [DB_PEER]}},
    },
    "api-jwks-url": {
        "api": {
            **API,
            "oidc": {**URL_OIDC, "jwksCacheSeconds": 120, "jwksRefetchMinSeconds": 10},
            "networkPolicy": {"jwksEgress": [IDP_EGRESS]},
        },
        "networkPolicy": {"enabled": True, "database": {"to": [DB_PEER]}},
    },
    "api-single-no-pdb": {
        "api": {**API, "replicaCount": 1, "podDisruptionBudget": {"enabled": False}}
    },
}


def component(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    found = [
        m
        for m in by_kind(manifests, kind)
        if m["metadata"]["labels"].get("app.kubernetes.io/component") == name
    ]
    assert len(found) == 1, f"expected one {kind} of component {name}, got {len(found)}"
    return found[0]


def named(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    (found,) = [m for m in by_kind(manifests, kind) if m["metadata"]["name"] == name]
    return found


WORKER = "rr-approved-action-resolver"


def api_container(manifests: list[Manifest]) -> Manifest:
    (only,) = component(manifests, "Deployment", "api")["spec"]["template"]["spec"]["containers"]
    return only


def labels_of_pods(manifests: list[Manifest], name: str) -> dict[str, str]:
    labels: dict[str, str] = component(manifests, "Deployment", name)["spec"]["template"][
        "metadata"
    ]["labels"]
    return labels


# -- off by default -----------------------------------------------------------------------------


def test_api_is_off_by_default() -> None:
    manifests = render()
    assert len(by_kind(manifests, "Deployment")) == 1
    assert all(
        m["metadata"]["labels"].get("app.kubernetes.io/component") != "api" for m in manifests
    )


# -- lint, validity, hardening --------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_api_value_sets_lint_clean_in_strict_mode(name: str) -> None:
    assert_lints_clean(VALUE_SETS[name])


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_api_manifests_are_valid_kubernetes_and_hardened(name: str) -> None:
    manifests = render(VALUE_SETS[name])
    assert_valid_kubernetes(manifests)
    assert_hardened(manifests)  # every workload, the API's included
    pod = component(manifests, "Deployment", "api")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    ctx = api_container(manifests)["securityContext"]
    assert ctx["readOnlyRootFilesystem"] is True and ctx["capabilities"]["drop"] == ["ALL"]


# -- the API Deployment ---------------------------------------------------------------------------


def test_api_runs_resolver_api_with_its_settings_and_probes() -> None:
    manifests = render(VALUE_SETS["api"])
    deployment = component(manifests, "Deployment", "api")
    assert deployment["spec"]["replicas"] == 2
    main = api_container(manifests)
    assert main["args"] == ["api"]
    assert main["ports"] == [
        {"name": "api", "containerPort": 8080, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 9464, "protocol": "TCP"},
    ]
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "api"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "api"}
    env = env_of(main)
    literal = {name: item["value"] for name, item in env.items() if "value" in item}
    assert literal["RESOLVER_API_HOST"] == "0.0.0.0"
    assert literal["RESOLVER_API_PORT"] == "8080"
    assert literal["RESOLVER_API_DECISIONS_PER_MINUTE"] == "30"
    assert literal["RESOLVER_PROPOSAL_TTL_SECONDS"] == "3600"
    assert literal["RESOLVER_OIDC_ISSUER"] == "https://idp.example"
    assert literal["RESOLVER_OIDC_AUDIENCE"] == "resolver-api"
    assert literal["RESOLVER_HTTP_PORT"] == "9464"
    url = env["RESOLVER_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert url == {"name": "rr-approved-action-resolver-database", "key": "url"}
    # Nothing of the worker's: no provider config, no receipt keys.
    assert not {"RESOLVER_CONFIG", "RESOLVER_SECRETS_DIR"} & env.keys()


def test_jwks_comes_read_only_from_the_named_config_map_key() -> None:
    manifests = render(VALUE_SETS["api-everything"])
    main = api_container(manifests)
    jwks_file = env_of(main)["RESOLVER_OIDC_JWKS_FILE"]["value"]
    mount = next(m for m in main["volumeMounts"] if jwks_file.startswith(m["mountPath"] + "/"))
    assert mount["readOnly"] is True
    pod = component(manifests, "Deployment", "api")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == "idp-jwks"
    (item,) = volume["configMap"]["items"]
    assert item["key"] == "keys.json"
    assert f"{mount['mountPath']}/{item['path']}" == jwks_file


def test_api_values_reach_the_env_and_the_resolver_accepts_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manifests = render(VALUE_SETS["api-everything"])
    main = api_container(manifests)
    env = env_of(main)
    literal = {name: item["value"] for name, item in env.items() if "value" in item}
    assert literal["RESOLVER_API_PORT"] == "8443"
    assert literal["RESOLVER_HTTP_PORT"] == "9100"
    assert literal["RESOLVER_API_DECISIONS_PER_MINUTE"] == "12"
    assert literal["RESOLVER_PROPOSAL_TTL_SECONDS"] == "900"
    assert {p["containerPort"] for p in main["ports"]} == {8443, 9100}
    assert component(manifests, "Deployment", "api")["spec"]["replicas"] == 3
    for name, value in literal.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RESOLVER_DATABASE_URL", "postgresql://resolver@db:5432/app")
    settings = Settings()
    assert (settings.api_port, settings.http_port, settings.api_decisions_per_minute) == (
        8443,
        9100,
        12,
    )
    issuer, audience, jwks = settings.require_oidc()
    assert (issuer, audience, str(jwks)) == (
        "https://idp.example",
        "resolver-api",
        "/etc/resolver/oidc/jwks.json",
    )


# Settings of `resolver api` that the API Deployment must carry.
API_SETTINGS = {
    "database_url",
    "replica_id",
    "api_host",
    "api_port",
    "api_decisions_per_minute",
    "oidc_issuer",
    "oidc_audience",
    "oidc_jwks_file",
    "http_port",
    "http_host",
    "connect_timeout_seconds",
    "statement_timeout_ms",
    "max_connections",
}


def test_every_api_setting_is_wired_into_the_api_deployment() -> None:
    assert set(Settings.model_fields) >= API_SETTINGS, "a setting was renamed: update this list"
    env = env_of(api_container(render(VALUE_SETS["api"])))
    missing = {f"RESOLVER_{f.upper()}" for f in API_SETTINGS} - env.keys()
    assert not missing, f"settings the API Deployment does not render: {sorted(missing)}"


# -- Service, PDB, NetworkPolicy, ServiceMonitor ----------------------------------------------------


def test_service_and_pdb_select_exactly_the_api_pods() -> None:
    manifests = render(VALUE_SETS["api"])
    api_pods = labels_of_pods(manifests, "api").items()
    worker_pods = labels_of_pods(manifests, "worker").items()
    service = component(manifests, "Service", "api")
    pdb = component(manifests, "PodDisruptionBudget", "api")
    for selector in (service["spec"]["selector"], pdb["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= api_pods
        assert not selector.items() <= worker_pods
    # ... and the worker's own still select the worker only.
    for kind in ("Service", "PodDisruptionBudget"):
        worker = named(manifests, kind, WORKER)
        selector = worker["spec"]["selector"]
        labels = selector.get("matchLabels", selector).items()
        assert labels <= worker_pods and not labels <= api_pods
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {
        "api": "api",
        "metrics": "metrics",
    }
    assert pdb["spec"]["maxUnavailable"] == 1


def test_api_pdb_can_be_turned_off() -> None:
    manifests = render(VALUE_SETS["api-single-no-pdb"])
    assert [p["metadata"]["name"] for p in by_kind(manifests, "PodDisruptionBudget")] == [WORKER]


def matches(selector: Manifest, labels: dict[str, str]) -> bool:
    """Kubernetes label-selector semantics for matchLabels and In/NotIn expressions."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        present = labels.get(expr["key"]) in expr["values"]
        if (expr["operator"] == "In") != present:
            return False
    return True


def test_network_policies_split_worker_and_api() -> None:
    manifests = render(VALUE_SETS["api-everything"])
    api_pods, worker_pods = labels_of_pods(manifests, "api"), labels_of_pods(manifests, "worker")
    worker_policy = named(manifests, "NetworkPolicy", WORKER)
    api_policy = component(manifests, "NetworkPolicy", "api")
    # Policies add up: the worker's (with provider egress) must not select the API pods.
    assert matches(worker_policy["spec"]["podSelector"], worker_pods)
    assert not matches(worker_policy["spec"]["podSelector"], api_pods)
    assert matches(api_policy["spec"]["podSelector"], api_pods)
    assert not matches(api_policy["spec"]["podSelector"], worker_pods)
    api_in, metrics_in = api_policy["spec"]["ingress"]
    assert api_in == {"ports": [{"port": "api", "protocol": "TCP"}], "from": [PROXY_PEER]}
    assert metrics_in["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    dns, database = api_policy["spec"]["egress"]
    assert {p["port"] for p in dns["ports"]} == {53}
    assert database == {"to": [DB_PEER], "ports": [{"port": 5432, "protocol": "TCP"}]}


def test_no_api_network_policy_unless_network_policy_is_on() -> None:
    assert not by_kind(render(VALUE_SETS["api"]), "NetworkPolicy")


def test_service_monitor_scrapes_the_api_metrics_port_too() -> None:
    manifests = render(VALUE_SETS["api-everything"])
    monitor = one(manifests, "ServiceMonitor")
    selector = monitor["spec"]["selector"]
    endpoints = {e["port"]: e for e in monitor["spec"]["endpoints"]}
    assert set(endpoints) == {"http", "metrics"}
    assert all(e["path"] == "/metrics" for e in endpoints.values())
    for name in ("worker", "api"):
        service = named(manifests, "Service", WORKER if name == "worker" else f"{WORKER}-api")
        assert matches(selector, service["metadata"]["labels"])
    api_ports = {p["name"] for p in component(manifests, "Service", "api")["spec"]["ports"]}
    worker_ports = {p["name"] for p in component(manifests, "Service", "worker")["spec"]["ports"]}
    # Each endpoint lands on one Service only: no double scrape, no scrape of the API port.
    assert api_ports & set(endpoints) == {"metrics"}
    assert worker_ports & set(endpoints) == {"http"}


def test_service_monitor_without_api_has_only_the_worker_endpoint() -> None:
    monitor = one(render({"serviceMonitor": {"enabled": True}}), "ServiceMonitor")
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["http"]


# -- values that must be refused ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"api": {"enabled": True}}, r"api\.enabled needs api\.oidc\.issuer"),
        (
            {"api": {"enabled": True, "oidc": {**OIDC, "audience": ""}}},
            r"api\.enabled needs api\.oidc\.audience",
        ),
        (
            {"api": {"enabled": True, "oidc": {**OIDC, "jwksConfigMap": ""}}},
            r"api\.enabled needs the issuer's keys: api\.oidc\.jwksUrl .* or api\.oidc\.jwksConfigMap",
        ),
        (
            {"api": {"enabled": True, "oidc": {**OIDC, "jwksUrl": "https://idp.example/jwks"}}},
            r"api\.oidc\.jwksUrl and api\.oidc\.jwksConfigMap are exclusive",
        ),
        (
            {"api": {**API, "oidc": {**OIDC, "jwksConfigMap": "", "jwksUrl": "http://idp/k"}}},
            r"/api/oidc/jwksUrl",
        ),
        (
            {
                "api": {**API, "oidc": URL_OIDC},
                "networkPolicy": {"enabled": True, "database": {"to": [DB_PEER]}},
            },
            r"networkPolicy\.enabled with api\.oidc\.jwksUrl needs api\.networkPolicy\.jwksEgress",
        ),
        ({"api": {**API, "port": 80}}, r"/api/port.*minimum"),
        ({"api": {**API, "decisionsPerMinute": 0}}, r"/api/decisionsPerMinute.*minimum"),
        ({"api": {**API, "proposalTtlSeconds": 30}}, r"/api/proposalTtlSeconds.*minimum"),
        ({"api": {**API, "replicaCount": "two"}}, r"/api/replicaCount.*want integer"),
        ({"api": {**API, "oidc": {**OIDC, "issuer": "idp.example"}}}, r"/api/oidc/issuer"),
        ({"api": {**API, "oidc": {**OIDC, "jwksConfigMap": "Bad_Name"}}}, r"jwksConfigMap"),
        ({"api": {**API, "oidc": {**OIDC, "jwks": "{}"}}}, r"additional properties 'jwks'"),
        ({"api": {**API, "host": "0.0.0.0"}}, r"additional properties 'host' not allowed"),
        ({"api": {**API, "resources": {"limits": None}}}, r"/api/resources.*limits"),
    ],
)
def test_invalid_api_values_fail_with_a_message_naming_the_value(
    values: dict[str, Any], message: str
) -> None:
    error = render_error(values)
    assert re.search(message, error), error


def test_disabled_api_needs_no_oidc_values() -> None:
    assert render({"api": {"enabled": False, "oidc": {"issuer": ""}}})


def test_jwks_url_replaces_the_config_map_mount_and_the_resolver_accepts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manifests = render(VALUE_SETS["api-jwks-url"])
    main = api_container(manifests)
    pod = component(manifests, "Deployment", "api")["spec"]["template"]["spec"]
    assert "oidc-jwks" not in {v["name"] for v in pod["volumes"]}
    assert "oidc-jwks" not in {m["name"] for m in main["volumeMounts"]}
    literal = {name: item["value"] for name, item in env_of(main).items() if "value" in item}
    assert "RESOLVER_OIDC_JWKS_FILE" not in literal
    for name, value in literal.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.require_oidc()[2] == URL_OIDC["jwksUrl"]
    assert (settings.oidc_jwks_cache_seconds, settings.oidc_jwks_refetch_min_seconds) == (120, 10)
    policy = named(manifests, "NetworkPolicy", f"{WORKER}-api")
    assert IDP_EGRESS in policy["spec"]["egress"]


def test_jwks_config_map_is_mounted_without_sub_path_so_updates_reach_the_pod() -> None:
    main = api_container(render(VALUE_SETS["api"]))
    (mount,) = [m for m in main["volumeMounts"] if m["name"] == "oidc-jwks"]
    assert "subPath" not in mount


CONSOLE = {
    "oidcClientId": "resolver-console",
    "oidcIssuer": "https://sso.example",
    "oidcScope": "openid profile",
    "oidcResource": "https://resolver.example/api",
    "links": [
        {"label": "Approval", "template": "https://platform.example/a/{approval_request_id}"}
    ],
    "reasonCodes": ["vendor_confirmed", "cannot_verify"],
}


def test_console_values_reach_the_api_and_the_api_accepts_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = env_of(api_container(render({"api": {**API, "console": CONSOLE}})))
    literal = {name: item["value"] for name, item in env.items() if "value" in item}
    for name, value in literal.items():
        monkeypatch.setenv(name, value)
    console = Settings().console()
    assert console.oidc is not None
    assert console.oidc.client_id == "resolver-console"
    assert console.oidc.issuer == "https://sso.example"
    assert [link.label for link in console.links] == ["Approval"]
    assert list(console.reason_codes) == ["vendor_confirmed", "cannot_verify"]


def test_console_sign_in_is_off_unless_a_client_id_is_given() -> None:
    env = env_of(api_container(render({"api": API})))
    assert "RESOLVER_CONSOLE_OIDC_CLIENT_ID" not in env
    assert "RESOLVER_CONSOLE_LINKS" not in env
    assert env["RESOLVER_CONSOLE_OIDC_SCOPE"]["value"] == "openid"


def test_a_script_link_template_is_refused_by_the_schema() -> None:
    bad = {"links": [{"label": "x", "template": "javascript:alert(1)"}]}
    assert "template" in render_error({"api": {**API, "console": bad}})
