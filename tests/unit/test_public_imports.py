"""The import surface per audience, as the docs state it: every name the docs' own code blocks
import resolves without a warning, the docs list each surface in full, and code written for
release 0.1.0, upgraded by the changelog's tables alone, runs without a warning (its old paths
themselves are gone)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import subprocess
import sys
import textwrap
import typing
import warnings
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

import resolver.core.provider
import resolver.evidence
import resolver.evidence.contract
import resolver.executor
from tools import public_surface

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("providers.md", "executor-sdk.md", "receipts.md", "executor-protocol.md")
SURFACES = {
    "resolver.evidence": resolver.evidence,
    "resolver.executor": resolver.executor,
    "resolver.evidence.contract": resolver.evidence.contract,
}


def python_blocks(text: str) -> list[str]:
    # Every python block, a tagged one (```python publish) too.
    return [textwrap.dedent(b) for b in re.findall(r"```python[^\n]*\n(.*?)```", text, re.S)]


def doc_imports(doc: str) -> list[tuple[str, str]]:
    """Every `from resolver… import name` (and `providers…`) of the doc's python blocks."""
    found = []
    for block in python_blocks((ROOT / "docs" / doc).read_text(encoding="utf-8")):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                ("resolver", "providers")
            ):
                found += [(str(node.module), alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("doc", DOCS)
def test_every_name_the_docs_import_resolves_without_a_warning(doc: str) -> None:
    imports = doc_imports(doc)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for module, name in imports:
            assert hasattr(importlib.import_module(module), name), f"{doc}: {module}.{name}"
            # The docs teach the public surfaces only, never a module behind them.
            assert module in SURFACES, f"{doc} imports {name} from {module}, not a public surface"


def test_the_docs_import_from_each_surface() -> None:
    # The check above is live: the docs really show imports from the surfaces.
    modules = {m for doc in DOCS for m, _ in doc_imports(doc)}
    assert set(SURFACES) <= modules


def documented_table(doc: str, heading: str) -> set[str]:
    """The backticked names of the first column of the table after `heading`."""
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    table = re.search(r"\n *\|---\|---\|\n((?: *\|.*\n)+)", section)
    assert table, heading
    names: set[str] = set()
    for row in table.group(1).splitlines():
        names |= set(re.findall(r"`(\w+)`", row.strip().split("|")[1]))
    return names


@pytest.mark.parametrize(
    ("doc", "heading", "surface"),
    [
        ("providers.md", "## The provider API, in full", "resolver.evidence"),
        ("executor-sdk.md", "**The Python API, in full.**", "resolver.executor"),
        ("providers.md", "**The kit's names, in full**", "resolver.evidence.contract"),
    ],
)
def test_the_docs_list_each_surface_in_full(doc: str, heading: str, surface: str) -> None:
    assert documented_table(doc, heading) == set(SURFACES[surface].__all__)


@pytest.mark.parametrize(
    ("heading", "module"),
    [
        ("**The Python API, in full.**", "resolver.outcomes"),
        ("**The integration's names, in full**", "resolver.integrations.langgraph"),
    ],
)
def test_the_outcome_docs_list_each_runtime_surface_in_full(heading: str, module: str) -> None:
    """A runtime's surfaces (the outcome feed, the LangGraph integration) are listed whole
    on docs/outcomes.md, as the executor's and the providers' are on theirs."""
    names = set(importlib.import_module(module).__all__)
    assert documented_table("outcomes.md", heading) == names


def test_the_docs_list_the_node_sdk_in_full() -> None:
    """The Node SDK's table names every export its types declare (the public surface's own
    reading of index.d.ts), and nothing else."""
    exported = {key.removeprefix("node:") for key in public_surface.node_surface()}
    assert len(exported) > 60
    assert documented_table("executor-sdk.md", "**The Node API, in full.**") == exported


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_every_public_name_resolves_without_a_warning(surface: str) -> None:
    module = SURFACES[surface]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in module.__all__:
            assert getattr(module, name) is not None, name
    assert sorted(module.__all__) == sorted(set(module.__all__))


def test_the_provider_api_is_one_surface_for_the_type_checker_and_the_runtime() -> None:
    # resolver.evidence loads its names on first use: what mypy sees (the TYPE_CHECKING
    # imports), what __getattr__ loads (_HOMES) and __all__ must be the same table.
    tree = ast.parse(Path(resolver.evidence.__file__).read_text(encoding="utf-8"))
    guarded = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    typed = {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    homes = resolver.evidence._HOMES
    assert typed == homes
    assert set(homes) == set(resolver.evidence.__all__)
    for name, home in homes.items():
        assert getattr(resolver.evidence, name) is getattr(importlib.import_module(home), name)


# -- release 0.1.0's paths --------------------------------------------------------------------

# 0.2.0 kept them with a warning and 0.3.0 removed them; 0.2.0's section of CHANGELOG.md still
# maps each to its path now. Here: that map, followed alone, upgrades a provider and an
# executor module written for 0.1.0, and the old paths themselves are gone.


def run_pytest(
    tmp_path: Path, conftest: str, test: str, *, warnings: str = "default"
) -> subprocess.CompletedProcess[str]:
    """pytest in its own process on `tmp_path`, with this conftest and test module, and
    `warnings` as its `-W` filter."""
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "test_kit.py").write_text(test)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            warnings,
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# -- the changelog's upgrade section, followed alone ------------------------------------------

# A provider module and its contract test as the 0.1.0 docs taught them (docs/providers.md of
# that release): these imports and plugin name, nothing else.
OLD_PROVIDER = """
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from resolver.db.readonly import ReadOnlyDatabase
from resolver.domain import DispatchIdentity, Finding, FindingKind, Outcome, ProviderFailure
from resolver.errors import ConfigError, SourceMisconfigured, StorageUnavailable
from resolver.evidence import Capability, parse_provider_settings
from resolver.readonly_http import ReadOnlyHttpClient
from resolver.receipts import KeyRing, receipt_finding

NAMES = (ReadOnlyDatabase, DispatchIdentity, Finding, FindingKind, Outcome, ProviderFailure,
         ConfigError, SourceMisconfigured, StorageUnavailable, Capability,
         parse_provider_settings, ReadOnlyHttpClient, KeyRing, receipt_finding)


class Settings(BaseModel):
    answer: str = "missing"


class Provider:
    capability = Capability.MANUAL_ONLY
    timeout_seconds = 1.0

    def inspect(self, identity: DispatchIdentity) -> Finding:
        return Finding(FindingKind.UNSUPPORTED)


def create(settings: Mapping[str, Any]) -> Provider:
    parse_provider_settings(Settings, settings, "old_provider")
    return Provider()
"""

OLD_CONFTEST = 'pytest_plugins = ["resolver.testing.contract"]\n'
OLD_TEST = """
from resolver.testing.contract import NotApplicable, ProviderContract, Scenario
from resolver.testing.receipt_server import ReceiptServer
from old_provider import create

def test_it(receipt_keys, receipt_server):
    assert isinstance(receipt_server, ReceiptServer) and NotApplicable and Scenario
    assert create({}).inspect is not None
"""


def upgrade_rules(audience: str) -> list[tuple[str, str]]:
    """The `| 0.1.0 | now |` rows of CHANGELOG.md's Upgrading table for `audience`."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    section = text[text.index(f"**{audience}**") :]
    table = re.search(r"\| 0\.1\.0 \| now \|\n\|---\|---\|\n((?:\|.*\n)+)", section)
    assert table, audience
    rules = re.findall(r"^\| `(.+?)` \| `(.+?)` \|$", table.group(1), re.M)
    # "from x import …" rewrites the module of an import line, whatever it imports.
    return [(old.removesuffix("…"), new.removesuffix("…")) for old, new in rules]


def upgrade(source: str, rules: list[tuple[str, str]]) -> str:
    lines = []
    for line in source.splitlines():
        for old, new in rules:
            if line.startswith(old):
                line = new + line[len(old) :]
                break
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_the_old_provider_no_longer_imports(tmp_path: Path) -> None:
    (tmp_path / "old_provider.py").write_text(OLD_PROVIDER)
    done = run_pytest(tmp_path, OLD_CONFTEST, OLD_TEST)
    assert done.returncode != 0
    assert 'Error importing plugin "resolver.testing.contract"' in done.stdout + done.stderr


def test_following_the_changelog_alone_upgrades_the_old_provider(tmp_path: Path) -> None:
    rules = upgrade_rules("Provider authors")
    (tmp_path / "old_provider.py").write_text(upgrade(OLD_PROVIDER, rules))
    done = run_pytest(
        tmp_path,
        upgrade(OLD_CONFTEST, rules),
        upgrade(OLD_TEST, rules),
        warnings="error::DeprecationWarning",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "resolver.testing" not in (tmp_path / "test_kit.py").read_text()


def test_every_old_module_of_the_changelog_s_table_of_moves_is_gone() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    table = text[text.index("| 0.1.0 module | now | |") :]
    rows = re.findall(r"^\| `([\w.]+)`[^|]*\| [^|]+ \| ([^|]*)\|$", table.split("\n\n")[0], re.M)
    assert len(rows) >= 15
    for old, mark in rows:
        if mark.strip() == "kept":  # resolver.evidence: the provider API kept its path
            importlib.import_module(old)
        elif old.startswith("providers."):  # a name of a built-in provider, which stays
            module, name = old.rsplit(".", 1)
            assert not hasattr(importlib.import_module(module), name), old
        elif old not in ("resolver.demo", "resolver.retention"):  # packages by those names now
            with pytest.raises(ModuleNotFoundError):
                importlib.import_module(old)


def test_the_provider_api_no_longer_answers_the_registry_s_names() -> None:
    # 0.1.0's module `resolver.evidence` held the provider registry; 0.2.0 still answered its
    # names (warning) and 0.3.0 does not: it is internal to `resolver run`.
    registry = ("ProviderRegistry", "build_registry", "discover_factories",
                "installed_entry_points", "ENTRY_POINT_GROUP", "SettingsModel")  # fmt: skip
    assert [name for name in registry if hasattr(resolver.evidence, name)] == []
    assert all(hasattr(resolver.core.provider, name) for name in registry)


# -- the surfaces type-check as the docs use them ---------------------------------------------


def mypy(files: list[Path], cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(cache),
            "--config-file",
            str(cache / "none.ini"),
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )


def test_the_complete_examples_type_check_strictly_against_the_surfaces(tmp_path: Path) -> None:
    # The whole provider of providers.md and the executor of executor-sdk.md, under
    # `mypy --strict`: the surfaces export typed names (no implicit re-export needed).
    (provider,) = [
        b
        for b in python_blocks((ROOT / "docs" / "providers.md").read_text())
        if "class RefundProvider" in b
    ]
    # The executor of executor-sdk.md, and its publisher of receipt objects.
    executor, publisher = python_blocks((ROOT / "docs" / "executor-sdk.md").read_text())
    (tmp_path / "none.ini").write_text("[mypy]\n")
    files = [
        tmp_path / "provider_example.py",
        tmp_path / "executor_example.py",
        tmp_path / "publisher_example.py",
    ]
    files[0].write_text(provider)
    files[1].write_text(executor)
    files[2].write_text(publisher)
    checked = mypy(files, tmp_path)
    assert checked.returncode == 0, checked.stdout
    # The check is live: a name that is not on the surface is an error.
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from resolver.evidence import ClaimedItem\nfrom resolver.executor import Finding\n"
    )
    refused = mypy([planted], tmp_path)
    assert refused.returncode == 1
    assert 'Module "resolver.evidence" has no attribute "ClaimedItem"' in refused.stdout
    assert '"resolver.executor" has no attribute "Finding"' in refused.stdout


# An executor module as the 0.1.0 docs taught it (the protocol client and the receipt writer).
# Its store, PostgresStore, is not an import to rewrite: 0.3.0 removed it, and the changelog
# says what builds the store now.
OLD_EXECUTOR = """
from providers.internal_mutation import write_receipt
from resolver.domain import DispatchSpec, Outcome, action_digest
from resolver.errors import FenceConflict, LeaseLost
from resolver.execution import ExecutionClient
from resolver.receipts import KeyRing

NAMES = (write_receipt, DispatchSpec, Outcome, action_digest, FenceConflict, LeaseLost,
         ExecutionClient, KeyRing)
"""


def test_following_the_changelog_alone_upgrades_an_old_executor(tmp_path: Path) -> None:
    upgraded = upgrade(OLD_EXECUTOR, upgrade_rules("Executor authors"))
    assert "resolver.executor import" in upgraded
    script = tmp_path / "old_executor.py"
    script.write_text(upgraded)
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Unchanged, it no longer imports.
    script.write_text(OLD_EXECUTOR)
    old = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert old.returncode != 0
    assert "ImportError" in old.stderr or "ModuleNotFoundError" in old.stderr, old.stderr


# -- what the public signatures take and return ---------------------------------------------

# Public names whose signatures may name internal types, and why: nothing else may.
INTERNAL_SIGNATURES_ALLOWED = {
    # Built by SideEffectRunner.run only, with the runner's private lease clock.
    "resolver.executor.SideEffect.__init__": "built by the runner, never by an adopter",
}


def _classes(annotation: object, found: set[type]) -> None:
    if isinstance(annotation, type):
        found.add(annotation)
    origin = typing.get_origin(annotation)
    if isinstance(origin, type):
        found.add(origin)
    for argument in typing.get_args(annotation):
        _classes(argument, found)


def _signatures(where: str, value: object) -> Iterator[tuple[str, object]]:
    """Every callable a public name offers: a function, or a class's constructor, fields,
    public methods and properties."""
    if inspect.isfunction(value):
        yield where, value
        return
    if not inspect.isclass(value):
        return
    if issubclass(value, msgspec.Struct) or dataclasses.is_dataclass(value):
        yield f"{where} fields", value
    if "model_fields" in vars(value):  # a pydantic model: its fields
        yield f"{where} fields", value
    for name, member in vars(value).items():
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(member, property) and member.fget is not None:
            yield f"{where}.{name}", member.fget
        elif isinstance(member, classmethod | staticmethod):
            yield f"{where}.{name}", member.__func__
        elif inspect.isfunction(member):
            yield f"{where}.{name}", member


def non_public_in_signatures() -> dict[str, set[str]]:
    public = {id(getattr(m, n)) for m in SURFACES.values() for n in m.__all__}
    found: dict[str, set[str]] = {}
    for surface, module in SURFACES.items():
        for name in module.__all__:
            where = f"{surface}.{name}"
            if where in INTERNAL_SIGNATURES_ALLOWED:
                continue
            for place, callable_ in _signatures(where, getattr(module, name)):
                if place in INTERNAL_SIGNATURES_ALLOWED:
                    continue
                classes: set[type] = set()
                for hint in typing.get_type_hints(callable_).values():
                    _classes(hint, classes)
                internal = {
                    f"{c.__module__}.{c.__qualname__}"
                    for c in classes
                    if c.__module__.split(".")[0] in ("resolver", "providers")
                    and id(c) not in public
                }
                if internal:
                    found[place] = internal
    return found


def test_every_type_a_public_signature_takes_or_returns_is_public() -> None:
    """An adopter can name what they pass and what they get: every class in a public
    signature (parameters, results, fields) is on a public surface itself."""
    assert non_public_in_signatures() == {}


def test_the_signature_walk_sees_an_internal_type(monkeypatch: pytest.MonkeyPatch) -> None:
    # Taking ReceiptPublisher off the surface makes SideEffect.publish_receipt a finding.
    monkeypatch.setattr(
        resolver.executor,
        "__all__",
        [n for n in resolver.executor.__all__ if n != "ReceiptPublisher"],
    )
    found = non_public_in_signatures()
    assert (
        "resolver.executor.object_receipts.ReceiptPublisher"
        in found["resolver.executor.SideEffect.publish_receipt"]
    )
