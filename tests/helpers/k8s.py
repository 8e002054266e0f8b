"""Render the chart with the real Helm engine and validate manifests against Kubernetes schemas."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

helm = pytest.importorskip("helm_python", reason="the test extra provides helm-python-sdk")
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="the test extra provides kubernetes-validate"
)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "approved-action-resolver"
KUSTOMIZE_BASE = ROOT / "deploy" / "kustomize" / "base"
# The oldest minor the chart declares (Chart.yaml kubeVersion) and the newest the schemas know.
_NEWEST = kubernetes_validate.latest_version()
KUBE_VERSIONS = ("1.27.0", _NEWEST if _NEWEST.count(".") == 2 else f"{_NEWEST}.0")
# Prometheus Operator kinds: no schema ships with kubernetes-validate; checked separately.
OPERATOR_KINDS = frozenset({"ServiceMonitor", "PrometheusRule"})
# Custom resources validated against their CRD's schema, shipped in tests/deploy/crds/.
CRDS = {
    ("keda.sh/v1alpha1", "ScaledObject"): ROOT
    / "tests"
    / "deploy"
    / "crds"
    / "keda.sh_scaledobjects.yaml"
}

Manifest = dict[str, Any]


def render(
    values: dict[str, Any] | None = None, *, chart: Path = CHART, upgrade: bool = False
) -> list[Manifest]:
    """Every object the chart renders for `values`, as an install (or upgrade) would."""
    with helm.Chart.load(chart) as loaded:
        files = loaded.render(
            values or {},
            name="rr",
            namespace="recovery",
            is_install=not upgrade,
            is_upgrade=upgrade,
        )
    return list(parse(text for path, text in sorted(files.items()) if path.endswith(".yaml")))


def render_error(values: dict[str, Any]) -> str:
    """The message of the failure the chart must produce for `values`."""
    with pytest.raises(helm.HelmError) as failure:
        render(values)
    return str(failure.value)


def assert_lints_clean(values: dict[str, Any]) -> None:
    """`helm lint --strict` finds nothing at warning level or above, on every Kubernetes
    version the chart declares."""
    for version in KUBE_VERSIONS:
        report = helm.lint(CHART, values, strict=True, kube_version=f"v{version}")
        problems = [m for m in report["messages"] if m["severity"] >= 2]
        assert report["errors"] == [] and problems == [], report


def assert_valid_kubernetes(manifests: Iterable[Manifest]) -> None:
    """Strict schema validation of every manifest but the operator kinds (no schema ships);
    custom resources against their CRD's schema."""
    for manifest in manifests:
        if (manifest["apiVersion"], manifest["kind"]) in CRDS:
            validate_custom_resource(manifest)
        elif manifest["kind"] not in OPERATOR_KINDS:
            validate_strict(manifest)


@functools.cache
def crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    """The CRD's openAPIV3Schema for that version, closed like strict field validation:
    an object schema with properties and no other allowance refuses unknown fields (the API
    server would silently prune them, so a misspelt field would be lost without a word)."""
    crd = yaml.safe_load(CRDS[(api_version, kind)].read_text(encoding="utf-8"))
    version = api_version.split("/", 1)[1]
    (entry,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: dict[str, Any] = entry["schema"]["openAPIV3Schema"]
    _close(schema)
    return schema


def _close(node: Any) -> None:
    if isinstance(node, dict):
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        for value in node.values():
            _close(value)
    elif isinstance(node, list):
        for item in node:
            _close(item)


def validate_custom_resource(manifest: Manifest) -> None:
    schema = crd_schema(manifest["apiVersion"], manifest["kind"])
    errors = sorted(
        jsonschema.Draft7Validator(schema).iter_errors(manifest), key=lambda e: list(e.path)
    )
    if errors:
        where = ".".join(str(p) for p in errors[0].path)
        raise AssertionError(
            f"{manifest['kind']}/{manifest['metadata']['name']} is invalid against its CRD at "
            f"{where}: {errors[0].message}"
        )


def parse(texts: Iterable[str]) -> Iterator[Manifest]:
    for text in texts:
        for doc in yaml.safe_load_all(text):
            if doc:
                yield doc


def validate_strict(manifest: Manifest) -> None:
    """Strict schema validation (unknown fields fail) against every version in KUBE_VERSIONS."""
    for version in KUBE_VERSIONS:
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            raise AssertionError(
                f"{manifest['kind']}/{manifest['metadata']['name']} is invalid for Kubernetes "
                f"{version} at {where}: {exc.message}"
            ) from None


def by_kind(manifests: Iterable[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def one(manifests: Iterable[Manifest], kind: str) -> Manifest:
    found = by_kind(manifests, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def pod_specs(manifests: Iterable[Manifest]) -> list[tuple[str, Manifest]]:
    """(name, pod spec) of every workload that runs containers (bare pods included)."""
    return [
        (m["metadata"]["name"], m["spec"] if m["kind"] == "Pod" else m["spec"]["template"]["spec"])
        for m in manifests
        if m["kind"] in {"Deployment", "Job", "StatefulSet", "DaemonSet", "Pod"}
    ]


def env_of(container: Manifest) -> dict[str, Manifest]:
    return {item["name"]: item for item in container.get("env", [])}


SENSITIVE_ENV_WORDS = ("URL", "TOKEN", "PASSWORD", "SECRET", "KEY")
# Names with such a word that hold no secret: a directory, the identity provider's public keys.
PUBLIC_ENV = frozenset({"RESOLVER_SECRETS_DIR", "RESOLVER_OIDC_JWKS_URL"})


def assert_hardened(manifests: list[Manifest]) -> None:
    """The security properties every rendering (chart or kustomize) must keep."""
    assert not by_kind(manifests, "Secret"), "secrets are referenced, never rendered"
    for sa in by_kind(manifests, "ServiceAccount"):
        assert sa.get("automountServiceAccountToken") is False, sa["metadata"]["name"]
    workloads = pod_specs(manifests)
    assert workloads, "no workload rendered"
    for name, pod in workloads:
        assert pod.get("automountServiceAccountToken") is False, name
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        assert pod["securityContext"]["runAsUser"] > 0, name
        assert not pod.get("hostNetwork") and not pod.get("hostPID"), name
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            assert_container_hardened(name, container)


def assert_container_hardened(workload: str, container: Manifest) -> None:
    where = f"{workload}/{container['name']}"
    ctx = container["securityContext"]
    assert ctx["runAsNonRoot"] is True, where
    assert ctx["readOnlyRootFilesystem"] is True, where
    assert ctx["allowPrivilegeEscalation"] is False, where
    assert ctx["capabilities"]["drop"] == ["ALL"], where
    assert not ctx["capabilities"].get("add"), where
    assert not ctx.get("privileged"), where
    assert ctx["seccompProfile"]["type"] == "RuntimeDefault", where
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind]), f"{where} {kind}"
    for env in container.get("env", []):
        if any(word in env["name"] for word in SENSITIVE_ENV_WORDS) and (
            env["name"] not in PUBLIC_ENV
        ):
            assert "value" not in env, f"{where}: {env['name']} must come from a Secret"
            assert "secretKeyRef" in env["valueFrom"], f"{where}: {env['name']}"


DB_PEER = {"ipBlock": {"cidr": "10.20.0.0/24"}}


PROVIDER_RULE = {
    "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "payments"}}}],
    "ports": [{"port": 8080, "protocol": "TCP"}],
}


PROVIDERS = {
    "action_types": {
        "payments.charge": {
            "provider": "http_receipt",
            "base_url": "http://payments.payments.svc:8080",
            "token_env": "PAYMENTS_TOKEN",
            "timeout_seconds": 2,
        },
        "shell.exec": {"provider": "manual_only"},
    }
}


TOKEN_ENV = {
    "name": "PAYMENTS_TOKEN",
    "valueFrom": {"secretKeyRef": {"name": "payments-receipts", "key": "token"}},
}


DOCKERFILE = ROOT / "deploy" / "Dockerfile"


VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "scaled": {"replicaCount": 5, "resolver": {"pageSize": 64, "maxConnections": 8}},
    "single-replica-no-pdb": {"replicaCount": 1, "podDisruptionBudget": {"enabled": False}},
    "network-policy": {
        "networkPolicy": {
            "enabled": True,
            "database": {"to": [DB_PEER]},
            "providers": [PROVIDER_RULE],
            "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
        }
    },
    "service-monitor": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
    # Alerts and dashboard: every monitoring option on.
    "monitoring-everything": {
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True, "labels": {"release": "prom"}},
        "alerts": {
            "workerSelector": 'job="approved-action-resolver", cluster="eu1"',
            "groupBy": ["cluster", "namespace", "release"],
            "runbookBaseUrl": "https://wiki.corp.test/resolver/runbook.html",
            "ruleLabels": {"team": "sre"},
            "disabled": ["ResolverBacklogGrowing"],
        },
        "dashboard": {
            "enabled": True,
            "namespace": "monitoring",
            "annotations": {"grafana_folder": "Recovery"},
        },
    },
    "production": {
        "replicaCount": 3,
        "image": {"repository": "registry.example/resolver", "digest": "sha256:" + "ab" * 32},
        "database": {"existingSecret": "resolver-runtime-db"},
        "migration": {"database": {"existingSecret": "resolver-migrator-db"}},
        "receiptKeys": {"existingSecret": "receipt-keys"},
        "providers": PROVIDERS,
        "extraEnv": [TOKEN_ENV],
        "serviceMonitor": {"enabled": True},
        "networkPolicy": {"enabled": True, "database": {"to": [DB_PEER]}},
    },
}


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        logical.append(pending.strip())
        pending = ""
    return [(i.split(None, 1)[0].upper(), i.split(None, 1)[1]) for i in logical]


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for instruction in instructions():
        if instruction[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(instruction)
    return result
