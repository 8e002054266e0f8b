"""Loads the named statements of queries.sql: the one home of the resolver's runtime SQL.

Besides `-- name: x` statements the file holds `-- fragment: y` pieces that several
statements share: a condition (one definition of "claimable"), an expression (the open lists'
sort key) or a query's closing SELECT (their counts). A statement pulls one in with a line
`-- include: y`, replaced by the fragment in parentheses. A fragment may include a fragment
defined above it (so no cycle can form). A fragment is text, not a view or a function:
inlined, the planner still sees the partial index bounds of every caller.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import LiteralString

from resolver.core.domain import PAGE_SIZE_HARD_CAP

QUERIES_FILE = Path(__file__).with_name("queries.sql")
_HEADER = re.compile(r"^-- (name|fragment): ([a-z_]+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^(\s*)-- include: ([a-z_]+)\s*$")


@cache
def _parsed() -> tuple[dict[str, LiteralString], dict[str, str]]:
    text = QUERIES_FILE.read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    raw: dict[tuple[str, str], str] = {}
    for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        if any(key[1] == name for key in raw):
            raise RuntimeError(f"queries.sql names {name!r} twice")
        raw[(kind, name)] = body
    fragments: dict[str, str] = {}
    for (kind, name), body in raw.items():
        if kind == "fragment":
            fragments[name] = _strip(body, fragments)
    statements: dict[str, LiteralString] = {}
    for (kind, name), body in raw.items():
        if kind == "name":
            # The file ships with the package and is never built from input: it is a literal.
            statements[name] = _strip(body, fragments)
    return statements, fragments


def _strip(body: str, fragments: dict[str, str]) -> str:
    lines: list[str] = []
    for line in body.strip().splitlines():
        include = _INCLUDE.match(line)
        if include is not None:
            indent, name = include.groups()
            if name not in fragments:
                raise RuntimeError(f"queries.sql includes unknown fragment {name!r}")
            lines.append(f"{indent}({fragments[name]})")
        elif not line.lstrip().startswith("--"):
            lines.append(line)
    return "\n".join(lines).rstrip(";\n ")


def all_statements() -> dict[str, LiteralString]:
    return _parsed()[0]


def fragment(name: str) -> str:
    """A shared piece as the statements include it (for tests and docs)."""
    return _parsed()[1][name]


def statement(name: str) -> LiteralString:
    try:
        return all_statements()[name]
    except KeyError:
        raise KeyError(f"no statement named {name!r} in {QUERIES_FILE.name}") from None


_PAGE_SIZE = "%(page_size)s"


@cache
def claim_statement(page_size: int) -> LiteralString:
    """The claim with its page size written in as a literal: the LIMIT a replica claims
    never changes for the life of its process.

    With the LIMIT a parameter, PostgreSQL's generic plan cannot know the page is small and
    picks a plan tens of times slower, so every call was planned afresh (about a third of
    the claim's server time). With a literal, the cached generic plan is the custom one and
    the prepared claim is planned once per connection.
    """
    if type(page_size) is not int or not 1 <= page_size <= PAGE_SIZE_HARD_CAP:
        raise ValueError(
            f"page_size must be an integer in 1..{PAGE_SIZE_HARD_CAP}, not {page_size!r}"
        )
    text = statement("recovery_claim_due_page")
    if text.count(_PAGE_SIZE) != 1:
        raise RuntimeError("recovery_claim_due_page must use %(page_size)s exactly once")
    # An int rendered by Python is digits only: nothing from outside enters the SQL text.
    return text.replace(_PAGE_SIZE, str(page_size))
