"""Schema migrations: `resolver migrate` and the readiness check run Alembic from here."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from resolver.db.dsn import redact, sqlalchemy_url
from resolver.errors import ConfigError, StorageUnavailable

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config(database_url: str, output: io.StringIO | None = None) -> Config:
    config = Config(output_buffer=output) if output is not None else Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # '%' is ConfigParser interpolation syntax; a password may contain it.
    url = sqlalchemy_url(database_url).render_as_string(hide_password=False)
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str:
    head = _scripts().get_current_head()
    assert head is not None
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
    known = {rev.revision for rev in _scripts().walk_revisions()}
    return SchemaStatus.BEHIND if current in known else SchemaStatus.AHEAD


def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config("postgresql://unused"))


def upgrade(database_url: str, revision: str = "head") -> None:
    """Migrate to `revision`; a no-op when already there (idempotent)."""
    _run(database_url, lambda cfg: command.upgrade(cfg, revision))


def downgrade(database_url: str, revision: str) -> None:
    _run(database_url, lambda cfg: command.downgrade(cfg, revision))


def upgrade_sql(revision: str = "head") -> str:
    """The DDL `upgrade` would run, without touching any database (`resolver migrate --sql`)."""
    out = io.StringIO()
    cfg = alembic_config("postgresql://offline", out)
    with _revision_errors():
        command.upgrade(cfg, revision, sql=True)
    return out.getvalue()


@contextmanager
def _revision_errors() -> Iterator[None]:
    """An unknown or ambiguous revision is the caller's mistake: one line naming the known."""
    try:
        yield
    except CommandError as exc:
        known = ", ".join(sorted(rev.revision for rev in _scripts().walk_revisions()))
        raise ConfigError(f"{exc}; this release knows {known} (and head, base)") from None


def current_revision(database_url: str) -> str | None:
    engine = sa.create_engine(sqlalchemy_url(database_url), poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except sa.exc.OperationalError as exc:
        raise StorageUnavailable(f"cannot reach {redact(database_url)}: {exc.orig}") from exc
    finally:
        engine.dispose()


def _run(database_url: str, action: object) -> None:
    assert callable(action)
    engine = sa.create_engine(sqlalchemy_url(database_url), poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            cfg = alembic_config(database_url)
            cfg.attributes["connection"] = conn
            with _revision_errors():
                action(cfg)
    except sa.exc.OperationalError as exc:
        raise StorageUnavailable(f"cannot reach {redact(database_url)}: {exc.orig}") from exc
    finally:
        engine.dispose()
