"""docs/observability.md's scrape config, applied to the chart's rendered pods, scrapes what
the chart's ServiceMonitor scrapes, with the labels the alert rules and the dashboard read.

Prometheus's pod discovery is reproduced for the rendered pod templates (one target per
container port, `__meta_kubernetes_*` labels as Prometheus names them) and the example's
relabel rules are applied the way Prometheus applies `keep` and `replace` (the default).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.helpers.k8s import ROOT, pod_specs, render

DOC = ROOT / "docs" / "observability.md"
RELEASE, NAMESPACE = "rr", "recovery"
API = {
    "enabled": True,
    "oidc": {"issuer": "https://idp.test", "audience": "a", "jwksConfigMap": "j"},
}


def scrape_configs() -> list[dict[str, Any]]:
    for block in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S):
        parsed = yaml.safe_load(block)
        if isinstance(parsed, dict) and "scrape_configs" in parsed:
            return list(parsed["scrape_configs"])
    raise AssertionError("docs/observability.md has no scrape_configs example")


def sanitize(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def discovered_targets() -> list[dict[str, str]]:
    """What `kubernetes_sd_configs: [{role: pod}]` discovers for the chart's pods."""
    manifests = render({"api": API})
    # The helm test Pod is its own template (it has no ports: never a target).
    templates = {
        m["metadata"]["name"]: m if m["kind"] == "Pod" else m["spec"]["template"]
        for m in manifests
        if m["kind"] in {"Deployment", "Job", "Pod"}
    }
    targets = []
    for name, pod in pod_specs(manifests):
        labels = templates[name]["metadata"].get("labels", {})
        for container in pod["containers"]:
            for port in container.get("ports", []):
                meta = {
                    "__address__": f"10.0.0.1:{port['containerPort']}",
                    "__meta_kubernetes_namespace": NAMESPACE,
                    "__meta_kubernetes_pod_name": f"{name}-abc12",
                    "__meta_kubernetes_pod_container_name": container["name"],
                    "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                    **{f"__meta_kubernetes_pod_label_{sanitize(k)}": v for k, v in labels.items()},
                }
                targets.append(meta)
    return targets


def relabel(labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str] | None:
    """Prometheus's `keep` and `replace` (regex anchored, separator ';', default `(.*)`)."""
    out = dict(labels)
    for rule in rules:
        value = ";".join(out.get(name, "") for name in rule.get("source_labels", []))
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        action = rule.get("action", "replace")
        if action == "keep":
            if match is None:
                return None
        elif action == "replace":
            if match is not None:
                out[rule["target_label"]] = match.expand(
                    rule.get("replacement", "$1").replace("$", "\\")
                )
        else:
            raise AssertionError(f"the test does not model action {action}")
    return {k: v for k, v in out.items() if not k.startswith("__")}


def scraped() -> dict[str, list[dict[str, str]]]:
    result: dict[str, list[dict[str, str]]] = {}
    for config in scrape_configs():
        assert config["kubernetes_sd_configs"] == [{"role": "pod"}]
        kept = [relabel(t, config["relabel_configs"]) for t in discovered_targets()]
        result[config["job_name"]] = [labels for labels in kept if labels is not None]
    return result


def test_the_example_scrapes_one_worker_and_one_api_metrics_port_per_pod() -> None:
    jobs = scraped()
    assert set(jobs) == {"approved-action-resolver", "approved-action-resolver-api"}
    (worker,) = jobs["approved-action-resolver"]
    (api,) = jobs["approved-action-resolver-api"]
    assert worker["pod"].startswith("rr-approved-action-resolver-abc")
    assert api["pod"].startswith("rr-approved-action-resolver-api-")
    for labels in (worker, api):
        assert (labels["namespace"], labels["release"]) == (NAMESPACE, RELEASE)


def test_the_example_keeps_the_ports_the_service_monitor_scrapes() -> None:
    manifests = render({"api": API, "serviceMonitor": {"enabled": True}})
    (monitor,) = [m for m in manifests if m["kind"] == "ServiceMonitor"]
    service_ports = {
        (s["metadata"]["labels"]["app.kubernetes.io/component"], p["name"]): p["targetPort"]
        for s in manifests
        if s["kind"] == "Service"
        for p in s["spec"]["ports"]
    }
    monitored = {e["port"] for e in monitor["spec"]["endpoints"]}
    example = {
        config["job_name"]: next(
            r["regex"]
            for r in config["relabel_configs"]
            if r.get("source_labels") == ["__meta_kubernetes_pod_container_port_name"]
        )
        for config in scrape_configs()
    }
    assert {service_ports[("worker", p)] for p in monitored if ("worker", p) in service_ports} == {
        example["approved-action-resolver"]
    }
    assert {service_ports[("api", p)] for p in monitored if ("api", p) in service_ports} == {
        example["approved-action-resolver-api"]
    }
    # The job names are the ones the ServiceMonitor sets and the rules select.
    jobs = {
        r["replacement"]
        for e in monitor["spec"]["endpoints"]
        for r in e["relabelings"]
        if r["targetLabel"] == "job"
    }
    assert jobs == set(example)
