"""The alert rules: valid for promtool, unit-tested firing and not, documented, on real names."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from resolver.core.domain import (
    BacklogSnapshot,
    DispatchIdentity,
    ExecutionState,
    Finding,
    FindingKind,
    LateRecord,
    LateWatch,
    ProviderFailure,
)
from resolver.core.events import CycleReport, InspectedPage, ProviderCall
from resolver.retention.pruning import PruneSummary
from resolver.telemetry.api_metrics import ApiMetrics
from resolver.telemetry.metrics import (
    BacklogCollector,
    ResolverMetrics,
    register_build_info,
    register_liveness_bound,
)
from resolver.telemetry.retention_metrics import PruneCollector
from tests.helpers.prometheus import ROOT, RULE_TESTS, RULES, RUNBOOK

REQUIRED_ANNOTATIONS = {"summary", "description", "runbook_url"}


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_accepts_the_rules(promtool: Path) -> None:
    proc = subprocess.run(
        [str(promtool), "check", "rules", str(RULES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in proc.stdout


def test_promtool_unit_tests_pass(promtool: Path) -> None:
    assert RULE_TESTS, "no promtool tests in deploy/prometheus/tests"
    proc = subprocess.run(
        [str(promtool), "test", "rules", *map(str, RULE_TESTS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout and "FAILED" not in proc.stdout


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for path in RULE_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert names - firing == set(), "alerts never tested firing"
    assert names - silent == set(), "alerts never tested not firing"


def test_every_alert_has_annotations_severity_and_a_runbook_section() -> None:
    anchors = {_slug(h) for h in re.findall(r"^## (.+)$", RUNBOOK.read_text(), re.MULTILINE)}
    for rule in alert_rules():
        name = rule["alert"]
        assert set(rule["annotations"]) >= REQUIRED_ANNOTATIONS, name
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        url = rule["annotations"]["runbook_url"]
        assert url.endswith(f"docs/runbook.md#{_slug(name)}"), (name, url)
        assert _slug(name) in anchors, f"docs/runbook.md has no section for {name}"
    assert anchors == {_slug(rule["alert"]) for rule in alert_rules()}, "runbook sections"


def test_rules_only_use_metrics_the_resolver_exports() -> None:
    exported = exported_sample_names()
    for rule in alert_rules():
        used = set(re.findall(r"\b(resolver_[a-z_]+)\b", rule["expr"]))
        assert used <= exported, (rule["alert"], used - exported)  # `up` is Prometheus's


def test_docs_list_every_exported_metric() -> None:
    doc = (ROOT / "docs" / "observability.md").read_text()
    families = {f.name for f in _registry().collect()}
    missing = {name for name in families if f"`{_exposed(name)}`" not in doc}
    assert missing == set()


def exported_sample_names() -> set[str]:
    """Every sample name a worker or an API process exports."""
    registries = (_registry(), _api_registry())
    return {s.name for r in registries for family in r.collect() for s in family.samples}


class FixedReader:
    def backlog_snapshot(self, count_cap: int, now_ms: int | None = None) -> BacklogSnapshot:
        return BacklogSnapshot(10_000, count_cap, {("due", "t"): 1}, 5_000, 1_000)

    def ping(self) -> None:
        pass


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    metrics = ResolverMetrics(registry)
    # Histograms and labelled counters show their samples.
    metrics.cycle_completed(CycleReport(page_size=1), 0.1)
    identity = DispatchIdentity(1, "d", "ar", "p", "t", "a" * 64, 1, 0, "k")
    unavailable = {"d": Finding(FindingKind.UNAVAILABLE)}
    call = ProviderCall("p", [identity], unavailable, 0, 0.1, ProviderFailure.TIMEOUT)
    metrics.inspected(InspectedPage(unavailable, [call], [], 0.1))
    # An escalation is counted from a page commit's routing; one label set shows its samples.
    metrics.escalations.labels("t", "missing")
    # A contradiction is counted from the late-evidence watcher's record, as the worker does.
    watch = LateWatch(identity, "token", ExecutionState.FAILED, 0)
    metrics.late_evidence([LateRecord(watch, FindingKind.VERIFIED_SUCCEEDED, True, False)])
    register_build_info(registry, "rev")
    register_liveness_bound(registry, 180.0)
    registry.register(BacklogCollector(FixedReader()))
    registry.register(PruneCollector(FixedPruneReader()))
    return registry


class FixedPruneReader:
    def prune_summary(self) -> PruneSummary:
        return PruneSummary(3, 1, 2_000, 1_000)


def _api_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    metrics = ApiMetrics(registry)
    metrics.request("/v1/manual", 503, 0.1)  # the histogram and the request counter show up
    return registry


def _exposed(family: str) -> str:
    """The name as scraped: counters gain `_total`, info metrics `_info`."""
    for collector in _registry().collect():
        if collector.name == family:
            return {"counter": f"{family}_total", "info": f"{family}_info"}.get(
                collector.type, family
            )
    return family


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (lowercase, punctuation dropped)."""
    return re.sub(r"[^a-z0-9 -]", "", heading.strip().lower()).replace(" ", "-")
