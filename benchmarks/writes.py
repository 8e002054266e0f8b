"""`python -m benchmarks.writes`: what one resolution writes and where the page commit's time goes.

On a private cluster (or `--database-url`), `-K` due controls are resolved twice: by the
resolver's own store (`claim_due_page`, then `commit_outcomes` with verified findings, i.e.
`resolver_commit_automatic`), and by the bare loop (the claim and the page commit with no
Python between them). For each it reports
per resolution, from the server's own counters: heap tuples inserted and updated (HOT or
not) and the indexes of each table (a non-HOT update or an insert adds an entry to each
index whose predicate the row meets), WAL bytes, trigger function calls (`track_functions`),
and each statement's server time and WAL (`pg_stat_statements`). With `--explain`, one page
commit of the resolver runs under auto_explain (ANALYZE, BUFFERS, triggers, nested
statements) and its plans are printed: where the commit function's time goes.

One process, no concurrency: it measures cost, not throughput (that is benchmarks.run).
"""

from __future__ import annotations

import argparse
import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from psycopg.rows import dict_row

from benchmarks import bare, seed, sql
from benchmarks.server import Databases, open_server
from resolver.core.domain import Finding, FindingKind, ItemOutcome
from resolver.db.statements import claim_statement, statement
from resolver.db.store import PostgresHandle, PostgresRecoveryStore
from resolver.db.store.rows import page_items

LEASE_MS = 60_000
HOT_TABLES = (
    "approved_action_dispatches",
    "approved_action_executions",
    "approved_action_recovery_controls",
    "approved_action_recovery_resolutions",
)

TABLE_COUNTERS: LiteralString = """
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
FROM pg_stat_user_tables WHERE relname = ANY(%(tables)s)
"""
INDEXES: LiteralString = """
SELECT t.relname AS table_name, i.relname AS index_name, x.indpred IS NOT NULL AS partial,
       pg_get_indexdef(x.indexrelid) AS definition
FROM pg_index AS x
JOIN pg_class AS i ON i.oid = x.indexrelid
JOIN pg_class AS t ON t.oid = x.indrelid
WHERE t.relname = ANY(%(tables)s)
ORDER BY 1, 2
"""
FUNCTION_CALLS: LiteralString = """
SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions ORDER BY funcname
"""
WAL_LSN: LiteralString = "SELECT pg_current_wal_insert_lsn()::text AS lsn"
STATEMENTS: LiteralString = """
SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS query, calls,
       total_exec_time AS exec_ms, wal_records, wal_bytes, shared_blks_hit, shared_blks_dirtied
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%%pg_stat%%' AND query NOT LIKE '%%pg_current_wal%%'
ORDER BY total_exec_time DESC LIMIT 6
"""


@dataclass(frozen=True, slots=True)
class Snapshot:
    tables: dict[str, dict[str, int]]
    functions: dict[str, tuple[int, float]]
    lsn: str


@contextlib.contextmanager
def _connect(url: str) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def snapshot(conn: psycopg.Connection[dict[str, Any]]) -> Snapshot:
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    tables = {
        r["relname"]: {k: int(v) for k, v in r.items() if k != "relname"}
        for r in conn.execute(TABLE_COUNTERS, {"tables": list(HOT_TABLES)})
    }
    functions = {
        r["funcname"]: (int(r["calls"]), float(r["self_time"]))
        for r in conn.execute(FUNCTION_CALLS)
    }
    row = conn.execute(WAL_LSN).fetchone()
    assert row is not None
    return Snapshot(tables, functions, str(row["lsn"]))


def seed_due(url: str, count: int) -> None:
    with _connect(url) as conn:
        seed.reset(conn)
        due_ms = seed.db_now_ms(conn) - 1_000
        seed.seed_due(conn, count, action_type="bench.writes", prefix="w-", due_ms=due_ms)
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


def resolve_with_store(url: str, page_size: int) -> int:
    """Every due control through the resolver's own claim and page commit."""
    resolved = 0
    verified = Finding(FindingKind.VERIFIED_SUCCEEDED, "ab" * 32, "ok")
    with PostgresRecoveryStore(PostgresHandle(url, max_connections=1)) as store:
        while items := store.claim_due_page("writes", page_size, LEASE_MS):
            page_id = uuid.uuid4().hex
            outcomes = [
                ItemOutcome(item, verified, 0, f"auto-{page_id}-{n}")
                for n, item in enumerate(items)
            ]
            resolved += len(store.commit_outcomes(outcomes).accepted)
    return resolved


def resolve_bare(url: str, page_size: int) -> int:
    """Every due control through the bare loop: the claim and the page commit, no Python."""
    resolved = 0
    claim = claim_statement(page_size)
    commit = statement("commit_automatic")
    with _connect(url) as conn:
        while rows := conn.execute(
            claim, {"owner": "bare", "lease_ms": LEASE_MS, "now_ms": None}
        ).fetchall():
            conn.execute(commit, {"items": bare.verified_items(rows), "now_ms": None})
            resolved += len(rows)
    return resolved


def report(name: str, url: str, resolved: int, before: Snapshot, after: Snapshot) -> None:
    n = max(1, resolved)
    print(f"\n== {name}: {resolved} resolutions; per resolution:")
    with _connect(url) as conn:
        row = conn.execute(
            "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint AS b", (after.lsn, before.lsn)
        ).fetchone()
        wal = int(row["b"]) if row else 0
        indexes = conn.execute(INDEXES, {"tables": list(HOT_TABLES)}).fetchall()
        statements = conn.execute(STATEMENTS).fetchall()
    print(f"  WAL bytes (cluster, LSN) {wal / n:,.0f}")
    for table in HOT_TABLES:
        b, a = before.tables.get(table, {}), after.tables.get(table, {})
        d = {k: a.get(k, 0) - b.get(k, 0) for k in ("n_tup_ins", "n_tup_upd", "n_tup_hot_upd")}
        idx = [i for i in indexes if i["table_name"] == table]
        print(
            f"  {table}: inserted {d['n_tup_ins'] / n:.2f}, updated {d['n_tup_upd'] / n:.2f}"
            f" (HOT {d['n_tup_hot_upd'] / n:.2f}); indexes {len(idx)}"
            f" ({sum(1 for i in idx if i['partial'])} partial)"
        )
    for func, (calls, self_ms) in sorted(after.functions.items()):
        before_calls, before_ms = before.functions.get(func, (0, 0.0))
        if calls > before_calls:
            print(
                f"  function {func}: {(calls - before_calls) / n:.3f} calls,"
                f" {(self_ms - before_ms) * 1000 / n:.1f} us self time"
            )
    for s in statements:
        print(
            f"  statement {s['exec_ms'] * 1000 / n:6.1f} us, WAL {s['wal_bytes'] / n:6.0f} B"
            f" in {s['wal_records'] / n:.2f} records, dirtied {s['shared_blks_dirtied'] / n:.2f}"
            f" blocks: {s['query']}"
        )


def explain_one_page(url: str, count: int, page_size: int) -> None:
    """One page commit under auto_explain (after a warm-up page, so the session's plans and
    the foreign key's are cached): every statement inside the function with its timing,
    buffers and triggers."""
    with _connect(url) as conn:
        seed_due(url, count)
        conn.add_notice_handler(lambda d: print(d.message_primary))
        for setting, value in (
            ("client_min_messages", "log"),
            ("auto_explain.log_min_duration", "-1"),
            ("auto_explain.log_analyze", "on"),
            ("auto_explain.log_buffers", "on"),
            ("auto_explain.log_triggers", "on"),
            ("auto_explain.log_nested_statements", "on"),
            ("auto_explain.log_timing", "on"),
        ):
            conn.execute("SELECT set_config(%s, %s, false)", (setting, value))
        conn.execute("LOAD 'auto_explain'")
        verified = Finding(FindingKind.VERIFIED_SUCCEEDED, "ab" * 32, "ok")
        with PostgresRecoveryStore(PostgresHandle(url, max_connections=1)) as store:
            for explained in (False, True):
                items = store.claim_due_page("explain", page_size, LEASE_MS)
                outcomes = [
                    ItemOutcome(i, verified, 0, f"auto-{explained}-{n}")
                    for n, i in enumerate(items)
                ]
                if explained:
                    print(f"\n== explain: resolver_commit_automatic, one page of {len(items)}")
                    conn.execute("SET auto_explain.log_min_duration = 0")
                conn.execute(
                    statement("commit_automatic"),
                    {"items": page_items(outcomes), "now_ms": None},
                ).fetchall()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.writes", description=__doc__)
    p.add_argument("--database-url")
    p.add_argument("-K", "--count", type=int, default=5_000)
    p.add_argument("--page-size", type=int, default=64)
    p.add_argument("--explain", action="store_true")
    args = p.parse_args(argv)
    with open_server(args.database_url, durable=True) as server:
        dbs = Databases(server)
        try:
            url = dbs.create("writes", migrated=True, extensions=("pg_stat_statements",))
            with _connect(url) as conn:
                conn.execute("ALTER SYSTEM SET track_functions = 'all'")
                conn.execute("SELECT pg_reload_conf()")
            for name, resolve in (("resolver", resolve_with_store), ("bare loop", resolve_bare)):
                seed_due(url, args.count)
                with _connect(url) as conn:
                    conn.execute(sql.STATEMENTS_RESET)
                    before = snapshot(conn)
                resolved = resolve(url, args.page_size)
                with _connect(url) as conn:
                    after = snapshot(conn)
                report(name, url, resolved, before, after)
            if args.explain:
                explain_one_page(url, args.count, args.page_size)
        finally:
            dbs.close()


if __name__ == "__main__":
    main()
