"""Schema migrations: `resolver migrate` runs Alembic from here; the start-up and readiness
checks read the schema's revision without it.

Alembic and SQLAlchemy are imported only by the functions that migrate: `resolver run`
checks the revision with one psycopg query and reads the revision graph from the version
files' own `revision` / `down_revision` lines, which keeps a third of a second of imports
(and their CPU, times every replica that starts at once) out of its start-up.

Revision ids follow the files, numbered in the order they apply: one migration per release
(`0001_schema_0_1_0`, `0002_schema_0_2_0`, ...), tables only. The functions and triggers are
applied around them from their one definition (resolver/db/definitions.py). A database
stamped with the id release 0.1.0 used for its head (`RELEASED_REVISIONS`) is moved to
today's id by `resolver migrate` in the same transaction, before Alembic reads it, and a
downgrade to that revision stamps the old id back, so that release recognises its schema;
the start-up and readiness checks read either.

Migrations and grants run under a `lock_timeout`: DDL that cannot get its lock gives up
quickly instead of queueing, because every later statement on that table (the replicas'
claims and commits) would queue behind it and stall. The whole attempt rolls back and is
retried after a pause, until `MigrationPolicy.attempts` are spent.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, LiteralString

import msgspec
import psycopg
import structlog

from resolver.core.errors import (
    ConfigError,
    MigrationLockTimeout,
)
from resolver.db import definitions, provider_schemas
from resolver.db.connect import Pooler, Profile, connect
from resolver.db.dsn import redact, sqlalchemy_url
from resolver.db.errors import migration_error, unreachable
from resolver.db.statements import statement

if TYPE_CHECKING:
    import sqlalchemy as sa
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_REVISION = re.compile(r"^revision(?:\s*:\s*str)?\s*=\s*[\"']([^\"']+)[\"']\s*$", re.M)
_DOWN_REVISION = re.compile(
    r"^down_revision(?:\s*:[^=]+)?\s*=\s*(?:None|[\"']([^\"']+)[\"'])\s*$", re.M
)
# The privileges of every role on the schema's objects (roles.sql creates the roles). It ships
# in the package so the migration Job applies exactly the grants of the schema it migrated.
GRANTS_FILE = Path(__file__).with_name("grants.sql")
DEFAULT_CONNECT_TIMEOUT_SECONDS = 5.0

# The id a release stamped for its head -> the revision that stands for the same tables today.
# Release 0.1.0 shipped eighteen migrations; their tables are 0001_schema_0_1_0 now. Only a
# release's head needs an entry: no installation stops between two revisions of a release.
# Never reuse an old id: a database stamped with it would be moved.
RELEASED_REVISIONS: Mapping[str, str] = {
    "0018_late_expire_index": "0001_schema_0_1_0",
}
# Advisory lock key of `resolver migrate` ("resolver" in ASCII): two migrations at once (two
# Jobs, a Job and an operator) run one after the other instead of interleaving their steps.
MIGRATION_LOCK_KEY = 0x7265736F6C766572
# The revision that brought providers' own schemas (resolver/db/provider_schemas.py): going
# below it rolls every provider's schema back first.
PROVIDER_SCHEMAS_SINCE = "0002_schema_0_2_0"

log = structlog.get_logger("resolver.migrate")


class MigrationPolicy(msgspec.Struct, frozen=True):
    """How long DDL may wait for a lock, and how often a timed-out attempt is retried."""

    connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS
    lock_timeout_ms: int = 5_000
    attempts: int = 10
    retry_delay_seconds: float = 2.0
    retry_delay_max_seconds: float = 30.0
    pooler: Pooler = Pooler.NONE

    def profile(self) -> Profile:
        return Profile(
            application_name="resolver-migrate",
            connect_timeout_seconds=self.connect_timeout_seconds,
            pooler=self.pooler,
        )

    def delay_after(self, attempt: int) -> float:
        """Doubling pauses, capped: a long worker transaction gets room to finish."""
        return min(self.retry_delay_seconds * 2.0 ** (attempt - 1), self.retry_delay_max_seconds)


DEFAULT_POLICY = MigrationPolicy()


def alembic_config(database_url: str, output: io.StringIO | None = None) -> Config:
    from alembic.config import Config

    config = Config(output_buffer=output) if output is not None else Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # '%' is ConfigParser interpolation syntax; a password may contain it.
    url = sqlalchemy_url(database_url).render_as_string(hide_password=False)
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
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


def schema_status(
    database_url: str,
    connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
    pooler: Pooler = Pooler.NONE,
) -> tuple[SchemaStatus, str | None]:
    """Where the database stands relative to this code's migrations.

    Migrations are additive (expand before contract), so code may run on a schema one
    release ahead of it: that is what lets old pods keep working during a rolling upgrade.
    """
    current = current_revision(database_url, connect_timeout_seconds, pooler)
    return classify(current), current


def today_revision(revision: str) -> str:
    """`revision` under today's id: an id an earlier release used maps to its new name."""
    return RELEASED_REVISIONS.get(revision, revision)


def released_id(revision: str) -> str | None:
    """The id the release whose head `revision` is stamped, when it differs from today's."""
    return next((old for old, new in RELEASED_REVISIONS.items() if new == revision), None)


def classify(current: str | None) -> SchemaStatus:
    """Where `current` (a database's revision) stands relative to this code's head."""
    if current is None:
        return SchemaStatus.MISSING
    current = today_revision(current)
    if current == head_revision():
        return SchemaStatus.CURRENT
    return SchemaStatus.BEHIND if current in revision_graph() else SchemaStatus.AHEAD


def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("postgresql://unused"))


def upgrade(
    database_url: str, revision: str = "head", policy: MigrationPolicy = DEFAULT_POLICY
) -> None:
    """Migrate to `revision` and apply this release's functions and triggers; a no-op when
    both are already there (idempotent).

    Only the head carries this release's definitions: `revision` may name an older one only
    when the database is already there or past it (nothing to do), never to stop short of the
    head (the release whose head it is does that, with its own definitions).
    """
    _retrying(database_url, policy, "upgrade", lambda conn: _upgrade(conn, database_url, revision))


def downgrade(database_url: str, revision: str, policy: MigrationPolicy = DEFAULT_POLICY) -> None:
    """Back to `revision` (or `base`): the table downgrades, then the functions and triggers
    that revision had, as this database recorded them."""
    _retrying(
        database_url,
        policy,
        "downgrade",
        lambda conn: _downgrade(conn, database_url, revision),
    )


def grants_sql() -> str:
    """The resolver's grants, then each installed provider's (its own tables)."""
    core = GRANTS_FILE.read_text(encoding="utf-8")
    return core + provider_schemas.grants_script(provider_schemas.installed_schemas())


def apply_grants(database_url: str, policy: MigrationPolicy = DEFAULT_POLICY) -> None:
    """Run grants.sql (idempotent) in one transaction, as the schema owner."""
    # The file sets search_path for the session (so it also runs by hand with psql); the
    # reset in the same transaction leaves nothing behind on a pooler's server connection.
    script = grants_sql() + "\nRESET search_path;\n"
    _retrying(database_url, policy, "grants", lambda conn: _run_script(conn, script))


def _run_script(conn: sa.Connection, script: str) -> None:
    # Without parameters psycopg sends the file as one simple query, as `psql -f` would: the
    # file holds many statements (and `%` is not a placeholder in it).
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(script)
    finally:
        cursor.close()


def upgrade_sql(revision: str = "head", from_revision: str | None = None) -> str:
    """The script `upgrade` would run, without touching a database (`resolver migrate --sql`):
    one transaction holding the definitions' steps around the table migrations.

    Without `from_revision` it builds an empty schema; with it, it upgrades a database at that
    revision (an earlier release's own id accepted, and moved to today's as `upgrade` does),
    keeping a copy of the definitions it replaces where the database recorded none, as
    `upgrade` does. Either way its first statement refuses, before anything changes, a
    database that is not where the script starts from.
    """
    from alembic import command

    target = _target(revision)
    start = None if from_revision is None else _target(from_revision)
    if start is not None and start not in _ancestors(target):
        raise ConfigError(f"{start} is not below {target}: nothing to upgrade from")
    out = io.StringIO()
    cfg = alembic_config("postgresql://offline", out)
    if start != target:
        with _revision_errors():
            command.upgrade(cfg, target if start is None else f"{start}:{target}", sql=True)
    record = definitions.script("record") % {
        "revision": _quoted(target),
        "checksum": _quoted(definitions.checksum()),
        "script": _dollar_quoted(definitions.applied_script()),
    }
    steps = ["BEGIN;", _script_guard(start), definitions.script("bookkeeping") + ";"]
    if start is not None:
        steps.append(definitions.script("capture") + ";")
    steps += [
        definitions.script("clear") + ";",
        definitions.functions_script(),
        out.getvalue().strip(),
        definitions.triggers_script(),
        definitions.script("restore_privileges") + ";",
        record + ";",
        provider_schemas.upgrade_script(provider_schemas.installed_schemas()),
        "COMMIT;",
    ]
    return "\n\n".join(step for step in steps if step) + "\n"


def _script_guard(start: str | None) -> str:
    """The printed script's first statements: it runs only on a database where it starts (an
    empty schema, or `start`, an earlier release's id of which moves to today's)."""
    # Both guards are formatted as `record` is: a doubled percent sign in them stands for one.
    if start is None:
        return definitions.script("script_guard_empty") % {}
    ids = [i for i in (start, released_id(start)) if i is not None]
    guard = definitions.script("script_guard_at") % {
        "revision": _quoted(start),
        "ids": "ARRAY[" + ", ".join(_quoted(i) for i in ids) + "]",
    }
    rename = statement("schema_revision_rename") % {
        "renamed": _quoted(json.dumps(dict(RELEASED_REVISIONS)))
    }
    return f"{guard}\n{rename};"


def _quoted(value: str) -> str:
    if "'" in value or "\\" in value:
        raise ValueError(f"{value!r} cannot be quoted plainly")
    return f"'{value}'"


def _dollar_quoted(value: str) -> str:
    tag = "$resolver_definitions$"
    if tag in value:
        raise ValueError(f"the definitions contain {tag}")
    return f"{tag}{value}{tag}"


@contextmanager
def _revision_errors() -> Iterator[None]:
    """An unknown or ambiguous revision is the caller's mistake: one line naming the known."""
    from alembic.util import CommandError

    try:
        yield
    except CommandError as exc:
        known = ", ".join(sorted(rev.revision for rev in _scripts().walk_revisions()))
        raise ConfigError(f"{exc}; this release knows {known} (and head, base)") from None


def current_revision(
    database_url: str,
    connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
    pooler: Pooler = Pooler.NONE,
) -> str | None:
    """The database's Alembic revision (None before the first migration), one query."""
    profile = Profile(
        application_name="resolver-schema-check",
        connect_timeout_seconds=connect_timeout_seconds,
        # The check is one short query; its timeout also proves the settings arrive.
        settings={"statement_timeout": max(1, round(connect_timeout_seconds * 1000))},
        pooler=pooler,
    )
    try:
        with connect(database_url, profile, autocommit=True) as conn:
            try:
                row = conn.execute(statement("schema_revision")).fetchone()
            except psycopg.errors.UndefinedTable:
                return None
    except psycopg.OperationalError as exc:
        raise unreachable(redact(database_url), exc) from exc
    return None if row is None else str(row[0])


def _engine(database_url: str, policy: MigrationPolicy) -> sa.Engine:
    import sqlalchemy as sa

    # The lock timeout is not a startup option: it is `SET LOCAL` in the migration's one
    # transaction (`_retrying`), which a transaction pooler keeps and a startup option not.
    connect_args = {k: v for k, v in policy.profile().connect_kwargs().items() if k != "options"}
    return sa.create_engine(
        sqlalchemy_url(database_url), poolclass=sa.pool.NullPool, connect_args=connect_args
    )


def _target(revision: str) -> str:
    """`revision` as a revision id of this release ("head" is its head)."""
    target = head_revision() if revision == "head" else today_revision(revision)
    if target not in revision_graph():
        known = ", ".join(sorted(revision_graph()))
        raise ConfigError(
            f"unknown revision {revision!r}; this release knows {known} (and head, base)"
        )
    return target


def _ancestors(revision: str | None) -> set[str]:
    graph = revision_graph()
    seen: set[str] = set()
    while revision is not None and revision not in seen:
        seen.add(revision)
        revision = graph.get(revision)
    return seen


def _upgrade(conn: sa.Connection, database_url: str, revision: str) -> None:
    target = _target(revision)
    _lock(conn)
    _rename_revision(conn)
    current = _current(conn)
    if target != head_revision():
        if target in _ancestors(current):
            return
        raise ConfigError(
            f"cannot stop at {target}: this release's functions are those of "
            f"{head_revision()}; upgrade to the head, or run the release whose head "
            f"{target} is"
        )
    # Read before anything changes: a provider that does not load stops migrate here.
    schemas = provider_schemas.installed_schemas()
    reapplied = not (current == target and definitions.is_current(conn, target))
    if reapplied:
        definitions.prepare(conn, at_revision=current)
        _alembic(conn, database_url, target)
        definitions.finish(conn, target)
    provider_schemas.apply(provider_schemas.runner(conn), schemas, definitions_reapplied=reapplied)


def _downgrade(conn: sa.Connection, database_url: str, revision: str) -> None:
    target = "base" if revision == "base" else _target(revision)
    _lock(conn)
    _rename_revision(conn)
    if PROVIDER_SCHEMAS_SINCE not in _ancestors(None if target == "base" else target):
        # Below the revision that keeps their bookkeeping: providers' schemas go first (their
        # tables may reference the resolver's).
        provider_schemas.roll_back(
            provider_schemas.runner(conn), provider_schemas.installed_schemas()
        )
    if target == "base":
        definitions.clear(conn)
        _alembic(conn, database_url, "base", down=True)
        definitions.clear(conn)
        definitions.forget(conn)
        return
    if target not in _ancestors(_current(conn)):
        raise ConfigError(f"the schema is not past {target}: nothing to downgrade")
    try:
        script = definitions.recorded(conn, target)
    except definitions.DefinitionsMissing:
        raise ConfigError(
            f"cannot downgrade to {target}: this database has no record of the functions it "
            "had there (it never ran at that revision under this release or a later one). "
            "Restore a backup taken at that revision instead"
        ) from None
    definitions.clear(conn)
    _alembic(conn, database_url, target, down=True)
    # The table downgrades freed what a check constraint held (a domain-set function).
    definitions.clear(conn)
    definitions.restore(conn, script)
    if PROVIDER_SCHEMAS_SINCE in _ancestors(target):
        provider_schemas.reapply_definitions(
            provider_schemas.runner(conn), provider_schemas.installed_schemas()
        )
    old = released_id(target)
    if old is not None:
        _execute(conn, statement("schema_revision_stamp"), {"revision": target, "stamp": old})


def _lock(conn: sa.Connection) -> None:
    _execute(conn, "SELECT pg_advisory_xact_lock(%(key)s)", {"key": MIGRATION_LOCK_KEY})


def _current(conn: sa.Connection) -> str | None:
    exists = conn.exec_driver_sql("SELECT to_regclass('alembic_version') IS NOT NULL").scalar()
    if not exists:
        return None
    value = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    return None if value is None else str(value)


def _execute(conn: sa.Connection, text: LiteralString, params: dict[str, object]) -> None:
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(text, params)
    finally:
        cursor.close()


def _alembic(conn: sa.Connection, database_url: str, revision: str, *, down: bool = False) -> None:
    from alembic import command

    cfg = alembic_config(database_url)
    cfg.attributes["connection"] = conn
    with _revision_errors():
        if down:
            command.downgrade(cfg, revision)
        else:
            command.upgrade(cfg, revision)


def _rename_revision(conn: sa.Connection) -> None:
    """Move a revision id an earlier release wrote to today's id, in the migration's transaction."""
    exists = conn.exec_driver_sql("SELECT to_regclass('alembic_version') IS NOT NULL").scalar()
    if not exists:
        return
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(
            statement("schema_revision_rename"), {"renamed": json.dumps(dict(RELEASED_REVISIONS))}
        )
        for old, new in cursor.fetchall():
            log.info("schema_revision_renamed", old=old, new=new)
    finally:
        cursor.close()


def _retrying(
    database_url: str,
    policy: MigrationPolicy,
    step: str,
    action: Callable[[sa.Connection], object],
) -> None:
    """`action` in one transaction; a lock timeout rolls it all back and retries it."""
    import sqlalchemy as sa

    engine = _engine(database_url, policy)
    try:
        for attempt in range(1, policy.attempts + 1):
            try:
                with engine.begin() as conn:
                    conn.exec_driver_sql(
                        "SELECT set_config('lock_timeout', %s, true)",
                        (f"{policy.lock_timeout_ms}ms",),
                    )
                    action(conn)
                return
            except (sa.exc.DBAPIError, psycopg.Error) as exc:
                # SQLAlchemy wraps what went through it; the grants script's cursor does not.
                error = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
                if not isinstance(error, psycopg.errors.LockNotAvailable):
                    raise migration_error(step, redact(database_url), error) from exc
                if attempt == policy.attempts:
                    raise MigrationLockTimeout(
                        f"{step}: a lock stayed taken through {policy.attempts} attempts of "
                        f"{policy.lock_timeout_ms} ms each (lock_timeout); nothing was changed. "
                        "A long transaction holds a table the migration alters: find it in "
                        "pg_stat_activity, or retry when the load is lower"
                    ) from exc
                delay = policy.delay_after(attempt)
                log.warning(
                    "migration_lock_timeout",
                    step=step,
                    attempt=attempt,
                    attempts=policy.attempts,
                    lock_timeout_ms=policy.lock_timeout_ms,
                    retry_in_seconds=delay,
                )
                time.sleep(delay)  # a pause between whole attempts, not a lease
    finally:
        engine.dispose()
