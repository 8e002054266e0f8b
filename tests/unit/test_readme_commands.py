"""The README's command table lists every command and every option an operator runs."""

from __future__ import annotations

import re
from importlib.metadata import entry_points
from pathlib import Path

import click

README = Path(__file__).resolve().parents[2] / "README.md"
# The demo has many tuning flags of its own (docs/demo.md lists them); the table names it.
DOCUMENTED_ELSEWHERE = {"demo"}


def command_table() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Commands") :]
    return section[: section.index("\n\n", section.index("| command |"))]


def cli() -> click.Group:
    (script,) = entry_points(group="console_scripts", name="resolver")
    group = script.load()
    assert isinstance(group, click.Group)
    return group


def table_rows(table: str) -> dict[str, list[str]]:
    """Each command's rows of the table (a command may have several)."""
    rows: dict[str, list[str]] = {}
    for line in table.splitlines():
        match = re.match(r"\| `resolver (\w+)", line)
        if match:
            rows.setdefault(match.group(1), []).append(line)
    return rows


def test_every_command_has_a_row() -> None:
    rows = table_rows(command_table())
    assert sorted(rows) == sorted(cli().commands)


def options(command: click.Command) -> list[str]:
    """A command's long options, and those of its subcommands (`resolver audit verify`)."""
    flags = [flag for param in command.params for flag in param.opts if flag.startswith("--")]
    if isinstance(command, click.Group):
        flags += [flag for sub in command.commands.values() for flag in options(sub)]
    return flags


def test_every_option_of_the_operator_commands_is_in_its_rows() -> None:
    rows = table_rows(command_table())
    missing = [
        f"{name} {flag}"
        for name, command in cli().commands.items()
        if name not in DOCUMENTED_ELSEWHERE
        for flag in options(command)
        if not any(f"{flag}" in row for row in rows.get(name, []))
    ]
    assert not missing, f"README.md's command table lacks {missing}"
