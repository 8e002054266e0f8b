"""The schema's functions and triggers: defined once, applied by `resolver migrate`.

Migrations carry tables, columns, constraints, indexes, privileges and data. Every function
and trigger has exactly one definition, in resolver/db/schema/functions/, and `resolver
migrate` applies those files whenever they changed or a table migration runs, in the
migration's one transaction:

1. `capture`: a database whose revision has no record yet (release 0.1.0 kept none) keeps a
   script of the definitions it has, so a downgrade to that revision can bring them back;
2. `clear`: the resolver's triggers go, and every resolver function nothing but a trigger
   depended on (the privileges granted on them are kept aside);
3. the files' function statements (bodies unchecked until called: a migration below may
   create the table a body names);
4. the table migrations;
5. the files' trigger statements (a trigger needs its table);
6. `restore_privileges`, and `record`: the checksum and the script of what was applied.

A downgrade clears in the same way, runs the table downgrades, and applies the script
recorded for the target revision: the definitions that revision had when a release applied
or captured them. With nothing recorded (a database this release created, asked to go below
its own revisions) it refuses before anything changes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, LiteralString, cast

from resolver.db.schema_files import function_files, table_files
from resolver.db.sql_script import Kind, kind, split

if TYPE_CHECKING:
    import sqlalchemy as sa

SCRIPTS_FILE = Path(__file__).with_name("definitions.sql")
_HEADER = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)


class DefinitionsMissing(LookupError):
    """A downgrade target whose functions this database never recorded."""


@cache
def _scripts() -> dict[str, LiteralString]:
    parts = _HEADER.split(SCRIPTS_FILE.read_text(encoding="utf-8"))
    names = parts[1::2]
    if len(set(names)) != len(names):
        raise RuntimeError(f"{SCRIPTS_FILE.name} names a script twice: {sorted(names)}")
    # The file ships with the package and is never built from input: its text is a literal.
    return {
        name: cast(LiteralString, body.strip())
        for name, body in zip(names, parts[2::2], strict=True)
    }


def script(name: str) -> LiteralString:
    return _scripts()[name]


@cache
def _statements() -> tuple[str, ...]:
    return tuple(
        statement.text for path in function_files() for statement in split(path.read_text("utf-8"))
    )


def _of_kind(wanted: Iterable[Kind]) -> str:
    kinds = set(wanted)
    return "\n\n".join(text for text in _statements() if kind(split(text)[0]) in kinds)


@cache
def functions_script() -> str:
    """Every function of the schema (with its comments and privileges), in file order."""
    return _of_kind([Kind.FUNCTION])


@cache
def triggers_script() -> str:
    """Every trigger of the schema, in file order."""
    return _of_kind([Kind.TRIGGER])


@cache
def checksum() -> str:
    """Of the definitions and of the steps that apply them: either changing re-applies."""
    digest = hashlib.sha256()
    for text in (functions_script(), triggers_script(), SCRIPTS_FILE.read_text("utf-8")):
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def schema_script() -> str:
    """The whole current schema as one script for an empty schema: functions (bodies checked
    when called, as `resolver migrate` applies them), tables, then triggers."""
    tables = "\n".join(path.read_text(encoding="utf-8") for path in table_files())
    return "\n\n".join(
        ["SET check_function_bodies = off;", functions_script(), tables, triggers_script()]
    )


def applied_script() -> str:
    """What `record` keeps: the definitions as this release applies them."""
    return f"{functions_script()}\n\n{triggers_script()}\n"


def _run(conn: sa.Connection, text: str, params: dict[str, object] | None = None) -> None:
    # Without parameters psycopg sends a script as one simple query, as `psql -f` would: it
    # holds many statements, and `%` in a plpgsql message is not a placeholder.
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(text, params)
    finally:
        cursor.close()


def _scalar(conn: sa.Connection, name: str, params: dict[str, object]) -> object:
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(script(name), params)
        row = cursor.fetchone()
    finally:
        cursor.close()
    return None if row is None else row[0]


def is_current(conn: sa.Connection, revision: str) -> bool:
    """Whether the database already has this release's definitions at `revision`."""
    _run(conn, script("bookkeeping"))
    return _scalar(conn, "recorded_checksum", {"revision": revision}) == checksum()


def prepare(conn: sa.Connection, at_revision: str | None) -> None:
    """Steps 1-3 (before the table migrations run)."""
    _run(conn, script("bookkeeping"))
    if at_revision is not None:
        _run(conn, script("capture"))
    _run(conn, script("clear"))
    _run(conn, functions_script())


def finish(conn: sa.Connection, revision: str) -> None:
    """Steps 5-6 (after the table migrations ran)."""
    _run(conn, triggers_script())
    _run(conn, script("restore_privileges"))
    _run(
        conn,
        script("record"),
        {"revision": revision, "checksum": checksum(), "script": applied_script()},
    )


def recorded(conn: sa.Connection, revision: str) -> str:
    """The script recorded for `revision`, or DefinitionsMissing."""
    _run(conn, script("bookkeeping"))
    text = _scalar(conn, "recorded_script", {"revision": revision})
    if not isinstance(text, str):
        raise DefinitionsMissing(revision)
    return text


def clear(conn: sa.Connection) -> None:
    _run(conn, script("clear"))


def restore(conn: sa.Connection, recorded_script: str) -> None:
    """After the table downgrades: the target revision's own definitions, as recorded."""
    _run(conn, "SET LOCAL check_function_bodies = off")
    _run(conn, recorded_script)
    _run(conn, script("restore_privileges"))


def forget(conn: sa.Connection) -> None:
    _run(conn, script("forget"))
