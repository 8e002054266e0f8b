"""What `resolver run` imports before its first claim: only what it uses (issue 13)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def _loaded(probe: str = PROBE) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESOLVER_", "OTEL_"))}
    env["RESOLVER_DATABASE_URL"] = "postgresql://resolver@db.invalid:5432/app"
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_resolver_run_start_up_imports_no_yaml_without_a_provider_file() -> None:
    assert "yaml" not in _loaded()


def test_the_collector_runs_again_once_the_command_is_imported() -> None:
    # resolver.app.bootstrap pauses it for the import phase: it must not stay off for the run.
    probe = (
        "import gc, json, resolver.app.cli; "
        "print(json.dumps([gc.isenabled(), gc.get_freeze_count() > 0]))"
    )
    assert _loaded(probe) == [True, True]
