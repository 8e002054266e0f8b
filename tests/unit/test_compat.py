"""The previous release's paths (resolver/_compat): each shim goes in the release it names,
and every old path CHANGELOG.md's Upgrading tables list still imports, warning with the new
path and that release. The tables are read from the changelog itself, so a row that no shim
serves (an old path that raises ImportError) fails here."""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from packaging.version import Version

import resolver
from resolver._compat import REMOVED_IN, SHIMS, Kind, Shim

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
SURFACES = ("resolver.evidence", "resolver.executor", "resolver.evidence.contract")
BY_MODULE = {s.module: s for s in SHIMS if s.kind in (Kind.MODULE, Kind.NAMES, Kind.PLUGIN)}

# Old paths of the tables that import without a warning: the module kept its path and is
# the surface itself. Each is checked to be silent indeed, so adding its shim means removing
# it here.
SILENT = {"resolver.evidence"}


# -- the removal release ------------------------------------------------------------------


def overdue(version: str, shims: tuple[Shim, ...]) -> list[str]:
    """The shims `version` should no longer carry."""
    return [
        f"{s.module} ({s.what or s.kind})"
        for s in shims
        if Version(version) >= Version(s.removed_in)
    ]


def test_no_shim_outlives_the_release_that_removes_it() -> None:
    assert overdue(resolver.__version__, SHIMS) == [], (
        f"resolver {resolver.__version__} removes these: delete each shim (its row in "
        "resolver/_compat, its stub module or hook) and its rows in CHANGELOG.md's tables"
    )


def test_the_removal_check_fails_once_the_version_reaches_a_shim() -> None:
    assert len(overdue(REMOVED_IN, SHIMS)) == len(SHIMS)
    due_now = dataclasses.replace(SHIMS[0], removed_in=resolver.__version__)
    assert overdue(resolver.__version__, (due_now, *SHIMS[1:])) == [
        f"{due_now.module} ({due_now.kind})"
    ]


def upgrading() -> str:
    """The changelog's Upgrading section that holds the tables of the old paths."""
    start = CHANGELOG.rindex("### Upgrading", 0, CHANGELOG.index("| 0.1.0 | now |"))
    return CHANGELOG[start : CHANGELOG.index("\n### ", start + 1)]


def test_the_docs_make_the_one_removal_promise_the_shims_keep() -> None:
    versioning = (ROOT / "docs" / "versioning.md").read_text(encoding="utf-8")
    for release in {s.removed_in for s in SHIMS}:
        assert f"{release} removes them" in upgrading(), release
        assert release in versioning, release
    for vague in ("the next release", "release after next"):
        assert vague not in upgrading(), vague


# -- the changelog's tables, walked ---------------------------------------------------------


def audience_rows() -> list[tuple[str, str, str | None]]:
    """(old module, new module, the one name or None for any) of each `| 0.1.0 | now |`
    table row written as an import line."""
    rows = []
    for table in re.findall(r"\| 0\.1\.0 \| now \|\n\|---\|---\|\n((?:\|.*\n)+)", CHANGELOG):
        for old, new in re.findall(r"^\| `(.+?)` \| `(.+?)` \|$", table, re.M):
            was = re.fullmatch(r"from ([\w.]+) import (\w+|…)", old)
            now = re.fullmatch(r"from ([\w.]+) import (\w+|…)", new)
            if was and now:  # not the plugin line (checked in test_public_imports.py)
                name = None if was.group(2) == "…" else was.group(2)
                rows.append((was.group(1), now.group(1), name))
    return rows


def module_rows() -> list[tuple[list[str], str, str]]:
    """(old paths, new module, mark) of each row of the table of moved modules."""
    start = CHANGELOG.index("| 0.1.0 module | now | |")
    table = CHANGELOG[start:].split("\n\n")[0].splitlines()[2:]
    rows = []
    for line in table:
        cells = line.split("|")
        rows.append(
            (
                re.findall(r"`([^`]+)`", cells[1]),
                re.findall(r"`([^`]+)`", cells[2])[0],
                cells[3].strip(),
            )
        )
    return rows


def test_the_tables_are_read() -> None:
    # The walks below are live: they see both audiences' tables and the stub rows.
    olds = {old for old, _, _ in audience_rows()}
    assert {"resolver.errors", "resolver.domain", "resolver.db.repository"} <= olds
    assert {new for _, new, _ in audience_rows()} == set(SURFACES)
    assert sum(mark.startswith("stub") for _, _, mark in module_rows()) >= 7


def imported_with_warning(module: str, name: str, new: str, removed_in: str) -> Any:
    """`from module import name`, which must warn once, from this line, naming `new`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(importlib.import_module(module), name)
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(messages) == 1, (module, name, messages)
    assert re.search(
        rf"^{re.escape(module)}\.{name} is deprecated and will be removed in "
        rf"{re.escape(removed_in)}: import {name} from [\w. ]*\b{re.escape(new)}\b",
        messages[0],
    ), messages[0]
    assert caught[0].filename == __file__  # the warning points at the importing line
    return value


def imported_silently(module: str, name: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("old", "new", "name"), audience_rows(), ids=str)
def test_every_old_import_line_of_the_tables_still_imports(
    old: str, new: str, name: str | None
) -> None:
    surface = importlib.import_module(new)
    names = [name] if name else list(surface.__all__)
    if old == new or old in SILENT:
        for each in names:
            if old == new or hasattr(importlib.import_module(old), each):
                assert imported_silently(old, each) is getattr(surface, each)
        return
    shim = BY_MODULE[old]
    assert new in shim.surfaces, f"CHANGELOG.md sends {old} to {new}; its shim does not"
    if shim.kind is Kind.PLUGIN:  # eager names: the module itself warns (tested below)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            module = importlib.import_module(old)
        assert all(imported_silently(old, n) is getattr(surface, n) for n in names)
        assert {n for n in vars(module) if not n.startswith("_")} >= set(names)
        return
    for each in names:
        value = imported_with_warning(old, each, new, shim.removed_in)
        assert value is getattr(surface, each), f"{old}.{each}"


def test_provider_failure_imports_from_the_old_errors_module() -> None:
    # The break that made this walk: the errors stub forwarded to resolver.core.errors only,
    # while ProviderFailure lives with the domain types.
    from resolver.evidence import ProviderFailure

    old = imported_with_warning(
        "resolver.errors", "ProviderFailure", "resolver.evidence", REMOVED_IN
    )
    assert old is ProviderFailure


def defined_in(module: ModuleType) -> list[str]:
    """The public classes and functions `module` (or a module under it) defines."""
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType)
        and str(getattr(value, "__module__", "")).startswith(module.__name__)
    )


def stub_rows() -> list[tuple[str, str, str]]:
    """(old module, name, new module) of every name the stub and kept rows move."""
    found = []
    for olds, new, mark in module_rows():
        if olds[0].startswith("providers."):  # `providers.x.name`, `Name`: names of x
            module = olds[0].rsplit(".", 1)[0]
            names = [olds[0].rsplit(".", 1)[1], *olds[1:]]
        elif mark.startswith("stub"):
            (module,) = olds
            names = defined_in(importlib.import_module(new))
        elif mark.startswith("kept"):  # what the module kept, and the names it lost
            (module,) = olds
            kept = set(importlib.import_module(module).__all__) | (BY_MODULE[module].names or set())
            names = [n for n in defined_in(importlib.import_module(new)) if n in kept]
        else:
            continue
        found += [(module, name, new) for name in names]
    return found


@pytest.mark.parametrize(("old", "name", "new"), stub_rows(), ids=str)
def test_every_name_of_a_moved_module_imports_from_its_old_path(
    old: str, name: str, new: str
) -> None:
    value = getattr(importlib.import_module(new), name)
    shim = BY_MODULE.get(old)
    if (
        shim is None
        or shim.kind is Kind.PLUGIN
        or name in getattr(importlib.import_module(old), "__all__", ())
    ):
        # A kept name, or an eager one of the stub plugin (which warns when imported, once per
        # process: test_the_stub_plugin_warns_when_imported says so, in whatever order the
        # workers run these).
        assert shim is None or name not in (shim.names or ())
        if shim is not None and shim.kind is Kind.PLUGIN:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                importlib.import_module(old)
        assert imported_silently(old, name) is value
        return
    # The warning names the surface that has the name; else what to do instead, never an
    # internal module to import from (the registry's names); else that internal module.
    public = [s for s in shim.surfaces if name in importlib.import_module(s).__all__]
    if not public and shim.instead:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert getattr(importlib.import_module(old), name) is value
        (message,) = [str(w.message) for w in caught]
        assert message.startswith(f"{old}.{name} is deprecated and will be removed in ")
        assert shim.instead in message and "import " not in message
        return
    assert imported_with_warning(old, name, (public or [new])[0], shim.removed_in) is value


def test_the_stub_plugin_warns_when_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "resolver.testing.contract", raising=False)
    with pytest.warns(
        DeprecationWarning,
        match=rf"resolver\.testing\.contract is deprecated and will be removed in "
        rf"{re.escape(REMOVED_IN)}: use the pytest plugin resolver\.evidence\.contract",
    ):
        importlib.import_module("resolver.testing.contract")


def test_every_shim_is_a_row_of_the_changelog() -> None:
    olds = {old for old, _, _ in audience_rows()}
    for paths, _, _ in module_rows():
        olds.add(paths[0].rsplit(".", 1)[0] if paths[0].startswith("providers.") else paths[0])
    for shim in SHIMS:
        if shim.kind is Kind.INTERNAL:  # named in the upgrade notes, not moved
            assert f"`{shim.module}`" in upgrading(), shim.module
        elif shim.kind in (Kind.CLASS, Kind.ARGUMENT):  # `PostgresStore`, `now_ms=`
            assert f"`{shim.what.split('.')[-1].split(chr(39))[0]}`" in upgrading(), shim.what
        else:
            assert shim.module in olds, f"{shim.module} has a shim but no row in CHANGELOG.md"


def test_an_old_name_on_a_surface_and_in_its_old_home_is_one_object() -> None:
    # The warning sends the adopter to the surface: it must be the object they had.
    for shim in SHIMS:
        if not shim.home:
            continue
        home = importlib.import_module(shim.home)
        for surface in map(importlib.import_module, shim.surfaces):
            for name in set(surface.__all__) & set(vars(home)):
                assert getattr(surface, name) is getattr(home, name), (shim.module, name)


def test_an_unknown_or_private_name_on_a_stub_is_an_attribute_error() -> None:
    import resolver.domain

    with pytest.raises(AttributeError, match=r"module 'resolver\.domain' has no attribute"):
        resolver.domain.NoSuchName  # noqa: B018
    with pytest.raises(AttributeError):
        resolver.domain._reject_floats  # noqa: B018
    with pytest.raises(AttributeError):
        resolver.domain.msgspec  # noqa: B018 (a module the home imports, not a name of it)


# -- internal modules an earlier layout's docs named -----------------------------------------

INTERNAL = [s for s in SHIMS if s.kind is Kind.INTERNAL]


def read_as(reader: str, module: str, name: str) -> list[str]:
    """`from module import name` in a module called `reader`; the warnings it gave."""
    code = compile(f"from {module} import {name}", f"<{reader}>", "exec")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(code, {"__name__": reader})
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]


@pytest.mark.parametrize("shim", INTERNAL, ids=lambda s: s.module)
def test_a_public_name_read_from_an_internal_module_outside_the_product_warns(
    shim: Shim,
) -> None:
    module = importlib.import_module(shim.module)
    surfaces = [importlib.import_module(s) for s in shim.surfaces]
    public = sorted(n for s in surfaces for n in s.__all__ if vars(module).get(n) is getattr(s, n))
    assert public, shim.module  # the row guards something
    for name in public:
        (message,) = read_as("adopter", shim.module, name)
        assert re.search(
            rf"^{re.escape(shim.module)} is internal; .* until {re.escape(shim.removed_in)}: "
            rf"import {name} from resolver\.",
            message,
        ), message
        # The product's own reads, and its tests', are not warned about.
        assert read_as("resolver.somewhere", shim.module, name) == []
        assert read_as("tests.somewhere", shim.module, name) == []


def test_a_name_that_was_never_public_reads_silently_from_outside() -> None:
    assert read_as("adopter", "resolver.core.domain", "ClaimedItem") == []
