"""A database's schema as comparable text: the catalog-diff test's two sides.

Each object of the current schema (the migrate step's bookkeeping tables aside) becomes one entry,
`kind name` -> the definition PostgreSQL itself prints (`pg_get_functiondef`,
`pg_get_triggerdef`, `pg_get_indexdef`, `pg_get_constraintdef`, column types and defaults as
`format_type` / `pg_get_expr` render them, ACLs as `aclitem` text). Two databases with the
same entries have the same tables, columns, constraints, indexes, functions (bodies
included), triggers, privileges and comments.
"""

from __future__ import annotations

import difflib

import psycopg

Catalog = dict[str, str]

# A function's privileges compare by what they grant: no ACL at all is the default one
# (EXECUTE for PUBLIC and the owner), and pg_dump leaves out an ACL equal to the default, so a
# database restored from a dump has none where `GRANT ... TO PUBLIC` had spelt it out.
# Every query returns (key, definition) for objects of current_schema(). Column position is
# the rank among live columns, so `SELECT *` and row types compare too.
_QUERIES: tuple[str, ...] = (
    """
    SELECT 'relation ' || c.relname,
           c.relkind::text || ' acl=' || coalesce(c.relacl::text, '-')
           || ' options=' || coalesce(array_to_string(c.reloptions, ','), '-')
           || ' comment=' || coalesce(obj_description(c.oid, 'pg_class'), '-')
    FROM pg_class AS c
    WHERE c.relnamespace = current_schema()::regnamespace
      AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
      AND c.relname NOT IN ('alembic_version', 'resolver_definitions')
    """,
    """
    SELECT 'column ' || c.relname || '.' || a.attname,
           'position=' || rank() OVER (PARTITION BY c.oid ORDER BY a.attnum)
           || ' type=' || format_type(a.atttypid, a.atttypmod)
           || ' not_null=' || a.attnotnull
           || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
           || ' identity=' || coalesce(nullif(a.attidentity::text, ''), '-')
           || ' generated=' || coalesce(nullif(a.attgenerated::text, ''), '-')
           || ' acl=' || coalesce(a.attacl::text, '-')
           || ' comment=' || coalesce(col_description(c.oid, a.attnum), '-')
    FROM pg_attribute AS a
    JOIN pg_class AS c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relnamespace = current_schema()::regnamespace
      AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
      AND c.relname NOT IN ('alembic_version', 'resolver_definitions')
      AND a.attnum > 0 AND NOT a.attisdropped
    """,
    """
    SELECT 'constraint ' || coalesce(c.relname, t.typname) || '.' || k.conname,
           pg_get_constraintdef(k.oid)
           || ' deferrable=' || k.condeferrable || ' deferred=' || k.condeferred
           || ' comment=' || coalesce(obj_description(k.oid, 'pg_constraint'), '-')
    FROM pg_constraint AS k
    LEFT JOIN pg_class AS c ON c.oid = k.conrelid
    LEFT JOIN pg_type AS t ON t.oid = k.contypid
    WHERE k.connamespace = current_schema()::regnamespace
      AND coalesce(c.relname, '') NOT IN ('alembic_version', 'resolver_definitions')
    """,
    """
    SELECT 'index ' || i.relname,
           pg_get_indexdef(i.oid)
           || ' comment=' || coalesce(obj_description(i.oid, 'pg_class'), '-')
    FROM pg_index AS x
    JOIN pg_class AS i ON i.oid = x.indexrelid
    JOIN pg_class AS c ON c.oid = x.indrelid
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relname NOT IN ('alembic_version', 'resolver_definitions')
    """,
    """
    SELECT 'function ' || p.oid::regprocedure::text,
           pg_get_functiondef(p.oid)
           || E'\n-- acl=' || coalesce(p.proacl, acldefault('f', p.proowner))::text
           || ' comment=' || coalesce(obj_description(p.oid, 'pg_proc'), '-')
    FROM pg_proc AS p
    WHERE p.pronamespace = current_schema()::regnamespace
    """,
    """
    SELECT 'trigger ' || c.relname || '.' || t.tgname,
           pg_get_triggerdef(t.oid)
           || ' enabled=' || t.tgenabled::text
           || ' comment=' || coalesce(obj_description(t.oid, 'pg_trigger'), '-')
    FROM pg_trigger AS t
    JOIN pg_class AS c ON c.oid = t.tgrelid
    WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
    """,
    """
    SELECT 'type ' || t.typname,
           t.typtype::text || ' base=' || format_type(t.typbasetype, t.typtypmod)
           || ' not_null=' || t.typnotnull
           || ' default=' || coalesce(t.typdefault, '-')
           || ' acl=' || coalesce(t.typacl::text, '-')
           || ' comment=' || coalesce(obj_description(t.oid, 'pg_type'), '-')
    FROM pg_type AS t
    WHERE t.typnamespace = current_schema()::regnamespace AND t.typtype IN ('d', 'e')
    """,
    """
    SELECT 'sequence ' || s.sequencename,
           s.data_type::text || ' start=' || s.start_value || ' min=' || s.min_value
           || ' max=' || s.max_value || ' increment=' || s.increment_by
           || ' cycle=' || s.cycle || ' cache=' || s.cache_size
    FROM pg_sequences AS s
    WHERE s.schemaname = current_schema()
    """,
)


def catalog(database_url: str) -> Catalog:
    """Every object of the database's current schema, keyed `kind name`."""
    entries: Catalog = {}
    with psycopg.connect(database_url) as conn:
        for query in _QUERIES:
            for key, definition in conn.execute(query).fetchall():
                entries[str(key)] = str(definition)
    return entries


def catalog_diff(expected: Catalog, actual: Catalog, labels: tuple[str, str]) -> str:
    """A unified diff of the two catalogs, empty when they are the same."""
    return "".join(
        difflib.unified_diff(
            _lines(expected), _lines(actual), fromfile=labels[0], tofile=labels[1], n=2
        )
    )


def _lines(entries: Catalog) -> list[str]:
    return [f"{key}: {line}\n" for key in sorted(entries) for line in entries[key].splitlines()]
