"""Static checks of deploy/Dockerfile (no container engine here to build it)."""

from __future__ import annotations

import json
import re
import tomllib

from tests.helpers.k8s import DOCKERFILE, ROOT, instructions, render, stages

DOCKERIGNORE = ROOT / ".dockerignore"


def build_args() -> dict[str, str]:
    return dict(
        args.split("=", 1) for name, args in instructions() if name == "ARG" and "=" in args
    )


def test_is_multi_stage_on_a_pinned_python_3_11_slim_base() -> None:
    assert len(stages()) >= 2
    base = build_args()["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-[a-z]+)?(@sha256:[0-9a-f]{64})?", base), base
    for stage in stages():
        assert stage[0][1].startswith("${PYTHON_IMAGE}"), stage[0]


def test_runtime_stage_runs_as_a_numeric_non_root_user() -> None:
    runtime = stages()[-1]
    users = [args for name, args in runtime if name == "USER"]
    assert users, "the runtime stage must set USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0, users[-1]
    assert not gid or (gid.isdigit() and int(gid) > 0), users[-1]
    # Kubernetes' runAsNonRoot check and the chart's runAsUser agree with the image.
    pod = next(m for m in render() if m["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)


def test_entrypoint_and_command_are_exec_form() -> None:
    runtime = dict(stages()[-1])
    assert json.loads(runtime["ENTRYPOINT"]) == ["resolver"]
    assert json.loads(runtime["CMD"]) == ["run"]


def test_runtime_stage_removes_the_shell_after_its_last_shell_form_step() -> None:
    runtime = stages()[-1]
    runs = [args for name, args in runtime if name == "RUN"]
    assert runs and runs[-1].startswith("["), "the shell removal must be exec form"
    assert "/usr/bin/sh" in json.loads(runs[-1])


def test_oci_labels_are_set() -> None:
    labels = " ".join(args for name, args in stages()[-1] if name == "LABEL")
    for key in ("title", "description", "version", "revision", "licenses"):
        assert f"org.opencontainers.image.{key}=" in labels, key


def test_no_secret_reaches_the_image() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert not re.search(r"(?i)(password|token|secret|api_key)\s*=", text)
    assert not re.search(r"postgres(ql)?://", text)
    for name, args in instructions():
        if name in {"ENV", "ARG"}:
            assert not re.search(r"(?i)RESOLVER_(DATABASE_URL|RECEIPT_KEYS)", args), args
        if name in {"COPY", "ADD"}:
            assert ".env" not in args and "secrets" not in args, args


def test_build_context_is_an_allow_list() -> None:
    lines = [
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "ignore everything, then allow what the build copies"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = {
        part.rstrip("/")
        for name, args in instructions()
        if name == "COPY" and "--from" not in args
        for part in args.split()[:-1]
    }
    assert copied <= allowed, copied - allowed
    # The test rig (tests/support) is its own distribution and never reaches the image.
    assert not any(path.startswith("tests") for path in allowed | copied)


def test_the_image_installs_the_otlp_extra_the_tracing_settings_need() -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT turns export on; without the exporter the resolver exits 2."""
    build = stages()[0]
    # The extras are a build argument (EXTRAS=otlp,s3 adds object storage): read its default.
    defaults = dict(arg.split("=", 1) for name, arg in build if name == "ARG" and "=" in arg)
    installs = [
        re.sub(r"\$\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), args)
        for name, args in build
        if name == "RUN" and "pip install" in args
    ]
    assert any(re.search(r"""['"]?\.\[([a-z,]*,)?otlp(,[a-z,]*)?\]['"]?""", a) for a in installs), (
        installs
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = project["optional-dependencies"]["otlp"]
    assert any(dep.startswith("opentelemetry-exporter-otlp") for dep in extra), extra
