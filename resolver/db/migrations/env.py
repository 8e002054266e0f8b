"""Alembic environment: runs migrations on the connection `resolver.db.migrate` hands over.

Alembic only orders and applies the numbered SQL files here: the schema is defined by
resolver/db/schema/, so there is no SQLAlchemy model to compare against (`target_metadata`
is None, and autogenerate has nothing to generate from). resolver.db.migrate applies the
functions and triggers around these migrations.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

config = context.config


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=None,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        # resolver.db.migrate.upgrade_sql wraps the whole script, definitions included, in
        # one transaction of its own.
        transactional_ddl=False,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=None)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = engine_from_config(
        config.get_section(config.config_ini_section, {}),
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=None)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
