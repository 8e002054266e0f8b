"""What the repository's own text may say: no file cites an ADR or an issue number (a rule is
stated in the project's words), and every repository path a document names exists."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A design record or a tracker entry named by its number: `ADR-0033`, `issue 22`, `#22`.
CITATION = re.compile(r"ADR-?[0-9]|\bissue [0-9]|(?<![\w&/])#[0-9]{2,}\b", re.IGNORECASE)
# Files whose `#NN` is something else: stylesheet colours, binary assets, lock files.
NOT_PROSE = (".css", ".svg", ".png", ".ico", ".lock", ".tgz")
LOCK_FILES = ("package-lock.json",)
# A database an earlier release wrote, kept as that release wrote it (its function bodies
# included): the upgrade tests start from it.
RECORDED = (ROOT / "tests" / "upgrade" / "release-0.1.0.sql",)


@cache
def tracked_files() -> tuple[Path, ...]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return tuple(ROOT / name for name in listed.split("\0") if name)


def citations(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if CITATION.search(line)]


def test_no_file_cites_an_adr_or_an_issue_number() -> None:
    found: dict[str, list[str]] = {}
    for path in tracked_files():
        if path.suffix in NOT_PROSE or path.name in LOCK_FILES or not path.is_file():
            continue
        if path == Path(__file__).resolve() or path in RECORDED:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if hits := citations(text):
            found[str(path.relative_to(ROOT))] = hits
    assert found == {}, "state the rule in the project's words instead:\n" + "\n".join(
        f"{name}: {line}" for name, lines in found.items() for line in lines
    )


@pytest.mark.parametrize(
    ("line", "cited"),
    [
        ("per ADR-0033 §4", True),
        ("see adr 12", False),
        ("ADR12 says", True),
        ("the race of issue 22", True),
        ("fixes #22", True),
        ("colour #11652a", False),
        ("an anchor (schema.md#state-machine-triggers-migration-0004)", False),
        ("`#main` is busy", False),
        ("no issue here", False),
    ],
)
def test_the_citation_pattern_catches_citations_only(line: str, cited: bool) -> None:
    assert bool(citations(line)) is cited


# -- paths a document names ---------------------------------------------------------------

DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
# A repository path: a top-level directory, then path characters, wherever it stands (in
# backticks, a link, a code block, a table). `::test` and `:line` suffixes are dropped.
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:\.ci|benchmarks|deploy|docs|examples|helm|providers|resolver|sdk|tests"
    r"|tools)/[\w./-]*\w)"
)
# A relative link, resolved from the document's own directory.
LINKED = re.compile(r"\]\(([^)\s]+)\)")
# A path with a placeholder or a glob names a family of files, not one.
PLACEHOLDER = re.compile(r"[*<>{}$]|/NN_|\bNNNN")


def named_paths(document: Path) -> list[tuple[str, Path]]:
    text = document.read_text(encoding="utf-8")
    named: list[tuple[str, Path]] = []
    for match in REPO_PATH.finditer(text):
        raw = match.group(1)
        if PLACEHOLDER.search(text[match.start() : match.end() + 1]):
            continue
        named.append((raw, ROOT / raw))
    for raw in LINKED.findall(text):
        if "://" in raw or raw.startswith(("#", "mailto:")):
            continue
        target = raw.split("#", 1)[0]
        if target and not REPO_PATH.match(target):
            named.append((raw, (document.parent / target).resolve()))
    return named


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_document_names_exists(document: Path) -> None:
    missing = [raw for raw, path in named_paths(document) if not path.exists()]
    assert missing == []


def test_the_path_finder_sees_paths_wherever_they_stand(tmp_path: Path) -> None:
    doc = tmp_path / "d.md"
    doc.write_text(
        "`resolver/db/migrate.py`, `tests/unit/test_imports.py::test_x`, `resolver migrate`,"
        " `resolver.core.domain`, `resolver/db/schema/*.sql`, [x](other.md#a),"
        " [y](https://example.org/a.md), `resolver/no_such.py:12`, `resolver/db/schema/NN_x.sql`\n"
        "```\nclass H:  # see tests/helpers/harnesses.py\n```\n",
        encoding="utf-8",
    )
    named = dict(named_paths(doc))
    assert set(named) == {
        "resolver/db/migrate.py",
        "tests/unit/test_imports.py",
        "resolver/db/schema",  # of `resolver/db/schema/*.sql`: the directory
        "other.md#a",
        "resolver/no_such.py",
        "tests/helpers/harnesses.py",
    }
    assert named["other.md#a"] == tmp_path / "other.md"


def test_no_test_module_imports_another() -> None:
    """Fixtures and helpers two test modules share live in tests/helpers (tests/helpers/
    __init__.py): importing a test module's fixtures would run its module-level skips and
    register its fixtures twice."""
    importing = re.compile(r"^\s*(?:from|import)\s+tests\.[\w.]*\btest_\w+", re.MULTILINE)
    offenders = [
        str(path.relative_to(ROOT))
        for path in tracked_files()
        if path.suffix == ".py"
        and path.is_relative_to(ROOT / "tests")
        and importing.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
