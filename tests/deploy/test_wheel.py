"""The wheel holds the product only: the built-in providers, no test rig."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.k8s import ROOT

BUILT_INS = {
    "manual_only",
    "internal_mutation",
    "run_create",
    "package_install",
    "http_receipt",
    "object_receipt",
    "idempotency_record",
    "http_lookup",
    "git_ref",
    "oci_artifact",
}
# Modules of the test rig, wherever they might land by mistake (the crash matrix's agent and
# harness, the example agent and its order service among them).
TEST_ONLY_NAMES = {
    "scripted",
    "bench_providers",
    "history",
    "crash",
    "postgres",
    "crash_agent",
    "harness",
    "order_agent",
    "orders",
}
# What resolver/integrations ships: each integration behind its extra, and nothing that
# could crash a process on purpose (the crash matrix's switches live in tests/langgraph).
SHIPPED_INTEGRATIONS = {"__init__.py", "langgraph.py"}
CRASH_SWITCHES = ("os.kill", "signal.SIGKILL", "SIGKILL", "os._exit", "abort()")
# What resolver/evidence may ship: the providers' toolkit (receipts, the read-only HTTP client
# and its engine, the object-store key layout and client, the binding tokens), the provider
# contract kit and the receipt service it plays.
SHIPPED_KIT = {
    "__init__.py",
    "receipts.py",
    "readonly_http.py",
    "object_store.py",
    "http_exchange.py",
    "bindings.py",
    "contract.py",
    "receipt_server.py",
}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    # Built from a copy of what the image build copies: a build/ left in the work tree by an
    # earlier build would otherwise leak stale modules into the wheel.
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("resolver", "providers"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(source), "-w", str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("approved_action_resolver-*.whl")
    with zipfile.ZipFile(built) as zf:
        yield zf


def entry_points(wheel: zipfile.ZipFile) -> configparser.ConfigParser:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(wheel.read(name).decode("utf-8"))
    return parser


def test_the_wheel_registers_exactly_the_built_in_providers(wheel: zipfile.ZipFile) -> None:
    groups = entry_points(wheel)
    assert set(groups["resolver.providers"]) == BUILT_INS
    for target in groups["resolver.providers"].values():
        assert target.strip().startswith("providers."), target
    # Nothing but the command and the providers: no test hooks of any kind.
    assert set(groups.sections()) == {"console_scripts", "resolver.providers"}


def test_no_test_only_module_ships(wheel: zipfile.ZipFile) -> None:
    modules = [Path(n) for n in wheel.namelist() if n.endswith(".py")]
    assert modules, "the wheel holds no module"
    assert {m.parts[0] for m in modules} == {"resolver", "providers"}
    assert not [m for m in modules if m.stem in TEST_ONLY_NAMES and "migrations" not in m.parts]
    kit = {m.name for m in modules if m.parts[:2] == ("resolver", "evidence")}
    assert kit == SHIPPED_KIT
    integrations = {m.name for m in modules if m.parts[:2] == ("resolver", "integrations")}
    assert integrations == SHIPPED_INTEGRATIONS


def test_no_integration_or_outcome_module_carries_a_crash_switch(wheel: zipfile.ZipFile) -> None:
    shipped = [
        n
        for n in wheel.namelist()
        if n.endswith(".py") and n.startswith(("resolver/integrations/", "resolver/outcomes/"))
    ]
    assert {Path(n).parent.name for n in shipped} == {"integrations", "outcomes"}
    for name in shipped:
        text = wheel.read(name).decode("utf-8")
        assert not [s for s in CRASH_SWITCHES if s in text], name


def test_every_sql_file_of_the_schema_ships(wheel: zipfile.ZipFile) -> None:
    # The migrations read their SQL files at run time, and the schema files are the current
    # definition: an installed release without them cannot migrate.
    # And the providers' own schemas: `resolver migrate` reads them from the installed package.
    in_tree = {
        path.relative_to(ROOT).as_posix()
        for folder in (ROOT / "resolver" / "db", ROOT / "providers")
        for path in folder.rglob("*.sql")
    }
    shipped = {name for name in wheel.namelist() if name.endswith(".sql")}
    assert any("/schema/" in name for name in in_tree)
    assert any("/migrations/sql/" in name for name in in_tree)
    assert in_tree - shipped == set()
