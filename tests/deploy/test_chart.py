"""The Helm chart, rendered by the real Helm engine and validated against Kubernetes schemas."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from resolver import __version__
from resolver.app.config import Settings, load_provider_config
from tests.helpers.k8s import (
    CHART,
    DB_PEER,
    OPERATOR_KINDS,
    PROVIDER_RULE,
    PROVIDERS,
    TOKEN_ENV,
    VALUE_SETS,
    Manifest,
    assert_hardened,
    assert_lints_clean,
    assert_valid_kubernetes,
    by_kind,
    env_of,
    helm,
    one,
    render,
    render_error,
)
from tools import chart_readme


def worker(manifests: list[Manifest]) -> Manifest:
    return one(manifests, "Deployment")


def container(manifests: list[Manifest]) -> Manifest:
    (only,) = worker(manifests)["spec"]["template"]["spec"]["containers"]
    return only


def migration_job(manifests: list[Manifest]) -> Manifest:
    return one(manifests, "Job")


# -- lint and validity ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_chart_lints_clean_in_strict_mode(name: str) -> None:
    assert_lints_clean(VALUE_SETS[name])


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_rendered_manifest_is_valid_kubernetes(name: str) -> None:
    manifests = render(VALUE_SETS[name])
    assert_valid_kubernetes(manifests)


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_value_set_stays_hardened(name: str) -> None:
    assert_hardened(render(VALUE_SETS[name]))


def test_upgrade_renders_the_same_objects_as_install() -> None:
    names = [(m["kind"], m["metadata"]["name"]) for m in render()]
    assert [(m["kind"], m["metadata"]["name"]) for m in render(upgrade=True)] == names


def test_default_values_pass_the_schema() -> None:
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(chart.values)


# -- the worker ------------------------------------------------------------------------------


def test_defaults_run_two_spread_replicas_with_probes_on_the_http_port() -> None:
    manifests = render()
    deployment = worker(manifests)
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    keys = {c["topologyKey"] for c in pod["topologySpreadConstraints"]}
    assert keys == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    for constraint in pod["topologySpreadConstraints"]:
        assert (
            constraint["labelSelector"]["matchLabels"]
            == deployment["spec"]["selector"]["matchLabels"]
        )
    main = container(manifests)
    assert main["args"] == ["run"]
    assert main["ports"] == [{"name": "http", "containerPort": 9464, "protocol": "TCP"}]
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert env_of(main)["RESOLVER_HTTP_PORT"]["value"] == "9464"
    grace = float(env_of(main)["RESOLVER_SHUTDOWN_GRACE_SECONDS"]["value"])
    assert pod["terminationGracePeriodSeconds"] > grace


def test_http_port_value_moves_the_port_the_probes_and_the_env_together() -> None:
    main = container(render({"http": {"port": 9100}}))
    assert main["ports"][0]["containerPort"] == 9100
    assert env_of(main)["RESOLVER_HTTP_PORT"]["value"] == "9100"
    assert main["readinessProbe"]["httpGet"]["port"] == main["ports"][0]["name"]


def test_replica_count_is_rendered() -> None:
    assert worker(render({"replicaCount": 7}))["spec"]["replicas"] == 7


CUSTOM_SETTINGS: dict[str, Any] = {
    "pageSize": 48,
    "cadenceSeconds": 0.5,
    "cadenceJitterRatio": 0.1,
    "recoveryLeaseSeconds": 90,
    "commitMarginSeconds": 7.5,
    "backoffBaseSeconds": 3,
    "backoffMaxSeconds": 900,
    "defaultProviderTimeoutSeconds": 20,
    "inspectConcurrency": 32,
    "shutdownGraceSeconds": 20,
    "storageRetryMaxSeconds": 45,
    "connectTimeoutSeconds": 4,
    "startupTimeoutSeconds": 90,
    "statementTimeoutMs": 1_000_000,
    "lockTimeoutMs": 5_000,
    "maxConnections": 6,
    "logLevel": "WARNING",
    "metricsCacheSeconds": 2.5,
}


def test_inspect_concurrency_is_left_to_the_resolver_unless_set() -> None:
    assert "RESOLVER_INSPECT_CONCURRENCY" not in env_of(container(render()))
    env = env_of(container(render({"resolver": {"inspectConcurrency": 8}})))
    assert env["RESOLVER_INSPECT_CONCURRENCY"]["value"] == "8"


def test_every_setting_reaches_the_resolver_and_the_resolver_accepts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = env_of(container(render({"resolver": CUSTOM_SETTINGS})))
    literal = {name: item["value"] for name, item in env.items() if "value" in item}
    for name, value in literal.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    expected = {k: v for k, v in CUSTOM_SETTINGS.items() if k != "logLevel"}
    for camel, value in expected.items():
        field = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
        assert getattr(settings, field) == value, field
    assert literal["RESOLVER_LOG_LEVEL"] == "WARNING"
    # Helm holds numbers as float64; an integer must not come out as 1e+06.
    assert literal["RESOLVER_STATEMENT_TIMEOUT_MS"] == "1000000"


# Settings the worker's Deployment must not carry: secrets (receipt keys come as files), the
# settings of `resolver api`, which the chart renders into the API Deployment instead (`api.*`
# values, checked by tests/deploy/test_chart_api.py).
NOT_FROM_VALUES = {
    "receipt_keys",
    "receipt_signing_kid",
    "api_host",
    "api_port",
    "api_decisions_per_minute",
    "proposal_ttl_seconds",
    "oidc_issuer",
    "oidc_audience",
    "oidc_jwks_file",
    "oidc_jwks_url",
    "oidc_jwks_cache_seconds",
    "oidc_jwks_refetch_min_seconds",
    "console_oidc_client_id",
    "console_oidc_issuer",
    "console_oidc_scope",
    "console_oidc_resource",
    "console_links",
    "console_reason_codes",
    # The API Deployment's (test_chart_api.py), and `resolver audit verify`'s own input.
    "audit_signing_key_file",
    "audit_signing_kid",
    "audit_public_keys_file",
    # The migration Job's (checked by test_migration_runs_under_a_lock_timeout_with_retries).
    "migration_lock_timeout_ms",
    "migration_attempts",
    "migration_retry_delay_seconds",
}


def test_every_resolver_setting_is_wired_into_the_deployment() -> None:
    """A setting added to resolver/app/config.py must be added to the chart (or listed above)."""
    env = env_of(container(render({"resolver": CUSTOM_SETTINGS})))
    missing = {
        f"RESOLVER_{field.upper()}"
        for field in Settings.model_fields
        if field not in NOT_FROM_VALUES and f"RESOLVER_{field.upper()}" not in env
    }
    assert not missing, f"settings the chart does not render: {sorted(missing)}"


def test_database_url_and_receipt_keys_come_from_existing_secrets() -> None:
    manifests = render(VALUE_SETS["production"])
    main = container(manifests)
    url = env_of(main)["RESOLVER_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert url == {"name": "resolver-runtime-db", "key": "url"}
    secrets_dir = env_of(main)["RESOLVER_SECRETS_DIR"]["value"]
    mount = next(m for m in main["volumeMounts"] if m["mountPath"] == secrets_dir)
    assert mount["readOnly"] is True
    volumes = worker(manifests)["spec"]["template"]["spec"]["volumes"]
    volume = next(v for v in volumes if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "receipt-keys"
    assert env_of(main)["PAYMENTS_TOKEN"] == TOKEN_ENV


def test_receipt_keys_can_be_turned_off() -> None:
    main = container(render({"receiptKeys": {"enabled": False}}))
    assert "RESOLVER_SECRETS_DIR" not in env_of(main)
    assert all("receipt" not in m["name"] for m in main["volumeMounts"])


def test_rendered_output_holds_no_secret_value() -> None:
    with helm.Chart.load(CHART) as chart:
        files = chart.render(VALUE_SETS["production"], name="rr", namespace="recovery")
    text = "\n".join(files.values()).lower()
    for needle in ("postgresql://", "postgres://", "password", "kind: secret", "bearer "):
        assert needle not in text


def test_image_digest_wins_over_the_tag() -> None:
    main = container(render(VALUE_SETS["production"]))
    assert main["image"] == "registry.example/resolver@sha256:" + "ab" * 32
    assert container(render())["image"] == f"approved-action-resolver:{__version__}"


# -- provider config ---------------------------------------------------------------------------


def provider_config(manifests: list[Manifest]) -> str:
    return str(one(manifests, "ConfigMap")["data"]["providers.yaml"])


def test_provider_config_is_mounted_where_resolver_config_points(tmp_path: Path) -> None:
    manifests = render({"providers": PROVIDERS})
    main = container(manifests)
    path = Path(env_of(main)["RESOLVER_CONFIG"]["value"])
    mount = next(m for m in main["volumeMounts"] if m["mountPath"] == str(path.parent))
    volumes = worker(manifests)["spec"]["template"]["spec"]["volumes"]
    volume = next(v for v in volumes if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == one(manifests, "ConfigMap")["metadata"]["name"]
    written = tmp_path / path.name
    written.write_text(provider_config(manifests), encoding="utf-8")
    assert load_provider_config(written) == PROVIDERS["action_types"]


def test_a_provider_config_change_rolls_the_pods() -> None:
    def checksum(values: dict[str, Any]) -> str:
        annotations = worker(render(values))["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["checksum/providers"])

    changed = copy.deepcopy(PROVIDERS)
    changed["action_types"]["shell.exec"]["provider"] = "http_receipt"
    assert checksum({"providers": PROVIDERS}) != checksum({"providers": changed})
    assert checksum({"providers": PROVIDERS}) == checksum({"providers": PROVIDERS})
    assert checksum({"providers": PROVIDERS}) == checksum(
        {"providers": PROVIDERS, "replicaCount": 4}
    )


# -- migration hook --------------------------------------------------------------------------


def test_migration_runs_as_a_pre_install_and_pre_upgrade_hook_with_its_own_identity() -> None:
    manifests = render(VALUE_SETS["production"])
    job = migration_job(manifests)
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    pod = job["spec"]["template"]["spec"]
    (migrate,) = pod["containers"]
    assert migrate["args"] == ["migrate", "--grants"]
    url = env_of(migrate)["RESOLVER_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert url == {"name": "resolver-migrator-db", "key": "url"}
    accounts = {sa["metadata"]["name"]: sa for sa in by_kind(manifests, "ServiceAccount")}
    hook_account = accounts[pod["serviceAccountName"]]
    assert (
        pod["serviceAccountName"]
        != worker(manifests)["spec"]["template"]["spec"]["serviceAccountName"]
    )
    # Hooks run before the release's ordinary objects exist: its account must be a hook too,
    # created first (lower weight).
    hook_weight = int(hook_account["metadata"]["annotations"]["helm.sh/hook-weight"])
    assert hook_weight < int(annotations["helm.sh/hook-weight"])
    assert migrate["securityContext"] == container(manifests)["securityContext"]


def test_migration_uses_the_runtime_secret_when_no_migration_secret_is_given() -> None:
    (migrate,) = migration_job(render())["spec"]["template"]["spec"]["containers"]
    url = env_of(migrate)["RESOLVER_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert url == {"name": "rr-approved-action-resolver-database", "key": "url"}


def test_migration_runs_under_a_lock_timeout_with_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = {
        "migration": {"lockTimeoutMs": 1500, "attempts": 4, "retryDelaySeconds": 0.5},
        "resolver": {"connectTimeoutSeconds": 3},
    }
    (migrate,) = migration_job(render(values))["spec"]["template"]["spec"]["containers"]
    for name, item in env_of(migrate).items():
        if "value" in item:
            monkeypatch.setenv(name, item["value"])
    settings = Settings()
    assert settings.migration_lock_timeout_ms == 1500
    assert settings.migration_attempts == 4
    assert settings.migration_retry_delay_seconds == 0.5
    assert settings.connect_timeout_seconds == 3


def test_migration_grants_can_be_left_to_the_operator() -> None:
    job = migration_job(render({"migration": {"grants": False}}))
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]


def test_migration_job_can_be_disabled() -> None:
    assert not by_kind(render({"migration": {"enabled": False}}), "Job")


# -- availability ---------------------------------------------------------------------------


def test_pdb_and_service_select_exactly_the_worker_pods() -> None:
    manifests = render()
    pod_labels = worker(manifests)["spec"]["template"]["metadata"]["labels"]
    job_labels = migration_job(manifests)["spec"]["template"]["metadata"]["labels"]
    pdb = one(manifests, "PodDisruptionBudget")
    service = one(manifests, "Service")
    for selector in (pdb["spec"]["selector"]["matchLabels"], service["spec"]["selector"]):
        assert selector.items() <= pod_labels.items()
        assert not selector.items() <= job_labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1
    assert service["spec"]["ports"][0]["targetPort"] == "http"


# -- optional monitoring and network policy ------------------------------------------------------


def test_monitoring_objects_are_off_by_default() -> None:
    kinds = {m["kind"] for m in render()}
    assert not kinds & (OPERATOR_KINDS | {"NetworkPolicy"})


def test_service_monitor_scrapes_the_metrics_service() -> None:
    manifests = render(VALUE_SETS["service-monitor"])
    monitor = one(manifests, "ServiceMonitor")
    service = one(manifests, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_network_policy_allows_only_dns_database_and_provider_egress() -> None:
    manifests = render(VALUE_SETS["network-policy"])
    policy = one(manifests, "NetworkPolicy")
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    dns, database, provider = spec["egress"]
    assert {p["port"] for p in dns["ports"]} == {53}
    assert database == {"to": [DB_PEER], "ports": [{"port": 5432, "protocol": "TCP"}]}
    assert provider == PROVIDER_RULE
    (ingress,) = spec["ingress"]
    assert ingress["ports"] == [{"port": "http", "protocol": "TCP"}]
    selector = spec["podSelector"]["matchLabels"].items()
    # Both the replicas and the migration Job need PostgreSQL, and nothing else.
    assert selector <= worker(manifests)["spec"]["template"]["metadata"]["labels"].items()
    assert selector <= migration_job(manifests)["spec"]["template"]["metadata"]["labels"].items()


# -- values that must be refused --------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"resolver": {"pageSize": 65}}, r"/resolver/pageSize.*maximum.*64"),
        ({"resolver": {"pageSize": 0}}, r"/resolver/pageSize.*minimum"),
        ({"resolver": {"maxConnections": 65}}, r"/resolver/maxConnections"),
        ({"replicaCount": "two"}, r"/replicaCount.*want integer"),
        ({"replicaCount": 2.5}, r"/replicaCount.*want integer"),
        ({"replicas": 3}, r"additional properties 'replicas' not allowed"),
        (
            {"terminationGracePeriodSeconds": 25},
            r"terminationGracePeriodSeconds \(25\) must be greater than "
            r"resolver.shutdownGraceSeconds \(25\)",
        ),
        (
            {"terminationGracePeriodSeconds": 30, "resolver": {"shutdownGraceSeconds": 45}},
            r"terminationGracePeriodSeconds \(30\) must be greater",
        ),
        (
            {"resolver": {"recoveryLeaseSeconds": 15}},
            r"resolver.recoveryLeaseSeconds \(15\) must exceed",
        ),
        (
            {
                "providers": {
                    "action_types": {
                        "slow.api": {"provider": "http_receipt", "timeout_seconds": 55.5}
                    }
                }
            },
            r"recoveryLeaseSeconds \(60\) must exceed the longest provider timeout \(55.5 s",
        ),
        (
            {"resolver": {"backoffBaseSeconds": 60, "backoffMaxSeconds": 30}},
            r"backoffMaxSeconds \(30\) must be >= resolver.backoffBaseSeconds \(60\)",
        ),
        ({"securityContext": {"readOnlyRootFilesystem": False}}, r"readOnlyRootFilesystem"),
        ({"podSecurityContext": {"runAsNonRoot": False}}, r"runAsNonRoot"),
        ({"resources": {"limits": None}}, r"/resources.*limits"),
        ({"resources": {"limits": {"memory": None}}}, r"/resources/limits.*memory"),
        ({"networkPolicy": {"enabled": True}}, r"networkPolicy.database.to"),
        ({"providers": {"action_types": {"x.y": {"base_url": "http://x"}}}}, r"provider"),
    ],
)
def test_invalid_values_fail_with_a_message_naming_the_value(
    values: dict[str, Any], message: str
) -> None:
    error = render_error(values)
    assert re.search(message, error), error


# -- documentation ----------------------------------------------------------------------------


def test_chart_readme_values_table_is_generated_from_values_yaml() -> None:
    """The README's table is tools/chart_readme.py's output for the current values.yaml."""
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    values = (CHART / "values.yaml").read_text(encoding="utf-8")
    assert chart_readme.generated_readme(readme, values) == readme, (
        "helm/approved-action-resolver/README.md drifted from values.yaml: "
        "run python tools/chart_readme.py"
    )


def test_every_value_has_a_row_and_a_description() -> None:
    values = (CHART / "values.yaml").read_text(encoding="utf-8")
    rows = chart_readme.rows(yaml.safe_load(values), chart_readme.descriptions(values))
    assert len({row.path for row in rows}) == len(rows)
    assert [row.path for row in rows if not row.description] == []
    # A documented map is one row only when none of its children is documented.
    table = chart_readme.table(values)
    for path in ("resolver.pageSize", "api.oidc.jwksUrl", "autoscaling.keda.enabled", "resources"):
        assert f"| `{path}` |" in table, path


def test_the_generator_notices_drift(tmp_path: Path) -> None:
    """A changed comment or default shows up as drift: the check cannot pass vacuously."""
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    values = (CHART / "values.yaml").read_text(encoding="utf-8")
    edited = values.replace("replicaCount: 2", "replicaCount: 3", 1)
    assert edited != values
    assert chart_readme.generated_readme(readme, edited) != readme
    reworded = values.replace("# -- Resolver replicas.", "# -- Worker replicas.", 1)
    assert reworded != values
    assert chart_readme.generated_readme(readme, reworded) != readme
