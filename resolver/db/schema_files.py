"""The database's truth as SQL files: today's tables, the functions and triggers, the migrations.

`schema/tables/NN_concern.sql` is today's definition of every table, index and constraint, to
read and to compare with: `resolver migrate` never runs it (the migrations build the tables).
`schema/functions/NN_concern.sql` is the only definition of every function and trigger: the
migrate step applies it (resolver/db/definitions.py). A migration is a pair
`migrations/sql/<revision>.up.sql` / `.down.sql` of table changes, which its Alembic revision
module runs as it is (`migration_script`). The catalog-diff test proves that a database
migrated from empty, and one upgraded from the previous release, equal one built from the
current files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

SCHEMA_DIR = Path(__file__).with_name("schema")
TABLES_DIR = SCHEMA_DIR / "tables"
FUNCTIONS_DIR = SCHEMA_DIR / "functions"
MIGRATIONS_SQL_DIR = Path(__file__).parent / "migrations" / "sql"

Direction = Literal["up", "down"]


def table_files() -> list[Path]:
    return sorted(TABLES_DIR.glob("*.sql"))


def function_files() -> list[Path]:
    return sorted(FUNCTIONS_DIR.glob("*.sql"))


def migration_file(revision: str, direction: Direction) -> Path:
    return MIGRATIONS_SQL_DIR / f"{revision}.{direction}.sql"


def migration_script(revision: str, direction: Direction) -> str:
    path = migration_file(revision, direction)
    if not path.is_file():
        raise FileNotFoundError(f"migration {revision} has no {path.name} in {MIGRATIONS_SQL_DIR}")
    return path.read_text(encoding="utf-8")


def apply_migration(revision: str, direction: Direction) -> None:
    """Run a migration's SQL file from its Alembic revision module, as one script.

    Offline (`resolver migrate --sql`) Alembic prints it; online it goes to the server
    without parameters, as `psql -f` would send it: a file holds many statements, and `%`
    in a plpgsql message is not a placeholder.
    """
    from alembic import context, op

    script = migration_script(revision, direction)
    if context.is_offline_mode():
        # Alembic ends each statement it prints with its own `;`.
        op.execute(script.rstrip().removesuffix(";"))
    else:
        op.get_bind().exec_driver_sql(script, execution_options={"no_parameters": True})
