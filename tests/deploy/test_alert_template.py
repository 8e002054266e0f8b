"""The alert template: one source for the chart's PrometheusRule and the plain rules file.

The values shape the rules mixin-style (selectors, grouping, runbook base, extra labels,
per-alert disable); the plain file is the template rendered for a shared Prometheus; every
rendering passes promtool; the ServiceMonitor gives the series the labels the rules read.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.prometheus import render_alerts
from tests.helpers.k8s import CHART, helm, one, render
from tests.helpers.prometheus import RULES

SOURCE = CHART / "files" / "alerts.yml"
ON = {"prometheusRule": {"enabled": True}}
EVERY_OPTION: dict[str, Any] = {
    **ON,
    "alerts": {
        "workerSelector": 'job="resolver-workers", cluster="eu1"',
        "apiSelector": 'job="resolver-api"',
        "groupBy": ["cluster", "namespace", "release"],
        "runbookBaseUrl": "https://wiki.corp.test/sre/resolver-runbook.html",
        "ruleLabels": {"team": "payments-sre", "severity": "page-everyone"},
        "disabled": ["ResolverManualQueueAgeing"],
    },
}


def source_alerts() -> list[str]:
    groups = yaml.safe_load(SOURCE.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"]]


def chart_rules(values: dict[str, Any]) -> list[dict[str, Any]]:
    groups = one(render(values), "PrometheusRule")["spec"]["groups"]
    return [rule for group in groups for rule in group["rules"]]


def promtool_check(promtool: Path, rules: list[dict[str, Any]], tmp_path: Path) -> str:
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": rules}]}))
    proc = subprocess.run(
        [str(promtool), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_plain_file_is_the_template_rendered_for_a_shared_prometheus() -> None:
    assert RULES.read_text() == render_alerts.render_file(), (
        "deploy/prometheus/resolver-alerts.yml is stale: run deploy/prometheus/render_alerts.py"
    )


def test_the_chart_renders_the_same_rules_scoped_to_its_release() -> None:
    plain = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    chart = chart_rules(ON)
    assert [r["alert"] for r in chart] == [r["alert"] for r in plain] == source_alerts()
    for mine, theirs in zip(chart, plain, strict=True):
        scoped = (
            theirs["expr"]
            .replace(
                'job="approved-action-resolver"',
                'job="approved-action-resolver", namespace="recovery", release="rr"',
            )
            .replace(
                'job="approved-action-resolver-api"',
                'job="approved-action-resolver-api", namespace="recovery", release="rr"',
            )
        )
        assert mine["expr"] == scoped, mine["alert"]
        assert {k: v for k, v in mine.items() if k != "expr"} == {
            k: v for k, v in theirs.items() if k != "expr"
        }


@pytest.mark.parametrize("values", [ON, EVERY_OPTION], ids=["defaults", "every-option"])
def test_promtool_accepts_the_rendered_prometheus_rule(
    promtool: Path, tmp_path: Path, values: dict[str, Any]
) -> None:
    rules = chart_rules(values)
    out = promtool_check(promtool, rules, tmp_path)
    assert f"SUCCESS: {len(rules)} rules found" in out


def test_every_expression_keeps_the_labels_of_one_installation() -> None:
    """No aggregation without `by (<groupBy>)`, no set operation without `on (<groupBy>)`:
    anything else would merge installations (one dead release hiding behind a live one)."""
    group = "cluster, namespace, release"
    for rule in chart_rules(EVERY_OPTION):
        expr = rule["expr"]
        for match in re.finditer(r"\b(sum|max|min|count|avg)\b\s*(by\s*\(([^)]*)\))?\s*\(", expr):
            assert match.group(3) is not None, (rule["alert"], match.group(0))
            assert match.group(3).startswith(group), (rule["alert"], match.group(0))
        for match in re.finditer(r"\b(and|unless|or)\b\s*(on\s*\(([^)]*)\))?", expr):
            assert match.group(3) == group, (rule["alert"], match.group(0))
        assert "absent(" not in expr, "absent() cannot say which installation is missing"


def test_values_shape_selectors_runbooks_labels_and_disabled_alerts() -> None:
    rules = chart_rules(EVERY_OPTION)
    names = [rule["alert"] for rule in rules]
    assert names == [n for n in source_alerts() if n != "ResolverManualQueueAgeing"]
    for rule in rules:
        selectors = re.findall(r"\{([^}]*)\}", rule["expr"])
        assert selectors, rule["alert"]
        for selector in selectors:
            api = rule["alert"].startswith("ResolverApi")
            job = 'job="resolver-api"' if api else 'job="resolver-workers", cluster="eu1"'
            assert selector.rstrip(", ").endswith(f'{job}, namespace="recovery", release="rr"')
        url = rule["annotations"]["runbook_url"]
        assert url == f"https://wiki.corp.test/sre/resolver-runbook.html#{rule['alert'].lower()}"
        assert rule["labels"]["team"] == "payments-sre"
        assert rule["labels"]["severity"] in {"critical", "warning"}, "an alert's own wins"


def test_without_select_release_the_rules_watch_every_installation() -> None:
    for rule in chart_rules({**ON, "alerts": {"selectRelease": False}}):
        assert "release=" not in rule["expr"] and "namespace=" not in rule["expr"]


def test_default_runbook_links_come_from_the_chart_not_a_placeholder_host() -> None:
    home = yaml.safe_load((CHART / "Chart.yaml").read_text())["home"]
    for rule in chart_rules(ON):
        url = rule["annotations"]["runbook_url"]
        assert url == f"{home}/docs/runbook.md#{rule['alert'].lower()}"
        assert "example.com" not in url


def test_disabled_accepts_exactly_the_alert_names() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    enum = schema["properties"]["alerts"]["properties"]["disabled"]["items"]["enum"]
    assert enum == source_alerts()
    with pytest.raises(helm.HelmError, match=r"alerts/disabled/0"):
        render({**ON, "alerts": {"disabled": ["ResolverTypo"]}})


@pytest.mark.parametrize(
    "alerts",
    [{"workerSelector": ""}, {"groupBy": []}, {"runbookBaseUrl": "wiki/runbook"}],
    ids=["empty-selector", "no-grouping", "relative-runbook"],
)
def test_values_that_would_break_the_rules_are_refused(alerts: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmError, match=r"alerts"):
        render({**ON, "alerts": alerts})


def test_the_service_monitor_labels_series_as_the_rules_select_them() -> None:
    values = {
        "serviceMonitor": {"enabled": True},
        "api": {
            "enabled": True,
            "oidc": {"issuer": "https://idp.test", "audience": "a", "jwksConfigMap": "j"},
            "auditSigning": {"kid": "audit-1"},
        },
    }
    monitor = one(render(values), "ServiceMonitor")
    relabeled = {
        endpoint["port"]: {r["targetLabel"]: r["replacement"] for r in endpoint["relabelings"]}
        for endpoint in monitor["spec"]["endpoints"]
    }
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())["alerts"]
    assert defaults["workerSelector"] == f'job="{relabeled["http"]["job"]}"'
    assert defaults["apiSelector"] == f'job="{relabeled["metrics"]["job"]}"'
    assert relabeled["http"]["release"] == relabeled["metrics"]["release"] == "rr"
    # The operator adds `namespace`; `release` is ours: together they are alerts.groupBy.
    assert defaults["groupBy"] == ["namespace", "release"]


def test_a_chart_without_the_rules_file_fails_with_the_cause(tmp_path: Path) -> None:
    copy = tmp_path / "chart"
    shutil.copytree(CHART, copy)
    (copy / "files" / "alerts.yml").unlink()
    with pytest.raises(helm.HelmError, match=r"files/alerts\.yml is missing"):
        render(ON, chart=copy)


def test_two_releases_rules_in_one_prometheus_page_once_for_the_release_that_is_down(
    promtool: Path, tmp_path: Path
) -> None:
    """Each release's PrometheusRule watches that release only: with a's workers down and
    b's up, a's rules page once for a, b's rules stay quiet (no duplicate, no masking)."""
    rule_files = []
    for namespace, release in (("shop", "a"), ("bank", "b")):
        with helm.Chart.load(CHART) as chart:
            files = chart.render(ON, name=release, namespace=namespace)
        (text,) = [t for p, t in files.items() if p.endswith("prometheusrule.yaml")]
        groups = yaml.safe_load(text)["spec"]["groups"]
        path = tmp_path / f"{release}.yml"
        path.write_text(yaml.safe_dump({"groups": groups}))
        rule_files.append(path.name)
    job = "approved-action-resolver"
    series = [
        {
            "series": f'up{{job="{job}", namespace="shop", release="a", instance="a1"}}',
            "values": "0x10",
        },
        {
            "series": f'up{{job="{job}", namespace="bank", release="b", instance="b1"}}',
            "values": "1x10",
        },
    ]
    case = {
        "rule_files": rule_files,
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {
                        "eval_time": "8m",
                        "alertname": "ResolverDown",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "critical",
                                    "namespace": "shop",
                                    "release": "a",
                                },
                                "exp_annotations": {
                                    "summary": "No resolver replica of shop/a is up",
                                    "description": (
                                        "Every resolver replica of this installation has failed"
                                        " its scrape for 5 minutes. Nothing recovers crashed"
                                        " executions, and the backlog figures are unknown."
                                    ),
                                    "runbook_url": (
                                        "https://example.invalid/approved-action-resolver/docs/"
                                        "runbook.md#resolverdown"
                                    ),
                                },
                            }
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(case))
    proc = subprocess.run(
        [str(promtool), "test", "rules", "test.yml"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_console_url_puts_each_alert_s_console_view_into_its_annotations() -> None:
    console = "https://resolver.corp.test/console"
    rules = {r["alert"]: r for r in chart_rules({**ON, "alerts": {"consoleUrl": console + "/"}})}
    annotations = {name: rule["annotations"].get("console_url") for name, rule in rules.items()}
    # The oldest case past the alert's own threshold, ready to decide.
    assert annotations["ResolverManualQueueAgeing"] == f"{console}#/oldest?min_age_seconds=14400"
    assert annotations["ResolverProposalWaiting"] == f"{console}#/proposals"
    assert annotations["ResolverEscalations"] == (
        f"{console}#/queue?action_type={{{{ $labels.action_type }}}}"
    )
    assert annotations["ResolverDown"] is None  # no console view helps there
    assert all("console" not in rule for rule in rules.values())  # not a rule field
    # Without the value, no alert carries a link to nowhere.
    assert all("console_url" not in r["annotations"] for r in chart_rules(ON))
    with pytest.raises(helm.HelmError, match=r"alerts"):
        render({**ON, "alerts": {"consoleUrl": "resolver.corp.test/console"}})
