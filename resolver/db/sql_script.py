"""SQL scripts as statements: split a file the way `psql` does, and tell what each one defines.

`resolver migrate` applies the schema's functions before the table migrations and its
triggers after them (a trigger needs its table; a check constraint may need a function), so
it reads each definition file statement by statement. The split honours what may hide a `;`:
comments (`--`, nested `/* */`), quoted literals and identifiers, `E''` escapes and dollar
quoting (`$$`, `$tag$`), which is how every function body here is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")
_WORDS = re.compile(r"[A-Za-z_]+")


class SqlScriptError(ValueError):
    """A script that does not end where its last statement does (an open quote or comment)."""


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement: its text with the comments just above it, and its code alone."""

    text: str
    code: str

    @property
    def words(self) -> tuple[str, ...]:
        """The statement's leading keywords, upper-cased (comments and literals excluded)."""
        return tuple(word.upper() for word in _WORDS.findall(self.code[:200]))[:6]


class Kind(StrEnum):
    FUNCTION = "function"
    """Creates, alters, comments on or sets the privileges of a function, or a DO block."""
    TRIGGER = "trigger"
    TABLE = "table"
    """Everything else: tables, columns, constraints, indexes, comments, data."""


def split(script: str) -> list[Statement]:
    """The statements of `script`, in order; the text of each keeps its leading comments."""
    statements: list[Statement] = []
    start = 0
    code_start: int | None = None
    i, n = 0, len(script)
    while i < n:
        ch = script[i]
        if ch == "-" and script.startswith("--", i):
            end = script.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if ch == "/" and script.startswith("/*", i):
            i = _block_comment_end(script, i)
            continue
        if code_start is None and not ch.isspace():
            code_start = i
        if ch == "'":
            escaped = i > 0 and script[i - 1] in "eE" and not _is_word(script, i - 2)
            i = _quoted_end(script, i, "'", backslash=escaped)
        elif ch == '"':
            i = _quoted_end(script, i, '"', backslash=False)
        elif ch == "$" and not _is_word(script, i - 1) and (tag := _DOLLAR_TAG.match(script, i)):
            end = script.find(tag.group(), tag.end())
            if end < 0:
                raise SqlScriptError(f"an unterminated {tag.group()} quote at offset {i}")
            i = end + len(tag.group())
        elif ch == ";":
            if code_start is not None:
                statements.append(
                    Statement(script[start : i + 1].strip(), script[code_start : i + 1].strip())
                )
            start, code_start, i = i + 1, None, i + 1
        else:
            i += 1
    if code_start is not None:
        raise SqlScriptError(f"the script ends inside a statement: {script[code_start:][:60]!r}")
    return statements


def kind(statement: Statement) -> Kind:
    words = statement.words
    if words[:1] == ("DO",):
        return Kind.FUNCTION
    if "TRIGGER" in words[:4] and words[0] in {"CREATE", "DROP", "COMMENT", "ALTER"}:
        return Kind.TRIGGER
    if words[:2] == ("ALTER", "TABLE") and "TRIGGER" in words:
        return Kind.TRIGGER
    if "FUNCTION" in words[:5] or "PROCEDURE" in words[:5]:
        return Kind.FUNCTION
    return Kind.TABLE


def _is_word(script: str, i: int) -> bool:
    return i >= 0 and (script[i].isalnum() or script[i] == "_")


def _block_comment_end(script: str, i: int) -> int:
    depth, i = 1, i + 2
    while depth:
        opening, closing = script.find("/*", i), script.find("*/", i)
        if closing < 0:
            raise SqlScriptError("an unterminated /* comment")
        if 0 <= opening < closing:
            depth, i = depth + 1, opening + 2
        else:
            depth, i = depth - 1, closing + 2
    return i


def _quoted_end(script: str, i: int, quote: str, *, backslash: bool) -> int:
    i += 1
    while True:
        end = script.find(quote, i)
        if end < 0:
            raise SqlScriptError(f"an unterminated {quote} quote")
        if backslash and _escaped(script, end):
            i = end + 1
        elif script.startswith(quote * 2, end):
            i = end + 2
        else:
            return end + 1


def _escaped(script: str, i: int) -> bool:
    count = 0
    while i - count - 1 >= 0 and script[i - count - 1] == "\\":
        count += 1
    return count % 2 == 1
