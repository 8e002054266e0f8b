"""The kustomize base: valid Kubernetes, hardened, and equivalent to the chart's defaults."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from resolver import __version__
from resolver.app.config import Settings, load_provider_config
from tests.helpers.k8s import (
    KUSTOMIZE_BASE,
    Manifest,
    assert_hardened,
    by_kind,
    env_of,
    one,
    parse,
    render,
    validate_strict,
)

KUSTOMIZATION = yaml.safe_load((KUSTOMIZE_BASE / "kustomization.yaml").read_text(encoding="utf-8"))


def base_files() -> list[Path]:
    return [KUSTOMIZE_BASE / name for name in KUSTOMIZATION["resources"]]


def raw_base() -> list[Manifest]:
    """The base's objects as written (without kustomize's labels and generated ConfigMap)."""
    return list(parse(path.read_text(encoding="utf-8") for path in base_files()))


# The `labels` field of the kustomization needs kustomize >= 4.2 (kubectl >= 1.22 embeds it).
MIN_KUSTOMIZE = (4, 2)


def kustomize_command() -> list[str] | None:
    """kustomize, else kubectl's embedded kustomize when it is recent enough."""
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        probe = subprocess.run(
            ["kubectl", "version", "--client", "-o", "json"],
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r'"kustomizeVersion":\s*"v(\d+)\.(\d+)', probe.stdout)
        if found and (int(found[1]), int(found[2])) >= MIN_KUSTOMIZE:
            return ["kubectl", "kustomize"]
    return None


def built_base(directory: Path = KUSTOMIZE_BASE) -> list[Manifest]:
    command = kustomize_command()
    if command is None:
        pytest.skip(
            "no kustomize >= 4.2 (nor a kubectl embedding one): only the raw files are checked"
        )
    result = subprocess.run([*command, str(directory)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return list(parse([result.stdout]))


def test_every_base_file_is_listed_in_the_kustomization() -> None:
    on_disk = {p.name for p in KUSTOMIZE_BASE.glob("*.yaml")} - {
        "kustomization.yaml",
        "kustomizeconfig.yaml",
        "providers.yaml",
    }
    assert on_disk == set(KUSTOMIZATION["resources"])


@pytest.mark.parametrize("path", base_files(), ids=lambda p: p.name)
def test_each_base_file_is_valid_kubernetes(path: Path) -> None:
    for manifest in parse([path.read_text(encoding="utf-8")]):
        validate_strict(manifest)


def test_raw_base_is_hardened() -> None:
    assert_hardened(raw_base())


def test_provider_config_file_is_what_the_resolver_loads() -> None:
    assert load_provider_config(KUSTOMIZE_BASE / "providers.yaml") == {}


def test_kustomize_build_is_valid_and_hardened() -> None:
    manifests = built_base()
    for manifest in manifests:
        validate_strict(manifest)
    assert_hardened(manifests)
    (config_map,) = [
        m for m in by_kind(manifests, "ConfigMap") if m["metadata"]["name"].startswith("resolver-p")
    ]
    volumes = one(manifests, "Deployment")["spec"]["template"]["spec"]["volumes"]
    # The generated, hashed name is what the Deployment mounts, so a change rolls the pods.
    assert config_map["metadata"]["name"].startswith("resolver-providers-")
    assert {"name": config_map["metadata"]["name"]} == next(
        v["configMap"] for v in volumes if "configMap" in v
    )


def test_base_matches_the_charts_key_properties() -> None:
    base, chart = raw_base(), render()
    # The chart's Pod is its `helm test` hook, which has no kustomize counterpart.
    assert {m["kind"] for m in base} | {"ConfigMap"} == {m["kind"] for m in chart} - {"Pod"}
    assert (
        one(base, "Job")["spec"]["template"]["spec"]["containers"][0]["args"]
        == (one(chart, "Job")["spec"]["template"]["spec"]["containers"][0]["args"])
    )
    assert len(by_kind(base, "ServiceAccount")) == len(by_kind(chart, "ServiceAccount"))
    base_deploy, chart_deploy = one(base, "Deployment"), one(chart, "Deployment")
    assert base_deploy["spec"]["replicas"] == chart_deploy["spec"]["replicas"]
    base_pod, chart_pod = (
        base_deploy["spec"]["template"]["spec"],
        chart_deploy["spec"]["template"]["spec"],
    )
    for key in ("terminationGracePeriodSeconds", "securityContext", "automountServiceAccountToken"):
        assert base_pod[key] == chart_pod[key], key
    assert len(base_pod["topologySpreadConstraints"]) == len(chart_pod["topologySpreadConstraints"])
    (base_c,), (chart_c,) = base_pod["containers"], chart_pod["containers"]
    for key in ("args", "securityContext", "ports", "livenessProbe", "readinessProbe", "resources"):
        assert base_c[key] == chart_c[key], key
    assert [m["mountPath"] for m in base_c["volumeMounts"]] == [
        m["mountPath"] for m in chart_c["volumeMounts"]
    ]
    base_env, chart_env = env_of(base_c), env_of(chart_c)
    assert set(base_env) <= set(chart_env)
    for name, item in base_env.items():
        if "value" in item:
            assert item["value"] == chart_env[name]["value"], name
    base_job, chart_job = one(base, "Job"), one(chart, "Job")
    assert base_job["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate", "--grants"]
    assert (
        base_job["spec"]["template"]["spec"]["securityContext"]
        == chart_job["spec"]["template"]["spec"]["securityContext"]
    )
    assert one(base, "PodDisruptionBudget")["spec"] == {
        **one(chart, "PodDisruptionBudget")["spec"],
        "selector": one(base, "PodDisruptionBudget")["spec"]["selector"],
    }


def test_base_settings_are_accepted_by_the_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    (main,) = one(raw_base(), "Deployment")["spec"]["template"]["spec"]["containers"]
    for name, item in env_of(main).items():
        if "value" in item:
            monkeypatch.setenv(name, item["value"])
    settings = Settings()
    assert settings.page_size == 16
    grace = one(raw_base(), "Deployment")["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ]
    assert grace > settings.shutdown_grace_seconds


def overlay(tmp_path: Path, name: str, image: str | None) -> Path:
    """An overlay as docs/deployment.md describes it: the base, and the image to run."""
    directory = tmp_path / name
    directory.mkdir()
    lines = [f"resources: [{os.path.relpath(KUSTOMIZE_BASE, directory)}]"]
    if image is not None:
        repository, tag = image.rsplit(":", 1)
        lines += [
            "images:",
            "  - name: approved-action-resolver",
            f"    newName: {repository}",
            f"    newTag: '{tag}'",
        ]
    (directory / "kustomization.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def migration_job_of(manifests: list[Manifest]) -> tuple[str, str]:
    job = one(manifests, "Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return job["metadata"]["name"], container["image"]


def test_migration_job_is_named_after_its_image_so_an_upgrade_apply_creates_a_new_job(
    tmp_path: Path,
) -> None:
    """A Job's pod template is immutable: re-applying a finished Job with a new image fails
    ("field is immutable") unless the new one has a new name."""
    base_name, base_image = migration_job_of(built_base())
    assert base_name.startswith("resolver-migrate-") and base_image.endswith(f":{__version__}")
    marker = next(
        m for m in by_kind(built_base(), "ConfigMap") if m["metadata"]["name"] == base_name
    )
    assert marker["data"] == {"image": base_image}
    names = {}
    for tag in ("0.1.0", "0.2.0", "0.2.1"):
        built = built_base(overlay(tmp_path, f"v{tag}", f"registry.example/resolver:{tag}"))
        name, image = migration_job_of(built)
        assert image == f"registry.example/resolver:{tag}"
        assert (
            one(built, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"] == image
        )
        names[tag] = name
    assert len(set(names.values())) == 3, names
    assert base_name not in names.values()
    # The same image again (a re-apply, a config change elsewhere) keeps the Job's name: the
    # finished Job is left alone instead of being patched.
    again, _ = migration_job_of(
        built_base(overlay(tmp_path, "again", "registry.example/resolver:0.2.0"))
    )
    assert again == names["0.2.0"]


def test_migration_job_migrates_and_grants_under_a_lock_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (main,) = one(raw_base(), "Job")["spec"]["template"]["spec"]["containers"]
    assert main["args"] == ["migrate", "--grants"]
    for name, item in env_of(main).items():
        if "value" in item:
            monkeypatch.setenv(name, item["value"])
    settings = Settings()
    assert settings.migration_lock_timeout_ms == 5_000
    assert settings.connect_timeout_seconds == 5
