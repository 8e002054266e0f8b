"""The database's truth as SQL files: today's definition and the versioned migrations.

`schema/NN_concern.sql` holds the current definition of every table, index, function and
trigger, one concern per file, applied in name order (`schema_script`). A migration is a
pair `migrations/sql/<revision>.up.sql` / `.down.sql`, which its Alembic revision module
runs as it is (`migration_script`). The catalog-diff test proves a database migrated step by
step equals one built from the current files, so a change to the schema changes both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

SCHEMA_DIR = Path(__file__).with_name("schema")
MIGRATIONS_SQL_DIR = Path(__file__).parent / "migrations" / "sql"

Direction = Literal["up", "down"]


def schema_files() -> list[Path]:
    return sorted(SCHEMA_DIR.glob("*.sql"))


def schema_script() -> str:
    """Every current-definition file, in order, as one script (for an empty schema)."""
    return "\n".join(path.read_text(encoding="utf-8") for path in schema_files())


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
