"""Chart completeness: helm test, PDB eviction policy, extension points, TLS CA, preStop, NOTES.

The "everything" value set turns every option of the chart on at once; it must lint, render,
validate strictly and stay hardened on the oldest and the newest Kubernetes the chart supports.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.helpers.k8s import (
    CHART,
    KUBE_VERSIONS,
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
from tests.helpers.k8s import VALUE_SETS as CHART_VALUE_SETS

FULLNAME = "rr-approved-action-resolver"
DB_PEER = {"ipBlock": {"cidr": "10.20.0.0/24"}}
CA_VOLUME = {
    "name": "db-ca",
    "secret": {"secretName": "db-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]},
}
CA_MOUNT = {"name": "db-ca", "mountPath": "/etc/resolver/db-ca", "readOnly": True}
HARDENED = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
INIT = {
    "name": "wait-for-proxy",
    "image": "registry.example/tools:1.0",
    "args": ["--check"],
    "securityContext": HARDENED,
    "resources": {
        "requests": {"cpu": "10m", "memory": "16Mi"},
        "limits": {"cpu": "50m", "memory": "32Mi"},
    },
}
EXTRA_OBJECT = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "{{ .Release.Name }}-extra"},
    "data": {"k": "v"},
}
EVERYTHING: dict[str, Any] = {
    "image": {"repository": "registry.example/resolver", "digest": "sha256:" + "ab" * 32},
    "database": {"existingSecret": "resolver-runtime-db"},
    "migration": {"database": {"existingSecret": "resolver-migrator-db"}},
    "receiptKeys": {"existingSecret": "receipt-keys", "optional": True},
    "extraEnv": [
        {"name": "PAYMENTS_TOKEN", "valueFrom": {"secretKeyRef": {"name": "p", "key": "t"}}}
    ],
    "extraEnvFrom": [{"secretRef": {"name": "provider-tokens"}}],
    "extraVolumes": [CA_VOLUME],
    "extraVolumeMounts": [CA_MOUNT],
    "initContainers": [INIT],
    "commonLabels": {"team": "payments", "cost-center": "cc-42"},
    "extraObjects": [
        EXTRA_OBJECT,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra-text\n",
    ],
    # Alerts, dashboard, ServiceMonitor and PrometheusRule with every option (the monitoring-everything set).
    **CHART_VALUE_SETS["monitoring-everything"],
    "networkPolicy": {"enabled": True, "database": {"to": [DB_PEER]}},
    "autoscaling": {
        "keda": {"enabled": True, "prometheus": {"serverAddress": "http://prom.monitoring:9090"}}
    },
    "api": {
        "enabled": True,
        "oidc": {
            "issuer": "https://idp.example",
            "audience": "resolver-api",
            "jwksUrl": "https://idp.example/jwks",
        },
        "networkPolicy": {"jwksEgress": [{"to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}]}]},
    },
}


def pods(manifests: list[Manifest]) -> dict[str, Manifest]:
    """Pod spec by component: worker, api, migrate, test."""
    found: dict[str, Manifest] = {}
    for m in manifests:
        if m["kind"] not in {"Pod", "Deployment", "Job"}:
            continue
        component = m["metadata"]["labels"].get("app.kubernetes.io/component")
        if m["kind"] == "Pod":
            found[component] = m["spec"]
        elif m["kind"] in {"Deployment", "Job"}:
            found[component] = m["spec"]["template"]["spec"]
    return found


# -- everything on, oldest and newest Kubernetes --------------------------------------------


def test_kube_versions_tested_are_the_charts_declared_oldest_and_the_newest_known() -> None:
    declared = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))["kubeVersion"]
    oldest = re.search(r">=\s*(\d+\.\d+)", declared)
    assert oldest and KUBE_VERSIONS[0].startswith(oldest[1] + ".")
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    for version in KUBE_VERSIONS:
        minor = ".".join(version.split(".")[:2])
        assert minor in readme, f"README does not state Kubernetes {minor}"


def test_everything_on_lints_renders_validates_and_stays_hardened() -> None:
    assert_lints_clean(EVERYTHING)
    manifests = render(EVERYTHING)
    assert_valid_kubernetes(manifests)  # on both KUBE_VERSIONS
    assert_hardened(manifests)
    kinds = {m["kind"] for m in manifests}
    assert {"ScaledObject", "Pod", "NetworkPolicy", "PodDisruptionBudget", "Job"} <= kinds


def test_defaults_render_validate_and_stay_hardened_with_the_test_pod() -> None:
    manifests = render()
    assert_valid_kubernetes(manifests)
    assert_hardened(manifests)
    assert one(manifests, "Pod")["metadata"]["annotations"]["helm.sh/hook"] == "test"


# -- helm test --------------------------------------------------------------------------------


def test_helm_test_pod_runs_status_json_against_the_releases_runtime_database() -> None:
    manifests = render(EVERYTHING)
    pod = one(manifests, "Pod")
    assert pod["metadata"]["annotations"] == {
        "helm.sh/hook": "test",
        "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
    }
    (status,) = pod["spec"]["containers"]
    assert status["args"] == ["status", "--json"]
    worker = one(
        [m for m in manifests if m["kind"] == "Deployment" and m["metadata"]["name"] == FULLNAME],
        "Deployment",
    )
    worker_env = env_of(worker["spec"]["template"]["spec"]["containers"][0])
    assert env_of(status)["RESOLVER_DATABASE_URL"] == worker_env["RESOLVER_DATABASE_URL"]
    assert pod["spec"]["restartPolicy"] == "Never"
    # The worker's NetworkPolicy selects it (release labels, not component api), so the test
    # pod reaches PostgreSQL exactly as the replicas do; the Service does not (not a worker).
    labels = pod["metadata"]["labels"]
    policy = next(
        p for p in by_kind(manifests, "NetworkPolicy") if p["metadata"]["name"] == FULLNAME
    )
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    service = next(s for s in by_kind(manifests, "Service") if s["metadata"]["name"] == FULLNAME)
    assert not service["spec"]["selector"].items() <= labels.items()


def test_helm_test_pod_can_be_turned_off() -> None:
    assert not by_kind(render({"helmTest": {"enabled": False}}), "Pod")


# -- PodDisruptionBudget ------------------------------------------------------------------------


def test_pdbs_let_unhealthy_pods_be_evicted_so_a_database_outage_never_blocks_drains() -> None:
    budgets = by_kind(render(EVERYTHING), "PodDisruptionBudget")
    assert len(budgets) == 2
    assert {b["spec"]["unhealthyPodEvictionPolicy"] for b in budgets} == {"AlwaysAllow"}
    strict = render({"podDisruptionBudget": {"unhealthyPodEvictionPolicy": "IfHealthyBudget"}})
    assert (
        one(strict, "PodDisruptionBudget")["spec"]["unhealthyPodEvictionPolicy"]
        == "IfHealthyBudget"
    )


# -- extension points ---------------------------------------------------------------------------


def test_ca_volume_reaches_every_pod_that_connects_to_postgresql() -> None:
    """`sslmode=verify-full&sslrootcert=/etc/resolver/db-ca/ca.crt` in the URL needs the CA
    file in the worker, the API, the migration Job and the helm test pod."""
    found = pods(render(EVERYTHING))
    assert set(found) == {"worker", "api", "migrate", "test"}
    for component, spec in found.items():
        assert CA_VOLUME in spec["volumes"], component
        (main,) = spec["containers"]
        assert CA_MOUNT in main["volumeMounts"], component


def test_readme_ca_example_renders_what_the_test_above_checks() -> None:
    """The README's CA example is real values: it renders to the mounts checked above."""
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- ca-example -->\s*```yaml\n(.*?)```", readme, re.S)
    assert block, "README lacks the CA example"
    example = yaml.safe_load(block[1])
    found = pods(render(example))
    for spec in found.values():
        mounts = spec["containers"][0]["volumeMounts"]
        assert any(m["mountPath"] == "/etc/resolver/db-ca" for m in mounts)
    assert "sslmode=verify-full" in readme and "sslrootcert=/etc/resolver/db-ca/ca.crt" in readme


def test_worker_gets_init_containers_env_from_and_extra_env() -> None:
    worker = pods(render(EVERYTHING))["worker"]
    assert worker["initContainers"] == [INIT]
    (main,) = worker["containers"]
    assert main["envFrom"] == [{"secretRef": {"name": "provider-tokens"}}]
    assert "PAYMENTS_TOKEN" in env_of(main)


def test_common_labels_are_on_every_object_but_never_in_selectors() -> None:
    manifests = render(EVERYTHING)
    for m in manifests:
        if m["metadata"]["name"].startswith("rr-extra"):
            continue  # extraObjects are rendered as given
        assert m["metadata"]["labels"]["team"] == "payments", (m["kind"], m["metadata"]["name"])
    for m in by_kind(manifests, "Deployment"):
        assert "team" not in m["spec"]["selector"]["matchLabels"]


def test_common_labels_cannot_override_the_charts_own() -> None:
    error = render_error({"commonLabels": {"app.kubernetes.io/name": "other"}})
    assert "commonLabels must not set app.kubernetes.io/name" in error


def test_extra_objects_are_rendered_and_templated() -> None:
    names = {m["metadata"]["name"] for m in by_kind(render(EVERYTHING), "ConfigMap")}
    assert {"rr-extra", "rr-extra-text"} <= names


def test_receipt_keys_secret_may_be_optional() -> None:
    def secret_volume(values: dict[str, Any]) -> Manifest:
        volumes = pods(render(values))["worker"]["volumes"]
        return next(v["secret"] for v in volumes if v["name"] == "receipt-keys")

    assert "optional" not in secret_volume({})
    assert secret_volume({"receiptKeys": {"optional": True}})["optional"] is True


# -- API preStop --------------------------------------------------------------------------------


def test_api_pauses_before_sigterm_with_an_exec_form_sleep() -> None:
    (api,) = pods(render(EVERYTHING))["api"]["containers"]
    assert api["lifecycle"]["preStop"] == {"exec": {"command": ["/usr/bin/sleep", "5"]}}


def test_api_pre_stop_must_leave_time_for_requests() -> None:
    values = {**EVERYTHING, "api": {**EVERYTHING["api"], "preStopSleepSeconds": 30}}
    error = render_error(values)
    assert (
        "api.preStopSleepSeconds (30) must be below api.terminationGracePeriodSeconds (30)" in error
    )


def test_the_image_keeps_the_sleep_binary_the_pre_stop_runs() -> None:
    from tests.helpers.k8s import stages

    removed = " ".join(args for name, args in stages()[-1] if name == "RUN")
    assert "sleep" not in removed


# -- NOTES.txt ----------------------------------------------------------------------------------


def notes(values: dict[str, Any]) -> str:
    with helm.Chart.load(CHART) as chart:
        files = chart.render(
            values, name="rr", namespace="recovery", is_install=True, is_upgrade=False
        )
    return next(text for path, text in files.items() if path.endswith("NOTES.txt"))


@pytest.mark.parametrize(
    "values", [{}, EVERYTHING, {"api": EVERYTHING["api"], "migration": {"enabled": False}}]
)
def test_notes_repeat_no_line(values: dict[str, Any]) -> None:
    lines = [line.strip() for line in notes(values).splitlines() if line.strip()]
    repeated = {line for line in lines if lines.count(line) > 1}
    assert not repeated, repeated


def test_notes_name_the_migration_secret_once_when_it_is_the_runtime_one() -> None:
    text = notes({})
    assert text.count(f"{FULLNAME}-database") == 1
    assert "the migration Job uses it too" in text
