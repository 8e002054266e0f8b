"""`python -m benchmarks.executor_serial`: where one executor session's server time goes.

One connection runs the executor's happy path `-n` times per round, for each case in turn
(`sql` and `bare` by default: the documented SQL functions and the hand-written baseline
of the same five transactions, as `benchmarks.executor_path` writes them; `sql2` and
`bare2` for two transactions), each case in its own freshly migrated database (never
analyzed, autovacuum off on the protocol's tables: a new deployment), the cases alternating
round by round. Per action: the CPU of that connection's backend, from the scheduler's own
count (nanoseconds). One session alone on the server repeats within a few percent from round
to round, where the concurrent benchmark's rounds spread by 20 to 50 %: this is where a
change to a function or a trigger is weighed. The last round also gives each function's and
trigger's own time (`track_functions`) and each statement's, the ones functions run
included (`pg_stat_statements.track = all`), per action.

On its own private durable cluster (`--database-url` measures a given server instead,
without the statement figures unless pg_stat_statements is loaded there).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, LiteralString

import psycopg
from psycopg import sql as pgsql

from benchmarks.executor_loop import (
    ACCOUNTS_TABLE,
    PATH_CASES,
    LoopStats,
    Steps,
    Timer,
    actions,
)
from benchmarks.executor_path import PROTOCOL_TABLES
from benchmarks.procs import oncpu_us
from benchmarks.server import Databases, open_server

WARMUP_ACTIONS = 100
FUNCTIONS: LiteralString = """
SELECT /* bench-monitor */ funcname, calls, self_time, total_time FROM pg_stat_user_functions
WHERE calls > 0 ORDER BY self_time DESC LIMIT %(limit)s
"""
STATEMENTS: LiteralString = """
SELECT /* bench-monitor */ calls, total_exec_time + total_plan_time AS ms, toplevel,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 100) AS query
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%%bench-monitor%%'
ORDER BY total_exec_time + total_plan_time DESC LIMIT %(limit)s
"""
RESET: LiteralString = "SELECT /* bench-monitor */ pg_stat_reset()"
RESET_STATEMENTS: LiteralString = "SELECT /* bench-monitor */ pg_stat_statements_reset()"


@dataclass(frozen=True, slots=True)
class Options:
    database_url: str | None = None
    actions: int = 1_500
    rounds: int = 3
    cases: tuple[str, ...] = ("sql", "bare")
    top: int = 12


@dataclass(slots=True)
class CaseFigures:
    case: str
    backend_us: list[float] = field(default_factory=list)
    """The backend's CPU per action, one figure per round."""
    functions: list[tuple[str, float, float, float]] = field(default_factory=list)
    """Last round: name, calls, own and total µs, per action."""
    statements: list[tuple[float, float, bool, str]] = field(default_factory=list)
    """Last round: calls and µs per action, top level or not, the statement's start."""

    @property
    def median_us(self) -> float:
        return statistics.median(self.backend_us)


def prepare_database(dbs: Databases, case: str, with_statements: bool) -> str:
    """A freshly migrated database for one case: never analyzed, autovacuum off on the
    protocol's tables (a new deployment); the bare cases' triggers disabled."""
    extensions = ("pg_stat_statements",) if with_statements else ()
    url = dbs.create(f"serial_{case}", migrated=True, extensions=extensions)
    bare, _ = PATH_CASES[case]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(ACCOUNTS_TABLE)
        for table in PROTOCOL_TABLES:
            name = pgsql.Identifier(table)
            conn.execute(pgsql.SQL("ALTER TABLE {} SET (autovacuum_enabled = false)").format(name))
            if bare:
                conn.execute(pgsql.SQL("ALTER TABLE {} DISABLE TRIGGER USER").format(name))
    return url


def _round(url: str, case: str, round_: int, options: Options, figures: CaseFigures) -> None:
    bare, grouped = PATH_CASES[case]
    steps = Steps(url, bare=bare)
    try:
        steps.conn.execute("SET track_functions = 'all'")
        run = grouped(steps)
        time_it = Timer(LoopStats())
        for action in actions(f"w{round_}-", WARMUP_ACTIONS):
            run(action, time_it)
        last = round_ == options.rounds - 1
        if last:
            # The warm-up's function counts are still the session's own: out with them first
            # (reported when the session next goes idle), then every count starts from zero.
            steps.conn.execute("SELECT pg_stat_force_next_flush()")
            steps.conn.execute("SELECT 1")
            _reset(url)
        pid = steps.conn.info.backend_pid
        before = oncpu_us(pid)
        for action in actions(f"m{round_}-", options.actions):
            run(action, time_it)
        after = oncpu_us(pid)
        assert before is not None and after is not None, "the backend vanished"
        figures.backend_us.append((after - before) / options.actions)
    finally:
        # The backend reports its function counts as it exits.
        steps.conn.close()
    if last:
        _read_profile(url, options, figures)


def _reset(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as monitor:
        monitor.execute(RESET)
        # Without pg_stat_statements on a given server: function times only.
        with contextlib.suppress(psycopg.errors.UndefinedFunction):
            monitor.execute(RESET_STATEMENTS)


def _read_profile(url: str, options: Options, figures: CaseFigures) -> None:
    n = options.actions
    deadline = time.monotonic() + 10
    with psycopg.connect(url, autocommit=True) as monitor:
        # A backend's counts land shortly after it exits.
        rows: list[Any] = []
        while not rows and time.monotonic() < deadline:
            monitor.execute("SELECT pg_stat_clear_snapshot()")
            rows = monitor.execute(FUNCTIONS, {"limit": options.top}).fetchall()
            if not rows:
                time.sleep(0.2)
        figures.functions = [
            (name, calls / n, own * 1000 / n, total * 1000 / n) for name, calls, own, total in rows
        ]
        try:
            statements = monitor.execute(STATEMENTS, {"limit": options.top}).fetchall()
        except psycopg.errors.UndefinedTable:
            return
        figures.statements = [
            (calls / n, ms * 1000 / n, bool(top), query) for calls, ms, top, query in statements
        ]


def run(options: Options) -> dict[str, CaseFigures]:
    unknown = set(options.cases) - set(PATH_CASES)
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}; known: {sorted(PATH_CASES)}")
    loaded = {"pg_stat_statements.track": "all"}
    with open_server(options.database_url, durable=True, loaded_settings=loaded) as server:
        dbs = Databases(server)
        try:
            statements = server.has_pg_stat_statements
            urls = {case: prepare_database(dbs, case, statements) for case in options.cases}
            figures = {case: CaseFigures(case) for case in options.cases}
            for round_ in range(options.rounds):
                # Alternating: a slower minute of the machine falls on every case alike.
                order = options.cases if round_ % 2 == 0 else tuple(reversed(options.cases))
                for case in order:
                    _round(urls[case], case, round_, options, figures[case])
            return figures
        finally:
            dbs.close()


def markdown(figures: dict[str, CaseFigures]) -> str:
    lines = ["| case | backend CPU us/action (median) | rounds | x bare |", "|---|---|---|---|"]
    for case, f in figures.items():
        base = figures.get("bare2" if case.endswith("2") else "bare")
        ratio = f"{f.median_us / base.median_us:.2f}" if base is not None else ""
        rounds = ", ".join(f"{v:,.0f}" for v in f.backend_us)
        lines.append(f"| {case} | {f.median_us:,.0f} | {rounds} | {ratio} |")
    for case, f in figures.items():
        lines += ["", f"**{case}**, last round, per action:", ""]
        lines += ["| function or trigger | calls | own us | total us |", "|---|---|---|---|"]
        lines += [f"| {n} | {c:.1f} | {o:.1f} | {t:.1f} |" for n, c, o, t in f.functions]
        if f.statements:
            lines += ["", "| statement | calls | us | top level |", "|---|---|---|---|"]
            lines += [
                f"| `{q}` | {c:.1f} | {us:.1f} | {'yes' if top else 'no'} |"
                for c, us, top, q in f.statements
            ]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(prog="python -m benchmarks.executor_serial", description=__doc__)
    p.add_argument("--database-url", help="measure this server instead of a private cluster")
    p.add_argument("-n", "--actions", type=int, default=1_500, help="actions per case and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cases", default="sql,bare", help=f"of {', '.join(PATH_CASES)}")
    p.add_argument("--top", type=int, default=12, help="functions and statements listed")
    args = p.parse_args(argv)
    return Options(
        database_url=args.database_url,
        actions=args.actions,
        rounds=args.rounds,
        cases=tuple(x.strip() for x in args.cases.split(",") if x.strip()),
        top=args.top,
    )


def main(argv: list[str] | None = None) -> None:
    started = time.monotonic()
    print(markdown(run(parse(argv))))
    print(f"\n(total {time.monotonic() - started:.0f}s)")


if __name__ == "__main__":
    main()
