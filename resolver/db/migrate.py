"""Schema migrations: `resolver migrate` runs Alembic from here; the start-up and readiness
checks read the schema's revision without it.

Alembic and SQLAlchemy are imported only by the functions that migrate: `resolver run`
checks the revision with one psycopg query and reads the revision graph from the version
files' own `revision` / `down_revision` lines, which keeps a third of a second of imports
(and their CPU, times every replica that starts at once) out of its start-up.
"""

from __future__ import annotations

import io
import re
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from resolver.db.dsn import libpq_dsn, redact, sqlalchemy_url
from resolver.db.statements import statement
from resolver.errors import StorageUnavailable

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_REVISION = re.compile(r"^revision(?:\s*:\s*str)?\s*=\s*[\"']([^\"']+)[\"']\s*$", re.M)
_DOWN_REVISION = re.compile(
    r"^down_revision(?:\s*:[^=]+)?\s*=\s*(?:None|[\"']([^\"']+)[\"'])\s*$", re.M
)


def alembic_config(database_url: str, output: io.StringIO | None = None) -> Config:
    from alembic.config import Config

    config = Config(output_buffer=output) if output is not None else Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # '%' is ConfigParser interpolation syntax; a password may contain it.
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    return config


@cache
def revision_graph() -> dict[str, str | None]:
    """revision -> down_revision of every version file, read as text (no import).

    A file this cannot read plainly (a merge revision, a computed id) makes it ask Alembic
    instead, so the answer is always Alembic's.
    """
    graph: dict[str, str | None] = {}
    for path in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        revision, down = _REVISION.findall(text), _DOWN_REVISION.findall(text)
        if len(revision) != 1 or len(down) != 1:
            return _alembic_graph()
        graph[revision[0]] = down[0] or None
    heads = set(graph) - set(graph.values())
    if len(heads) != 1 or len(graph) != len(set(graph.values())):
        return _alembic_graph()
    return graph


def _alembic_graph() -> dict[str, str | None]:
    graph: dict[str, str | None] = {}
    for rev in _scripts().walk_revisions():
        down = rev.down_revision
        graph[rev.revision] = down if isinstance(down, str) or down is None else ",".join(down)
    return graph


def head_revision() -> str:
    graph = revision_graph()
    (head,) = set(graph) - set(graph.values())
    return head


class SchemaStatus(StrEnum):
    CURRENT = "current"
    BEHIND = "behind"
    """A revision this code knows, older than its head: run `resolver migrate`."""
    AHEAD = "ahead"
    """A revision this code does not know: a newer release migrated (rolling upgrade)."""
    MISSING = "missing"


def schema_status(database_url: str) -> tuple[SchemaStatus, str | None]:
    """Where the database stands relative to this code's migrations.

    Migrations are additive (expand before contract), so code may run on a schema one
    release ahead of it: that is what lets old pods keep working during a rolling upgrade.
    """
    current = current_revision(database_url)
    return classify(current), current


def classify(current: str | None) -> SchemaStatus:
    """Where `current` (a database's revision) stands relative to this code's head."""
    if current is None:
        return SchemaStatus.MISSING
    if current == head_revision():
        return SchemaStatus.CURRENT
    return SchemaStatus.BEHIND if current in revision_graph() else SchemaStatus.AHEAD


def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("postgresql://unused"))


def upgrade(database_url: str, revision: str = "head") -> None:
    """Migrate to `revision`; a no-op when already there (idempotent)."""
    from alembic import command

    _run(database_url, lambda cfg: command.upgrade(cfg, revision))


def downgrade(database_url: str, revision: str) -> None:
    from alembic import command

    _run(database_url, lambda cfg: command.downgrade(cfg, revision))


def upgrade_sql(revision: str = "head") -> str:
    """The DDL `upgrade` would run, without touching any database (`resolver migrate --sql`)."""
    from alembic import command

    out = io.StringIO()
    cfg = alembic_config("postgresql://offline", out)
    command.upgrade(cfg, revision, sql=True)
    return out.getvalue()


def current_revision(database_url: str) -> str | None:
    """The database's Alembic revision (None before the first migration), one query."""
    try:
        with psycopg.connect(libpq_dsn(database_url), autocommit=True) as conn:
            try:
                row = conn.execute(statement("schema_revision")).fetchone()
            except psycopg.errors.UndefinedTable:
                return None
    except psycopg.OperationalError as exc:
        raise StorageUnavailable(f"cannot reach {redact(database_url)}: {exc}") from exc
    return None if row is None else str(row[0])


def _run(database_url: str, action: Any) -> None:
    import sqlalchemy as sa

    assert callable(action)
    engine = sa.create_engine(sqlalchemy_url(database_url), poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            cfg = alembic_config(database_url)
            cfg.attributes["connection"] = conn
            action(cfg)
    except sa.exc.OperationalError as exc:
        raise StorageUnavailable(f"cannot reach {redact(database_url)}: {exc.orig}") from exc
    finally:
        engine.dispose()
