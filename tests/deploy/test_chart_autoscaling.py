"""Autoscaling on the due backlog: the HPA (external metric) and KEDA's ScaledObject.

Both are validated against their schemas (kubernetes-validate for the HPA, KEDA's own CRD
schema for the ScaledObject), and the metric they scale on is checked against what the
resolver really exports.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from resolver.telemetry.metrics import BacklogCollector
from tests.helpers.k8s import (
    Manifest,
    assert_lints_clean,
    assert_valid_kubernetes,
    by_kind,
    one,
    render,
    render_error,
    validate_custom_resource,
)
from tests.helpers.stores import Storage

PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
HPA = {"autoscaling": {"hpa": {"enabled": True}, "minReplicas": 2, "maxReplicas": 12}}
KEDA = {
    "autoscaling": {
        "keda": {"enabled": True, "prometheus": {"serverAddress": PROMETHEUS}},
        "minReplicas": 1,
        "maxReplicas": 8,
        "targetDuePerReplica": 32,
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600}},
    }
}
VALUE_SETS: dict[str, dict[str, Any]] = {"hpa": HPA, "keda": KEDA}
FULLNAME = "rr-approved-action-resolver"


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_autoscaling_value_sets_lint_and_validate(name: str) -> None:
    assert_lints_clean(VALUE_SETS[name])
    assert_valid_kubernetes(render(VALUE_SETS[name]))


def test_no_autoscaler_by_default_and_the_deployment_keeps_replica_count() -> None:
    manifests = render({"replicaCount": 3})
    assert not by_kind(manifests, "HorizontalPodAutoscaler")
    assert not by_kind(manifests, "ScaledObject")
    assert one(manifests, "Deployment")["spec"]["replicas"] == 3


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_an_autoscaled_deployment_leaves_the_replica_count_to_the_autoscaler(name: str) -> None:
    """`replicas` in the Deployment would reset the autoscaler's count on every upgrade."""
    values = {**VALUE_SETS[name], "replicaCount": 3}
    assert "replicas" not in one(render(values), "Deployment")["spec"]


def test_hpa_scales_the_worker_on_the_external_due_backlog() -> None:
    hpa = one(render(HPA), "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": FULLNAME,
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 12)
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    assert metric["external"]["metric"]["name"] == "resolver_due_backlog"
    # One installation's series only: a shared Prometheus holds every release's backlog.
    assert metric["external"]["metric"]["selector"]["matchLabels"] == {
        "namespace": "recovery",
        "service": FULLNAME,
    }
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "64"}


def test_keda_scaled_object_queries_this_releases_due_backlog() -> None:
    scaled = one(render(KEDA), "ScaledObject")
    spec = scaled["spec"]
    assert spec["scaleTargetRef"]["name"] == FULLNAME
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 8)
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"] == {
        "scaleDown": {"stabilizationWindowSeconds": 600}
    }
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    metadata = trigger["metadata"]
    assert metadata["serverAddress"] == PROMETHEUS
    assert metadata["threshold"] == "32"
    assert metadata["query"] == (
        f'max(resolver_backlog_dispatches{{queue="due", namespace="recovery", service="{FULLNAME}"}})'
    )


def test_keda_query_can_be_replaced_and_is_templated() -> None:
    values = {
        "autoscaling": {
            **KEDA["autoscaling"],
            "query": 'max(resolver_backlog_dispatches{queue="due", job="{{ .Release.Name }}"})',
        }
    }
    (trigger,) = one(render(values), "ScaledObject")["spec"]["triggers"]
    assert trigger["metadata"]["query"] == 'max(resolver_backlog_dispatches{queue="due", job="rr"})'


def test_the_crd_schema_catches_what_keda_would_refuse() -> None:
    """The shipped CRD schema is strict enough to fail: a misspelt field, a missing trigger."""
    good = one(render(KEDA), "ScaledObject")
    validate_custom_resource(good)
    misspelt: Manifest = {**good, "spec": {**good["spec"], "maxReplicas": 8}}
    with pytest.raises(AssertionError, match="maxReplicas"):
        validate_custom_resource(misspelt)
    no_triggers: Manifest = {**good, "spec": {**good["spec"], "triggers": []}}
    with pytest.raises(AssertionError, match="triggers"):
        validate_custom_resource(no_triggers)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"autoscaling": {"hpa": {"enabled": True}, "keda": KEDA["autoscaling"]["keda"]}},
            r"autoscaling\.hpa\.enabled and autoscaling\.keda\.enabled are exclusive",
        ),
        (
            {"autoscaling": {"hpa": {"enabled": True}, "minReplicas": 5, "maxReplicas": 3}},
            r"autoscaling\.minReplicas \(5\) must be <= autoscaling\.maxReplicas \(3\)",
        ),
        (
            {"autoscaling": {"keda": {"enabled": True}}},
            r"autoscaling\.keda\.enabled needs autoscaling\.keda\.prometheus\.serverAddress",
        ),
        ({"autoscaling": {"minReplicas": 0}}, r"/autoscaling/minReplicas.*minimum"),
        ({"autoscaling": {"targetDuePerReplica": 0}}, r"/autoscaling/targetDuePerReplica"),
        ({"autoscaling": {"hpa": {"enabled": True, "min": 1}}}, r"additional properties 'min'"),
    ],
)
def test_bad_autoscaling_values_fail_naming_the_value(values: dict[str, Any], message: str) -> None:
    assert re.search(message, render_error(values))


def desired_replicas(due: float, target: float, low: int, high: int) -> int:
    """What the HPA controller computes for an AverageValue external metric."""
    return min(high, max(low, math.ceil(due / target)))


@pytest.mark.parametrize(("due", "expected"), [(0, 2), (64, 2), (129, 3), (640, 10), (5_000, 12)])
def test_scale_to_n_follows_the_documented_formula(due: int, expected: int) -> None:
    metric = one(render(HPA), "HorizontalPodAutoscaler")["spec"]
    target = float(metric["metrics"][0]["external"]["target"]["averageValue"])
    assert desired_replicas(due, target, metric["minReplicas"], metric["maxReplicas"]) == expected


def test_the_scaled_metric_is_the_due_backlog_the_resolver_exports(
    store: Storage,
) -> None:
    """A renamed gauge would leave both autoscalers scaling on nothing."""
    registry = CollectorRegistry()
    registry.register(BacklogCollector(store, ttl_seconds=0))
    families = {family.name: family for family in registry.collect()}
    query = one(render(KEDA), "ScaledObject")["spec"]["triggers"][0]["metadata"]["query"]
    (metric,) = re.findall(r"max\((\w+)\{", query)
    assert metric in families, sorted(families)
    assert "due" in {sample.labels.get("queue") for sample in families[metric].samples}
