"""Providers' own schemas: what `resolver migrate` applies for the installed providers.

A provider that keeps evidence in the resolver's database declares a `ProviderSchema`
(resolver.core.declarations): a package holding its migrations, its definitions and its grants.
After the resolver's own tables and definitions, in the same transaction, `resolver migrate`
takes the installed providers in entry-point name order and, for each:

1. applies its migrations not yet recorded in `resolver_provider_migrations`, in file order,
   recording each with its checksum (one changed after it was applied stops migrate: a
   migration is history; add another);
2. applies its `definitions.sql` when it changed, when a migration of it ran, or when the
   resolver's definitions were applied again (which drops every trigger that calls a
   resolver function, a provider's too);
3. registers its `retained` tables in `resolver_evidence_tables`, which `resolver_prune_batch`
   reads: a pruned dispatch's rows go from them too.

`resolver migrate --grants` appends each provider's `grants.sql` to the resolver's. Going down
to a revision before providers' schemas existed (or to `base`) first runs every recorded
migration's `.down.sql`, providers in reverse order, newest first; a provider whose package is
no longer installed refuses that downgrade before anything changes. Going down to a revision
that keeps them, the resolver's definitions are replaced by those the revision recorded (which
drops every trigger that calls a resolver function, as above): each provider's definitions
are applied again after them, so its tables keep their guards.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any

from resolver.core.declarations import ProviderDeclaration, ProviderSchema
from resolver.core.errors import ConfigError

if TYPE_CHECKING:
    import sqlalchemy as sa

DEFINITIONS = "definitions"  # the bookkeeping name of a provider's definitions.sql
_MIGRATION = re.compile(r"^([0-9]{4}_[a-z0-9_]+)\.up\.sql\Z")


@dataclass(frozen=True)
class Migration:
    name: str
    up: str
    down: str

    @property
    def checksum(self) -> str:
        return _digest(self.up)


@dataclass(frozen=True)
class InstalledSchema:
    """One installed provider's schema, its files read from its package."""

    provider: str
    schema: ProviderSchema
    migrations: tuple[Migration, ...]
    definitions: str
    grants: str

    @property
    def definitions_checksum(self) -> str:
        return _digest(self.definitions)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(folder: Traversable, name: str) -> str:
    path = folder / name
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def load(provider: str, schema: ProviderSchema) -> InstalledSchema:
    """The provider's files; a package that is missing or malformed is a `ConfigError`."""
    try:
        root = resources.files(schema.package)
    except ModuleNotFoundError:
        raise ConfigError(
            f"provider {provider} declares its schema in package {schema.package}, which is not "
            "installed; reinstall the provider"
        ) from None
    folder = root / "migrations"
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    migrations = []
    for name in names:
        match = _MIGRATION.match(name)
        if match is None:
            continue
        down = _read(folder, f"{match[1]}.down.sql")
        if not down:
            raise ConfigError(f"provider {provider}: migration {match[1]} has no .down.sql")
        migrations.append(Migration(match[1], _read(folder, name), down))
    strays = [n for n in names if n.endswith(".sql") and not re.match(r"^[0-9]{4}_", n)]
    if strays:
        raise ConfigError(f"provider {provider}: {strays} are not NNNN_name.(up|down).sql files")
    return InstalledSchema(
        provider,
        schema,
        tuple(migrations),
        _read(root, "definitions.sql"),
        _read(root, "grants.sql"),
    )


def installed(declarations: dict[str, ProviderDeclaration]) -> list[InstalledSchema]:
    """The schemas of the providers that declare one, in entry-point name order."""
    return [
        load(name, declaration.schema)
        for name, declaration in sorted(declarations.items())
        if declaration.schema is not None
    ]


def installed_schemas() -> list[InstalledSchema]:
    from resolver.core.provider import installed_declarations

    return installed(installed_declarations())


# -- applying (inside the migration's transaction) ---------------------------------------------


Run = Callable[[str, dict[str, Any] | None], list[tuple[Any, ...]]]


def runner(conn: sa.Connection) -> Run:
    """Statements on the migration's connection: a script without parameters goes as one
    simple query (many statements, `%` in a message is no placeholder)."""

    def run(text: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(text, params)
            return list(cursor.fetchall()) if cursor.description else []
        finally:
            cursor.close()

    return run


def apply(run: Run, schemas: Iterable[InstalledSchema], *, definitions_reapplied: bool) -> None:
    """Steps 1-3 above, for every schema, in order."""
    for schema in schemas:
        recorded: dict[str, str] = dict(
            run(
                "SELECT name, checksum FROM resolver_provider_migrations WHERE provider = %(p)s",
                {"p": schema.provider},
            )
        )
        ran = False
        for migration in schema.migrations:
            seen = recorded.get(migration.name)
            if seen is None:
                run(migration.up, None)
                _record(run, schema.provider, migration.name, migration.checksum)
                ran = True
            elif seen != migration.checksum:
                raise ConfigError(
                    f"provider {schema.provider}: migration {migration.name} changed after it "
                    "was applied; a migration is history: put the change in a new migration"
                )
        known = {m.name for m in schema.migrations} | {DEFINITIONS}
        unknown = sorted(set(recorded) - known)
        if unknown:
            raise ConfigError(
                f"provider {schema.provider}: the database has its migrations {unknown}, which "
                "the installed package does not: install the release that has them"
            )
        if schema.definitions and (
            definitions_reapplied or ran or recorded.get(DEFINITIONS) != schema.definitions_checksum
        ):
            run(schema.definitions, None)
            _record(run, schema.provider, DEFINITIONS, schema.definitions_checksum)
        _register(run, schema)


def reapply_definitions(run: Run, schemas: Iterable[InstalledSchema]) -> None:
    """After the resolver's definitions were replaced by a downgrade: each recorded provider's
    definitions again, in order. A provider whose definitions the database recorded but whose
    package is not installed refuses (its tables would be left without their triggers)."""
    by_name = {schema.provider: schema for schema in schemas}
    rows = run(
        "SELECT provider FROM resolver_provider_migrations WHERE name = %(d)s ORDER BY provider",
        {"d": DEFINITIONS},
    )
    missing = sorted(provider for (provider,) in rows if provider not in by_name)
    if missing:
        raise ConfigError(
            f"providers {missing} have definitions in the database but are not installed: "
            "install their packages to downgrade (their tables' triggers go with the "
            "resolver's definitions and only they can define them again)"
        )
    # Only those the database recorded: an installed provider never migrated into it has no
    # tables for its definitions to guard.
    for (provider,) in rows:
        schema = by_name[provider]
        if schema.definitions:
            run(schema.definitions, None)
            _record(run, schema.provider, DEFINITIONS, schema.definitions_checksum)


def _record(run: Run, provider: str, name: str, checksum: str) -> None:
    run(
        "INSERT INTO resolver_provider_migrations (provider, name, checksum)"
        " VALUES (%(p)s, %(n)s, %(c)s)"
        " ON CONFLICT (provider, name) DO UPDATE SET checksum = EXCLUDED.checksum,"
        " applied_at_ms = (extract(epoch from clock_timestamp()) * 1000)::bigint",
        {"p": provider, "n": name, "c": checksum},
    )


def _register(run: Run, schema: InstalledSchema) -> None:
    """The provider's retained tables, exactly as declared (a table it no longer declares
    leaves the register); each must exist with its dispatch column."""
    for retained in schema.schema.retained:
        found = run(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = %(t)s AND column_name = %(c)s",
            {"t": retained.table, "c": retained.dispatch_column},
        )
        if not found:
            raise ConfigError(
                f"provider {schema.provider} declares {retained.table}.{retained.dispatch_column} "
                "as retained evidence, but its migrations create no such column"
            )
    run("DELETE FROM resolver_evidence_tables WHERE provider = %(p)s", {"p": schema.provider})
    for retained in schema.schema.retained:
        run(
            "INSERT INTO resolver_evidence_tables (table_name, dispatch_column, provider)"
            " VALUES (%(t)s, %(c)s, %(p)s)",
            {"t": retained.table, "c": retained.dispatch_column, "p": schema.provider},
        )


def roll_back(run: Run, schemas: Iterable[InstalledSchema]) -> None:
    """Every recorded provider migration's down, providers in reverse, newest first."""
    by_name = {schema.provider: schema for schema in schemas}
    exists = run("SELECT to_regclass('resolver_provider_migrations') IS NOT NULL", None)
    if not exists or not exists[0][0]:
        return
    rows = run(
        "SELECT provider, name FROM resolver_provider_migrations WHERE name <> %(d)s"
        " ORDER BY provider DESC, name DESC",
        {"d": DEFINITIONS},
    )
    for provider, name in rows:
        schema = by_name.get(provider)
        migration = next((m for m in schema.migrations if m.name == name), None) if schema else None
        if migration is None:
            raise ConfigError(
                f"provider {provider}'s migration {name} is in the database but not installed: "
                "install that provider's package to roll its schema back"
            )
        run(migration.down, None)
    run("DELETE FROM resolver_evidence_tables", None)
    run("DELETE FROM resolver_provider_migrations", None)


def grants_script(schemas: Iterable[InstalledSchema]) -> str:
    """Each provider's grants.sql, in order, headed by whose it is."""
    return "".join(
        f"\n-- provider {schema.provider}\n{schema.grants}" for schema in schemas if schema.grants
    )


def upgrade_script(schemas: Iterable[InstalledSchema]) -> str:
    """What `resolver migrate --sql` prints for the providers: each migration and the
    definitions, guarded by the bookkeeping so the script applies only what is missing."""
    parts = []
    for schema in schemas:
        for migration in schema.migrations:
            parts.append(
                _guarded(schema.provider, migration.name, migration.checksum, migration.up)
            )
        if schema.definitions:
            parts.append(schema.definitions.strip())
            parts.append(_recorded(schema.provider, DEFINITIONS, schema.definitions_checksum))
        parts.append(
            f"DELETE FROM resolver_evidence_tables WHERE provider = {_q(schema.provider)};"
        )
        parts.extend(
            "INSERT INTO resolver_evidence_tables (table_name, dispatch_column, provider) VALUES"
            f" ({_q(r.table)}, {_q(r.dispatch_column)}, {_q(schema.provider)});"
            for r in schema.schema.retained
        )
    return "\n\n".join(parts)


def _q(value: str) -> str:
    if "'" in value or "\\" in value:
        raise ValueError(f"{value!r} cannot be quoted plainly")
    return f"'{value}'"


def _recorded(provider: str, name: str, checksum: str) -> str:
    return (
        "INSERT INTO resolver_provider_migrations (provider, name, checksum) VALUES"
        f" ({_q(provider)}, {_q(name)}, {_q(checksum)})"
        " ON CONFLICT (provider, name) DO UPDATE SET checksum = EXCLUDED.checksum;"
    )


def _guarded(provider: str, name: str, checksum: str, up: str) -> str:
    tag = "$resolver_provider_migration$"
    if tag in up:
        raise ValueError(f"provider {provider}'s migration {name} contains {tag}")
    return (
        "DO $guard$ BEGIN\n"
        "    IF NOT EXISTS (SELECT FROM resolver_provider_migrations"
        f" WHERE provider = {_q(provider)} AND name = {_q(name)}) THEN\n"
        f"        EXECUTE {tag}{up}{tag};\n"
        "    END IF;\n"
        "END $guard$;\n"
        "INSERT INTO resolver_provider_migrations (provider, name, checksum) VALUES"
        f" ({_q(provider)}, {_q(name)}, {_q(checksum)}) ON CONFLICT (provider, name) DO NOTHING;"
    )
