"""The chart's optional retention CronJob, rendered by the real Helm engine and validated
against the Kubernetes schemas; its arguments are parsed by the real `resolver prune`."""

from __future__ import annotations

from typing import Any

import click
import pytest

from resolver.app.prune_cli import prune_cmd
from tests.helpers.k8s import (
    CHART,
    Manifest,
    assert_container_hardened,
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

ENABLED: dict[str, Any] = {
    "prune": {"enabled": True, "database": {"existingSecret": "resolver-retention-db"}}
}
EXPORTING: dict[str, Any] = {
    "prune": {
        "enabled": True,
        "olderThan": "400d",
        "includeAudit": True,
        "batch": 2000,
        "export": {"enabled": True, "existingClaim": "prune-exports"},
    }
}


def cronjob(values: dict[str, Any]) -> Manifest:
    return one(render(values), "CronJob")


def pod(job: Manifest) -> Manifest:
    return job["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def test_no_cronjob_by_default() -> None:
    assert by_kind(render(), "CronJob") == []


@pytest.mark.parametrize("values", [ENABLED, EXPORTING], ids=["enabled", "exporting"])
def test_cronjob_is_valid_kubernetes_lints_clean_and_is_hardened(values: dict[str, Any]) -> None:
    manifests = render(values)
    assert_valid_kubernetes(manifests)
    assert_lints_clean(values)
    assert_hardened(manifests)
    spec = pod(one(manifests, "CronJob"))
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    for container in spec["containers"]:
        assert_container_hardened("prune", container)


def test_defaults_prune_daily_as_the_retention_role_keeping_audit_facts() -> None:
    job = cronjob(ENABLED)
    assert job["spec"]["schedule"] == "17 3 * * *"
    assert job["spec"]["concurrencyPolicy"] == "Forbid"
    (container,) = pod(job)["containers"]
    assert container["args"] == [
        "prune",
        "--older-than=90d",
        "--batch=500",
        "--lock-timeout=2000",
        "--duty-cycle=0.1",
    ]
    url = env_of(container)["RESOLVER_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert url == {"name": "resolver-retention-db", "key": "url"}
    assert "--include-audit" not in container["args"]


def test_export_goes_to_the_claim_and_include_audit_is_passed() -> None:
    job = cronjob(EXPORTING)
    spec = pod(job)
    (container,) = spec["containers"]
    mount = "/var/lib/resolver/prune-exports"
    assert container["args"] == [
        "prune",
        "--older-than=400d",
        "--batch=2000",
        "--lock-timeout=2000",
        "--duty-cycle=0.1",
        f"--export={mount}",
        "--include-audit",
    ]
    assert {"name": "exports", "mountPath": mount} in container["volumeMounts"]
    claims = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
    assert claims == [{"name": "exports", "persistentVolumeClaim": {"claimName": "prune-exports"}}]
    default_secret = env_of(container)["RESOLVER_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert default_secret["name"] == "rr-approved-action-resolver-retention-database"


@pytest.mark.parametrize("values", [ENABLED, EXPORTING], ids=["enabled", "exporting"])
def test_the_rendered_arguments_are_accepted_by_resolver_prune(values: dict[str, Any]) -> None:
    (container,) = pod(cronjob(values))["containers"]
    ctx = prune_cmd.make_context("prune", list(container["args"][1:]))
    assert ctx.params["older_than_ms"] > 0 and 0 < ctx.params["duty_cycle"] <= 1
    assert ctx.params["include_audit"] == ("--include-audit" in container["args"])


def test_include_audit_without_an_export_volume_is_refused() -> None:
    values = {"prune": {"enabled": True, "includeAudit": True}}
    assert "needs prune.export.enabled" in render_error(values)


def test_export_without_a_claim_is_refused() -> None:
    values = {"prune": {"enabled": True, "export": {"enabled": True}}}
    assert "needs prune.export.existingClaim" in render_error(values)


@pytest.mark.parametrize(
    "prune",
    [{"olderThan": "90 days"}, {"batch": 0}, {"batch": 20000}, {"dutyCycle": 0}, {"unknown": 1}],
    ids=["duration", "batch-zero", "batch-over-cap", "duty-cycle-zero", "unknown-key"],
)
def test_schema_rejects_bad_prune_values(prune: dict[str, Any]) -> None:
    with helm.Chart.load(CHART) as chart:
        values = {**chart.values, "prune": {**chart.values["prune"], **prune}}
        with pytest.raises(helm.HelmError):
            chart.validate_schema(values)


def test_cli_refuses_what_the_chart_refuses() -> None:
    with pytest.raises(click.UsageError):
        prune_cmd.main(["--older-than=1d", "--include-audit"], standalone_mode=False)
