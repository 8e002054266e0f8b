"""Loads the named statements of queries.sql: the one home of the resolver's runtime SQL."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import LiteralString

QUERIES_FILE = Path(__file__).with_name("queries.sql")
_HEADER = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)


@cache
def all_statements() -> dict[str, LiteralString]:
    text = QUERIES_FILE.read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    statements: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in statements:
            raise RuntimeError(f"queries.sql names {name!r} twice")
        sql = "\n".join(
            line for line in body.strip().splitlines() if not line.lstrip().startswith("--")
        ).rstrip(";\n ")
        # The file ships with the package and is never built from input: it is a literal.
        statements[name] = sql
    return statements


def statement(name: str) -> LiteralString:
    try:
        return all_statements()[name]
    except KeyError:
        raise KeyError(f"no statement named {name!r} in {QUERIES_FILE.name}") from None
