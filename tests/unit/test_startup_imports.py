"""What `resolver run` imports before its first claim: only what it uses (each replica pays them at start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# The start-up of `resolver run` up to its database: the command's module, the settings
# (no provider file), the provider registry and tracing (OTEL_* unset); then what it loaded.
PROBE = """
import json, sys
import resolver.app.cli as cli
from resolver.app.composition import load_registry
from resolver.telemetry.tracing import tracing_from_env
settings = cli.settings_from_env()
load_registry(settings)
tracing_from_env(settings.replica_id)
print(json.dumps(sorted(sys.modules)))
"""

# What `resolver run` never needs before its first claim: the API's web stack and token
# checks, the demo, the console's models, OpenTelemetry altogether (API, SDK, exporters and
# the cycle's span subscriber: tracing is off without OTEL_*), the migration toolchain, and
# the close-match search that only an unknown RESOLVER_* name needs.
NOT_NEEDED = (
    "fastapi",
    "starlette",
    "uvicorn",
    "jwt",
    "resolver.demo",
    "resolver.human.api",
    "resolver.human.auth",
    "resolver.human.console_config",
    "opentelemetry",
    "resolver.telemetry.cycle_trace",
    "alembic",
    "sqlalchemy",
    "yaml",
    "difflib",
)


def _loaded(probe: str = PROBE) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESOLVER_", "OTEL_"))}
    env["RESOLVER_DATABASE_URL"] = "postgresql://resolver@db.invalid:5432/app"
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def _under(modules: list[str], prefix: str) -> list[str]:
    return [m for m in modules if m == prefix or m.startswith(f"{prefix}.")]


def test_resolver_run_start_up_imports_no_yaml_without_a_provider_file() -> None:
    assert "yaml" not in _loaded()


def test_resolver_run_start_up_imports_nothing_only_other_commands_need() -> None:
    loaded = _loaded()
    pulled = {prefix: _under(loaded, prefix) for prefix in NOT_NEEDED}
    assert {prefix: found for prefix, found in pulled.items() if found} == {}
    # The probe is live: what the run does need is in the same list.
    for needed in ("psycopg", "prometheus_client", "resolver.core.reconciler", "click"):
        assert _under(loaded, needed), needed


@pytest.mark.parametrize("planted", ["jwt", "opentelemetry.trace", "difflib"])
def test_the_probe_sees_a_module_the_run_pulled_in(planted: str) -> None:
    # The same check catches a planted import of the web stack, of the tracing API, of the
    # close-match search.
    probe = PROBE.replace(
        "import resolver.app.cli as cli", f"import resolver.app.cli as cli, {planted}"
    )
    assert _under(_loaded(probe), planted.split(".")[0])


def test_a_tracer_brings_the_span_subscriber_in() -> None:
    # The OpenTelemetry modules stay out because tracing is off, not because nothing could
    # load them: with OTEL_TRACES_EXPORTER set, the same start-up loads them.
    probe = "import os\nos.environ['OTEL_TRACES_EXPORTER'] = 'console'\n" + PROBE.replace(
        "tracing_from_env(settings.replica_id)",
        "from resolver.app.composition import build_telemetry\n"
        "build_telemetry(tracer=tracing_from_env(settings.replica_id).tracer)",
    )
    loaded = _loaded(probe)
    assert _under(loaded, "opentelemetry.sdk")
    assert "resolver.telemetry.cycle_trace" in loaded


def test_the_collector_runs_again_once_the_command_is_imported() -> None:
    # resolver.app.bootstrap pauses it for the import phase: it must not stay off for the run.
    probe = (
        "import gc, json, resolver.app.cli; "
        "print(json.dumps([gc.isenabled(), gc.get_freeze_count() > 0]))"
    )
    assert _loaded(probe) == [True, True]
