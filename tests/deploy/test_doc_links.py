"""The documentation stands alone: every relative link resolves inside the repository, every
in-page anchor exists, and no page sends readers to a specification file it does not ship."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"DESIGN\.md|ADR-\d{4}|seeds/")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def resolves(page: Path, target: str) -> bool:
    if re.match(r"[a-z]+:", target):
        return True  # https:, mailto: ... are not checked offline
    path, _, anchor = target.partition("#")
    linked = (page.parent / path).resolve() if path else page
    if not linked.exists():
        return False
    return not anchor or linked.suffix != ".md" or anchor in anchors(linked)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = [target for target in LINK.findall(text) if not resolves(page, target)]
    assert broken == [], f"{page.name}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_cites_a_specification_outside_the_repository(page: Path) -> None:
    assert OUTSIDE.findall(page.read_text(encoding="utf-8")) == []


def test_the_link_check_has_teeth(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n[gone](missing.md) [anchor](#nowhere) [ok](#title)\n")
    targets = LINK.findall(page.read_text())
    assert [resolves(page, t) for t in targets] == [False, False, True]
