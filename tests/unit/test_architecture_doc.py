"""docs/architecture.md's table of packages against the packages themselves: every module,
file and dotted name it names exists, and every package under resolver/ and providers/ has a
row that names each of its modules.

In a row about a package directory, a backticked lowercase name is one of its modules (`name`
for `name.py`, `name/` for a sub-package or directory), a backticked path with a suffix one
of its files (`queries.sql`, `schema/*.sql`), and `resolver.x.y` a module or a name of one;
anything else in backticks (`ExecutionClient`, `start()`, `/healthz`) is prose.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("resolver", "providers")

MODULE = re.compile(r"[a-z_][a-z0-9_]*/?")
FILE = re.compile(r"[\w./*-]+\.(?:sql|py|js|css|html)")
DOTTED = re.compile(r"(?:resolver|providers)(?:\.\w+)+")


@dataclass(frozen=True)
class Row:
    paths: tuple[Path, ...]
    """The first column's paths (directories or files)."""
    names: tuple[str, ...]
    """Every backticked name of the role column."""

    @property
    def directories(self) -> tuple[Path, ...]:
        return tuple(p for p in self.paths if p.is_dir())


def rows(text: str) -> list[Row]:
    start = text.index("| package | role |")
    table = text[start:].split("\n\n")[0].splitlines()[2:]
    found = []
    for line in table:
        _, first, role, _ = line.split("|")
        paths = [ROOT / raw for raw in re.findall(r"`([^`]+)`", first)]
        found.append(Row(tuple(paths), tuple(re.findall(r"`([^`]+)`", role))))
    return found


def _ours(path: Path) -> bool:
    return path.is_relative_to(ROOT) and path.relative_to(ROOT).parts[0] in PACKAGES


def _named_exists(name: str, directories: tuple[Path, ...]) -> bool:
    if MODULE.fullmatch(name):
        if name.endswith("/"):
            return any((d / name).is_dir() for d in directories)
        return any((d / f"{name}.py").is_file() for d in directories)
    return any(any(d.glob(name)) for d in directories)


def _dotted_exists(name: str) -> bool:
    module, _, attribute = name.rpartition(".")
    try:
        importlib.import_module(name)
        return True
    except ModuleNotFoundError:
        return hasattr(importlib.import_module(module), attribute)


def missing(text: str) -> list[str]:
    """Every name a row of ours gives that does not exist."""
    found = []
    for row in rows(text):
        found += [str(p.relative_to(ROOT)) for p in row.paths if not p.exists()]
        if not any(_ours(p) for p in row.directories):
            continue
        for name in row.names:
            if DOTTED.fullmatch(name):
                exists = _dotted_exists(name)
            elif MODULE.fullmatch(name) or FILE.fullmatch(name):
                exists = _named_exists(name, row.directories)
            else:
                continue
            if not exists:
                where = ", ".join(str(d.relative_to(ROOT)) for d in row.directories)
                found.append(f"{where}: {name}")
    return found


def packages() -> list[Path]:
    return sorted(p.parent for top in PACKAGES for p in (ROOT / top).rglob("__init__.py"))


def _members(package: Path) -> list[Path]:
    """The modules and sub-packages of `package`."""
    return sorted(
        p
        for p in package.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
    )


def undescribed(text: str) -> list[str]:
    """Every package without a row, and every module of one that its rows do not name."""
    table = rows(text)
    listed = {p for row in table for p in row.paths}
    found = []
    for package in packages():
        own = [row for row in table if package in row.paths]
        if not own:
            found.append(f"{package.relative_to(ROOT)}/ (no row)")
            continue
        names = {n.rstrip("/") for row in own for n in row.names}
        for member in _members(package):
            if member not in listed and member.stem not in names:
                found.append(str(member.relative_to(ROOT)))
    return found


TEXT = DOC.read_text(encoding="utf-8")


def test_the_table_is_read() -> None:
    table = rows(TEXT)
    assert len(table) >= 15
    core = next(row for row in table if row.paths == (ROOT / "resolver" / "core",))
    assert {"reconciler", "domain/", "late_evidence"} <= set(core.names)
    assert ROOT / "resolver" / "db" / "store" in {p for row in table for p in row.paths}


def test_every_module_the_table_names_exists() -> None:
    assert missing(TEXT) == []


def test_every_package_and_each_of_its_modules_is_described() -> None:
    assert len(packages()) >= 15
    assert undescribed(TEXT) == []


@pytest.mark.parametrize(
    ("old", "new", "missed", "unnamed"),
    [
        ("`reconciler`", "`pooling`", "resolver/core: pooling", "resolver/core/reconciler.py"),
        ("`queries.sql`", "`tables.sql`", "resolver/db: tables.sql", None),
        ("`resolver.core.ports`", "`resolver.core.routes`", "resolver.core.routes", None),
        ("`resolver/human/api/` |", "`resolver/human/apis/` |", "resolver/human/apis", None),
    ],
)
def test_a_name_that_does_not_exist_or_a_module_left_out_is_found(
    old: str, new: str, missed: str, unnamed: str | None
) -> None:
    assert old in TEXT
    planted = TEXT.replace(old, new, 1)
    assert any(missed in line for line in missing(planted)), missing(planted)
    if unnamed is not None:
        assert unnamed in undescribed(planted)


def test_a_package_without_a_row_is_found() -> None:
    line = next(line for line in TEXT.splitlines() if line.startswith("| `resolver/db/store/`"))
    planted = TEXT.replace(line + "\n", "")
    assert "resolver/db/store/ (no row)" in undescribed(planted)
