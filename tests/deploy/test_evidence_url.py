"""One story for the evidence database URL: the order the SQL providers' code resolves it in,
as docs/providers.md, docs/configuration.md and docs/deployment.md tell it and as the chart
and kustomize deliver it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from providers._sql import DEFAULT_URL_ENV, EVIDENCE_URL_ENV, SqlSourceSettings
from resolver.evidence import ConfigError
from tests.helpers.k8s import env_of, one, render

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EVIDENCE = "postgresql://resolver_evidence_reader@db/app"
RUNTIME = "postgresql://resolver_runtime@db/app"
OWN = "postgresql://reader@other/db"


def section(doc: str, heading: str) -> str:
    text = (DOCS / doc).read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_the_code_resolves_in_the_documented_order() -> None:
    env = {EVIDENCE_URL_ENV: EVIDENCE, DEFAULT_URL_ENV: RUNTIME, "OWN_URL": OWN}
    assert SqlSourceSettings(database_url="postgresql://u@h/d").resolve_url(env) == (
        "postgresql://u@h/d"
    )
    assert SqlSourceSettings(database_url_env="OWN_URL").resolve_url(env) == OWN
    assert SqlSourceSettings().resolve_url(env) == EVIDENCE
    assert SqlSourceSettings().resolve_url({**env, EVIDENCE_URL_ENV: ""}) == RUNTIME
    with pytest.raises(ConfigError, match="password"):
        SqlSourceSettings(database_url="postgresql://u:pw@h/d").resolve_url(env)
    with pytest.raises(ConfigError, match="MISSING_URL"):
        SqlSourceSettings(database_url_env="MISSING_URL").resolve_url(env)


def test_providers_md_states_that_order() -> None:
    items = re.findall(
        r"^\d\. (.*?)(?=^\d\. |^\n)",
        section("providers.md", "## The evidence database"),
        re.M | re.S,
    )
    first_names = [re.search(r"`([A-Za-z_]+)`", item).group(1) for item in items]  # type: ignore[union-attr]
    assert first_names == ["database_url", "database_url_env", EVIDENCE_URL_ENV, DEFAULT_URL_ENV]
    text = (DOCS / "providers.md").read_text(encoding="utf-8")
    assert f"(default `{DEFAULT_URL_ENV}`)" not in text  # the old, wrong default


def test_configuration_md_lists_the_variable_and_its_fallback() -> None:
    (row,) = [
        line
        for line in (DOCS / "configuration.md").read_text(encoding="utf-8").splitlines()
        if line.startswith(f"| `{EVIDENCE_URL_ENV}` |")
    ]
    assert f"`{DEFAULT_URL_ENV}`" in row and "evidenceDatabase" in row


def test_deployment_md_says_what_the_chart_passes_and_the_fallback() -> None:
    text = section("deployment.md", "## 3. Install with Helm")
    assert f"`{EVIDENCE_URL_ENV}` (`evidenceDatabase`)" in text
    assert f"falls back to `{DEFAULT_URL_ENV}`" in text


def test_the_chart_and_kustomize_hand_the_replicas_the_evidence_url() -> None:
    (worker,) = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"]
    ref = env_of(worker)[EVIDENCE_URL_ENV]["valueFrom"]["secretKeyRef"]
    assert ref["name"].endswith("-evidence-database")
    values = (ROOT / "helm" / "approved-action-resolver" / "values.yaml").read_text()
    assert EVIDENCE_URL_ENV in values and "evidenceDatabase:" in values
    kustomize = yaml.safe_load(
        (ROOT / "deploy" / "kustomize" / "base" / "deployment.yaml").read_text()
    )
    (container,) = kustomize["spec"]["template"]["spec"]["containers"]
    assert "secretKeyRef" in env_of(container)[EVIDENCE_URL_ENV]["valueFrom"]
