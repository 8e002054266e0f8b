"""`python -m benchmarks.executor_path`: what every approved action pays, crashed or not.

The executor's happy path (create the dispatch, lease, start, the executor's own mutation
with its receipt, complete) through the documented SQL functions, through each SDK exactly
as docs/executor-sdk.md shows it (Python and Node.js), as a bare baseline (the same five
durable transactions written by hand on tables of the same shape, without the protocol's
functions and triggers), and graphile-worker's job lifecycle as the peer (`add_job` one job
at a time, a worker beside): in one run, on one durable private cluster, at each connection
count, beside a settled history and on empty tables (a fresh deployment until autoanalyze).
The SQL path and the bare baseline also run in two transactions (`sql2`, `bare2`): the
dispatch, its lease and the start barrier commit together, then the mutation, its receipt
and the completion, the fewest the protocol allows (graphile-worker's job takes three).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, LiteralString, NamedTuple

import psycopg
from psycopg import sql as pgsql

from benchmarks import peer, seed
from benchmarks import sql as bench_sql
from benchmarks.executor_loop import ACCOUNTS_TABLE, CALLS, LoopStats, read_stats
from benchmarks.procs import REPO_ROOT, cpu_delta_us, kill_all, peak_rss_kb, terminate
from benchmarks.run import compile_sources
from benchmarks.server import Databases, Server, open_server

CASES = ("sql", "sql2", "python", "node", "bare", "bare2", "graphile")
# Each SQL path beside the bare baseline of the same transactions.
BARE_OF = {"sql": "bare", "sql2": "bare2"}
TABLES = ("empty", "history")
# The tables the five transactions write; the bare baseline's copies run without the
# protocol's triggers, and a database standing for a fresh deployment is never analyzed.
PROTOCOL_TABLES = (
    "approved_action_dispatches",
    "approved_action_executions",
    "approved_action_recovery_controls",
    "action_receipts",
    "recovery_outcomes",
)
NODE_SDK = REPO_ROOT / "sdk" / "node"
NODE_SDK_FILES = ("package.json", "index.js", "index.d.ts")
LOOP_TIMEOUT_SECONDS = 600.0

HISTORY_RECEIPTS: LiteralString = """
INSERT INTO action_receipts (dispatch_id, receipt, written_at_ms)
SELECT e.dispatch_id,
       jsonb_build_object('v', 1, 'dispatch_id', e.dispatch_id, 'outcome', 'succeeded',
                          'result_code', 'ok', 'finished_at_ms', e.finished_at_ms,
                          'sig', encode(sha256(convert_to(e.dispatch_id, 'UTF8')), 'hex')),
       e.finished_at_ms
FROM approved_action_executions AS e
WHERE e.state = 'succeeded'
"""
JOBS_LEFT: LiteralString = (
    "SELECT /* bench-monitor */ count(*) AS n FROM graphile_worker._private_jobs"
)
WAL_LSN: LiteralString = "SELECT /* bench-monitor */ pg_current_wal_insert_lsn()::text"


class Echo:
    def __call__(self, text: str, /, *, end: str = "\n") -> None:
        print(text, end=end, flush=True)


@dataclass(frozen=True, slots=True)
class Options:
    database_url: str | None = None
    durable: bool = True
    actions: int = 2_000
    connections: tuple[int, ...] = (4, 16)
    history: int = 50_000
    cases: tuple[str, ...] = CASES
    tables: tuple[str, ...] = TABLES
    rounds: int = 3
    work_dir: Path | None = None


@dataclass(slots=True)
class CaseResult:
    case: str
    tables: str
    connections: int
    actions: int
    seconds: float
    """From the first action any loop began to the last one any loop (or worker) ended."""
    server_cpu_us: float | None
    client_cpu_us: float | None
    wal_bytes: float | None
    statements: float | None
    latency_ms: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per call: (p50, p99) in milliseconds, over every action of every loop."""
    peak_rss_mb: float = 0.0
    top_statements: list[dict[str, Any]] = field(default_factory=list)
    """The statements with the most server time: calls and server us per action."""

    @property
    def per_second(self) -> float:
        return self.actions / self.seconds if self.seconds > 0 else 0.0


@dataclass(slots=True)
class Report:
    machine: dict[str, Any]
    options: dict[str, Any]
    results: list[CaseResult] = field(default_factory=list)
    """Per case, tables and connection count: the median of its rounds."""
    rounds: list[list[CaseResult]] = field(default_factory=list)
    """Every round's own figures, in the order they ran."""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def get(self, case: str, tables: str, connections: int) -> CaseResult | None:
        for r in self.results:
            if (r.case, r.connections) == (case, connections) and (
                r.tables == tables or case == "graphile"
            ):
                return r
        return None


@dataclass(slots=True)
class Setup:
    """Where each case runs: database URLs by role, the Node install, the server."""

    server: Server
    dbs: Databases
    templates: dict[str, str] = field(default_factory=dict)
    history: dict[str, str] = field(default_factory=dict)
    graphile: str | None = None
    node_dir: Path | None = None


# -- set-up ----------------------------------------------------------------------------------


def _prepare_templates(setup: Setup, extensions: tuple[str, ...]) -> None:
    """`resolver`: the migrated schema and the platform's accounts; `bare`: the same with the
    protocol's triggers disabled on the tables the five transactions write."""
    for role in ("resolver", "bare"):
        url = setup.dbs.create(f"tmpl_{role}", migrated=True, extensions=extensions)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(ACCOUNTS_TABLE)
            if role == "bare":
                for table in PROTOCOL_TABLES:
                    conn.execute(
                        pgsql.SQL("ALTER TABLE {} DISABLE TRIGGER USER").format(
                            pgsql.Identifier(table)
                        )
                    )
        setup.templates[role] = url


def _copy(setup: Setup, role: str, name: str) -> str:
    """A new database from a template (the template must have no connection)."""
    source = setup.templates[role].rsplit("/", 1)[-1]
    target = f"{source.removesuffix('_tmpl_' + role)}_{name}"
    with psycopg.connect(setup.server.url, autocommit=True) as conn:
        conn.execute(
            pgsql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                pgsql.Identifier(target), pgsql.Identifier(source)
            )
        )
    setup.dbs.adopt(target)
    return setup.server.database(target)


def _fresh(setup: Setup, role: str, name: str) -> str:
    """A fresh deployment until autoanalyze: the template's copy, autovacuum off on the
    protocol's tables for the run, so no statistics land mid-run."""
    url = _copy(setup, role, name)
    with psycopg.connect(url, autocommit=True) as conn:
        for table in PROTOCOL_TABLES:
            conn.execute(
                pgsql.SQL("ALTER TABLE {} SET (autovacuum_enabled = false)").format(
                    pgsql.Identifier(table)
                )
            )
    return url


def _with_history(setup: Setup, role: str, count: int) -> str:
    """The template's copy beside `count` settled actions, vacuumed and analyzed."""
    url = _copy(setup, role, f"history_{role}")
    with psycopg.connect(url, autocommit=True) as conn:
        now_ms = seed.db_now_ms(conn)
        seed.seed_closed(conn, count, first=1, prefix="h-", now_ms=now_ms)
        with conn.transaction():
            conn.execute(bench_sql.IMPORT_HISTORY)
            conn.execute(HISTORY_RECEIPTS)
        # No CHECKPOINT: the first case after one would pay every page's full image in the
        # WAL, which the cases after it would not.
        conn.execute("VACUUM ANALYZE")
    return url


def _node_setup(setup: Setup, report: Report, echo: Echo) -> None:
    reason = peer.unavailable_reason()
    if reason is not None:
        report.notes.append(reason.replace("graphile-worker peer", "graphile-worker and Node SDK"))
        return
    echo("node: installing graphile-worker and pg (npm ci, cached)")
    install = peer.install()
    # The SDK as a user installs it, beside the pinned pg: `import ... from
    # "approved-action-executor"` resolves here, and the SDK's `pg` to the one beside it.
    target = install / "node_modules" / "approved-action-executor"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in NODE_SDK_FILES:
        shutil.copy2(NODE_SDK / name, target / name)
    setup.node_dir = install


# -- one case --------------------------------------------------------------------------------


@dataclass
class Loops:
    """The measured processes of one case, started together (ready/go/done)."""

    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    stats_paths: list[Path] = field(default_factory=list)
    workers: list[subprocess.Popen[str]] = field(default_factory=list)

    def all(self) -> list[subprocess.Popen[str]]:
        return [*self.procs, *self.workers]

    def expect(self, procs: list[subprocess.Popen[str]], word: str, logs: list[Path]) -> None:
        for index, proc in enumerate(procs):
            line = _readline(proc.stdout)
            if line != word:
                kill_all(self.all())
                tail = logs[index].read_text(encoding="utf-8", errors="replace")[-2000:]
                raise RuntimeError(f"process {index} said {line!r}, not {word!r}:\n{tail}")


def _readline(stream: IO[str] | None) -> str:
    assert stream is not None
    while True:
        line = stream.readline()
        if not line:
            return ""
        text = line.strip()
        if text != "first":  # graphile's worker says when it ran its first job
            return text


def _spawn(argv: list[str], *, cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    with log.open("w", encoding="utf-8") as err:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )


def run_case(
    setup: Setup,
    case: str,
    tables: str,
    connections: int,
    url: str,
    *,
    actions: int,
    work_dir: Path,
) -> CaseResult:
    """`actions` actions over `connections` loops, measured from outside."""
    name = f"{case}-{tables}-c{connections}"
    tag = uuid.uuid4().hex[:6]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DATABASE_URL": url}
    env["RECEIPT_KEY"] = _receipt_key()
    loops = Loops()
    logs: list[Path] = []
    if case == "graphile":
        assert setup.node_dir is not None
        log = work_dir / f"{name}-worker.log"
        loops.workers.append(
            _spawn(
                ["node", "peer.js", "serve", str(connections)],
                cwd=setup.node_dir,
                env=env,
                log=log,
            )
        )
        loops.expect(loops.workers, "ready", [log])
    counts = [
        actions // connections + (1 if i < actions % connections else 0) for i in range(connections)
    ]
    for index, count in enumerate(counts):
        prefix = f"x{tag}{index:02d}-"
        stats = work_dir / f"{name}-{index}.json"
        stats.unlink(missing_ok=True)
        log = work_dir / f"{name}-{index}.log"
        if case == "node":
            assert setup.node_dir is not None
            argv = ["node", "executor.mjs", prefix, str(count), str(stats)]
            cwd = setup.node_dir
        else:
            argv = [
                sys.executable,
                "-m",
                "benchmarks.executor_loop",
                case,
                url,
                prefix,
                str(count),
                str(stats),
            ]
            cwd = REPO_ROOT
        loops.procs.append(_spawn(argv, cwd=cwd, env=env, log=log))
        loops.stats_paths.append(stats)
        logs.append(log)
    try:
        loops.expect(loops.procs, "ready", logs)
        return _measure(setup, loops, logs, case, tables, connections, url)
    finally:
        terminate(loops.all(), 10.0)
        kill_all(loops.all())


def _receipt_key() -> str:
    kid = seed.BENCH_KEYS.current_kid
    return f"{kid}={seed.BENCH_KEYS.keys[kid].hex()}"


def _measure(
    setup: Setup,
    loops: Loops,
    logs: list[Path],
    case: str,
    tables: str,
    connections: int,
    url: str,
) -> CaseResult:
    private = setup.server.private
    statements = setup.server.has_pg_stat_statements
    with psycopg.connect(url, autocommit=True) as monitor:
        if statements:
            monitor.execute(bench_sql.STATEMENTS_RESET)
        clients = [p.pid for p in loops.all()]
        before = peer.cpu_sample(monitor, clients, private)
        lsn = _one(monitor, WAL_LSN)
        for proc in loops.procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        loops.expect(loops.procs, "done", logs)
        if case == "graphile":
            _wait_jobs_done(monitor)
        after = peer.cpu_sample(monitor, clients, private)
        wal = monitor.execute(bench_sql.WAL_BYTES_SINCE, {"lsn": lsn}).fetchone()
        calls = monitor.execute(bench_sql.STATEMENT_CALLS).fetchone() if statements else None
        profile = monitor.execute(bench_sql.STATEMENT_PROFILE).fetchall() if statements else []
    rss = max((peak_rss_kb(p.pid) for p in loops.all()), default=0)
    terminate(loops.procs, 30.0)
    stats = [read_stats(path) for path in loops.stats_paths]
    worker_last = _stop_workers(loops.workers)
    done = sum(s.actions for s in stats)
    first = min(s.started_at for s in stats)
    last = max([s.finished_at for s in stats] + worker_last)
    return CaseResult(
        case=case,
        tables=tables,
        connections=connections,
        actions=done,
        seconds=max(last - first, 1e-3),
        server_cpu_us=_per(cpu_delta_us(before[1], after[1]), done) if private else None,
        client_cpu_us=_per(cpu_delta_us(before[0], after[0]), done),
        wal_bytes=_per(int(wal[0]), done) if wal else None,
        statements=_per(int(calls[0]), done) if calls else None,
        latency_ms=_percentiles(stats),
        peak_rss_mb=rss / 1024,
        top_statements=[
            {
                "query": query,
                "calls_per_action": n / done,
                "server_us_per_action": (exec_ms + plan_ms) * 1000 / done,
            }
            for query, n, exec_ms, plan_ms, _plans in profile
        ]
        if done
        else [],
    )


def _one(conn: psycopg.Connection[Any], query: LiteralString) -> Any:
    row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def _wait_jobs_done(monitor: psycopg.Connection[Any]) -> None:
    deadline = time.monotonic() + LOOP_TIMEOUT_SECONDS
    while _one(monitor, JOBS_LEFT) > 0:
        if time.monotonic() > deadline:
            raise RuntimeError("graphile-worker left jobs queued")
        time.sleep(0.02)


def _stop_workers(workers: list[subprocess.Popen[str]]) -> list[float]:
    """SIGTERM graphile's workers; when each ran its last job (wall clock, s)."""
    last: list[float] = []
    terminate(workers, 30.0)
    for proc in workers:
        assert proc.stdout is not None
        for line in proc.stdout.read().splitlines():
            if line.startswith("{"):
                doc = json.loads(line)
                if doc.get("last_ms"):
                    last.append(doc["last_ms"] / 1000)
    return last


def _per(total: int, actions: int) -> float | None:
    return total / actions if actions > 0 else None


def _percentiles(stats: list[LoopStats]) -> dict[str, tuple[float, float]]:
    merged: dict[str, list[float]] = {}
    for s in stats:
        for name, values in s.latency_ms.items():
            merged.setdefault(name, []).extend(values)
    return {name: (_quantile(v, 0.50), _quantile(v, 0.99)) for name, v in merged.items() if v}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- the run ---------------------------------------------------------------------------------


def run(options: Options, *, echo: Echo | None = None) -> Report:
    say = echo or Echo()
    started = time.monotonic()
    compile_sources()
    work_dir = options.work_dir or Path(tempfile.mkdtemp(prefix="resolver-bench-executor-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    with open_server(options.database_url, durable=options.durable) as server:
        report = Report(machine=_machine(server), options=_jsonable(asdict(options)))
        say(f"server: PostgreSQL {server.version} ({'private' if server.private else 'given'})")
        setup = Setup(server, Databases(server))
        try:
            _run(options, setup, work_dir, report, say)
        finally:
            setup.dbs.close()
    report.seconds = time.monotonic() - started
    return report


def _run(options: Options, setup: Setup, work_dir: Path, report: Report, echo: Echo) -> None:
    extensions = ("pg_stat_statements",) if setup.server.has_pg_stat_statements else ()
    if not extensions:
        report.notes.append("pg_stat_statements is not loaded: statements per action n/a")
    if not setup.server.private:
        report.notes.append("a given server: PostgreSQL CPU is not read (a private cluster only)")
    _prepare_templates(setup, extensions)
    wanted = set(options.cases)
    if wanted & {"node", "graphile"}:
        _node_setup(setup, report, echo)
    if setup.node_dir is None:
        wanted -= {"node", "graphile"}
    if "graphile" in wanted:
        assert setup.node_dir is not None
        url = setup.dbs.create("graphile", migrated=False, extensions=extensions)
        peer.migrate(setup.node_dir, url)
        setup.graphile = url
    for tables in options.tables:
        if tables == "history":
            echo(f"history: {options.history:,} settled actions beside each case's tables")
            for role in ("resolver", "bare"):
                setup.history[role] = _with_history(setup, role, options.history)
        for connections in options.connections:
            cases = [c for c in CASES if c in wanted]
            if "graphile" in cases and tables != "history" and "history" in options.tables:
                cases.remove("graphile")  # it keeps no history: measured once per count
            measured: list[CaseResult] = []
            for round_ in range(options.rounds):
                # Each round in another order: what one case leaves behind (dirty pages, the
                # checkpointer's and autovacuum's work) falls on a different case each time.
                shift = round_ % len(cases)
                for case in cases[shift:] + cases[:shift]:
                    url = _case_url(setup, case, tables, connections, round_)
                    echo(f"round {round_ + 1}, {case} on {tables} tables, {connections} "
                         "connections: ", end="")  # fmt: skip
                    result = run_case(
                        setup,
                        case,
                        tables,
                        connections,
                        url,
                        actions=options.actions,
                        work_dir=work_dir,
                    )
                    measured.append(result)
                    echo(describe(result))
            report.rounds.append(measured)
            for case in cases:
                report.results.append(median_of([r for r in measured if r.case == case]))


def median_of(results: list[CaseResult]) -> CaseResult:
    """One case's rounds as one: the median of each figure (of each call's p50 and p99), the
    statement profile of the round with the median PostgreSQL CPU."""
    first = results[0]
    by_cpu = sorted(results, key=lambda r: r.server_cpu_us or 0.0)
    calls = first.latency_ms.keys()
    return CaseResult(
        case=first.case,
        tables=first.tables,
        connections=first.connections,
        actions=first.actions,
        seconds=statistics.median(r.seconds for r in results),
        server_cpu_us=_median([r.server_cpu_us for r in results]),
        client_cpu_us=_median([r.client_cpu_us for r in results]),
        wal_bytes=_median([r.wal_bytes for r in results]),
        statements=_median([r.statements for r in results]),
        latency_ms={
            call: (
                statistics.median(r.latency_ms[call][0] for r in results),
                statistics.median(r.latency_ms[call][1] for r in results),
            )
            for call in calls
        },
        peak_rss_mb=max(r.peak_rss_mb for r in results),
        top_statements=by_cpu[len(by_cpu) // 2].top_statements,
    )


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _case_url(setup: Setup, case: str, tables: str, connections: int, round_: int) -> str:
    if case == "graphile":
        assert setup.graphile is not None
        return setup.graphile
    role = "bare" if case in BARE_OF.values() else "resolver"
    if tables == "history":
        return setup.history[role]
    return _fresh(setup, role, f"empty_{case}_c{connections}_r{round_}")


def _machine(server: Server) -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "postgresql": server.version,
        "python": platform.python_version(),
        "private_cluster": server.private,
        "node": shutil.which("node") is not None,
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


# -- output ----------------------------------------------------------------------------------


def _num(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def describe(r: CaseResult) -> str:
    calls = "; ".join(f"{k} {p50:.2f}/{p99:.2f}" for k, (p50, p99) in r.latency_ms.items())
    lines = [
        f"{r.per_second:,.0f} actions/s ({r.actions} in {r.seconds:.2f}s), postgres "
        f"{_num(r.server_cpu_us)} us, client {_num(r.client_cpu_us)} us, WAL "
        f"{_num(r.wal_bytes)} B, statements {_num(r.statements, '{:.1f}')} per action; "
        f"ms p50/p99: {calls}"
    ]
    lines += [
        f"    server us/action {s['server_us_per_action']:7.1f}, calls/action "
        f"{s['calls_per_action']:.2f}: {s['query']}"
        for s in r.top_statements
    ]
    return "\n".join(lines)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _x(value: float | None, base: float | None) -> str:
    return _num(_ratio(value, base), "{:.2f}")


def markdown(report: Report) -> str:
    lines: list[str] = []
    for tables in report.options["tables"]:
        for connections in report.options["connections"]:
            gw = report.get("graphile", tables, connections)
            lines += [
                "",
                f"**{tables} tables, {connections} connections**",
                "",
                "| case | actions/s | x bare | x graphile | PostgreSQL CPU us/action | x bare "
                "| x graphile | client CPU us/action | WAL bytes/action | statements/action "
                "| p50 / p99 ms per call |",
                "|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for case in CASES:
                r = report.get(case, tables, connections)
                if r is None:
                    continue
                bare = report.get(BARE_OF.get(case, "bare"), tables, connections)
                calls = ", ".join(
                    f"{k} {p50:.2f} / {p99:.2f}" for k, (p50, p99) in r.latency_ms.items()
                )
                rate, cpu = r.per_second, r.server_cpu_us
                cells = [
                    case,
                    f"{rate:,.0f}",
                    _x(rate, bare.per_second if bare else None),
                    _x(rate, gw.per_second if gw else None),
                    _num(cpu),
                    _x(cpu, bare.server_cpu_us if bare else None),
                    _x(cpu, gw.server_cpu_us if gw else None),
                    _num(r.client_cpu_us),
                    _num(r.wal_bytes),
                    _num(r.statements, "{:.1f}"),
                    calls,
                ]
                lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "`x bare`: against `bare2` for `sql2`, against `bare` for every other case."]
    lines += [
        "",
        "| target | measured (medians) | each round | met (in how many rounds) |",
        "|---|---|---|---|",
    ]
    for v in verdicts(report):
        t = v.target
        each = ", ".join(_num(r.value, "{:.2f}") for r in v.rounds)
        met = "not measured" if t.met is None else ("yes" if t.met else "**no**")
        if t.met is not None:
            met += f" ({v.met_in_rounds} of {len(v.rounds)})"
        lines.append(f"| {t.name} | {_num(t.value, '{:.2f}')} | {each} | {met} |")
    lines += [f"- {note}" for note in report.notes]
    return "\n".join(lines)


class Target(NamedTuple):
    """One bound of the executor path's targets, and the figure it is read against."""

    name: str
    value: float | None
    bound: float
    at_most: bool

    @property
    def met(self) -> bool | None:
        if self.value is None:
            return None
        return self.value <= self.bound if self.at_most else self.value >= self.bound


@dataclass(frozen=True, slots=True)
class Verdict:
    """A target read from the medians, and again within each round."""

    target: Target
    rounds: tuple[Target, ...]

    @property
    def met_in_rounds(self) -> int:
        return sum(1 for r in self.rounds if r.met)


def targets(report: Report) -> list[Target]:
    """The executor path's targets, each a ratio within this one run (with history unless
    it says otherwise), for the five-transaction path and the two-transaction one."""
    out: list[Target] = []
    for c in report.options["connections"]:
        gw = report.get("graphile", "history", c)
        for path, bare_case in BARE_OF.items():
            out += _path_targets(report, c, path, report.get(bare_case, "history", c), gw)
        cpu = _cpu(report.get("sql", "history", c))
        for sdk in ("python", "node"):
            out.append(
                Target(
                    f"{c} connections: {sdk} SDK PostgreSQL CPU <= 1.2x the SQL path's",
                    _ratio(_cpu(report.get(sdk, "history", c)), cpu),
                    1.2,
                    at_most=True,
                )
            )
    for path, call in (("sql", "start"), ("sql2", "create+lease+start")):
        r = report.get(path, "history", 4)
        p99 = r.latency_ms.get(call, (0.0, 0.0))[1] if r else None
        out.append(
            Target(f"4 connections: {path} start barrier p99 <= 3 ms (ms)", p99, 3.0, at_most=True)
        )
    return out


def each_round(report: Report) -> list[Report]:
    """Each round as a report of its own: the k-th run of every case at each table kind and
    connection count. A round's cases ran one after another under the same load, so a ratio
    read within a round pairs each case with its baseline as they ran; how the rounds spread
    says whether a verdict near its bound would hold in another run."""
    by_round: list[list[CaseResult]] = [[] for _ in range(report.options["rounds"])]
    for measured in report.rounds:
        seen: dict[str, int] = {}
        for result in measured:
            k = seen.get(result.case, 0)
            seen[result.case] = k + 1
            by_round[k].append(result)
    return [Report(report.machine, report.options, results=rs) for rs in by_round]


def verdicts(report: Report) -> list[Verdict]:
    """Every target, from the medians and from each round (the same targets, in order)."""
    per_round = [targets(r) for r in each_round(report)]
    return [
        Verdict(target, tuple(round_[i] for round_ in per_round))
        for i, target in enumerate(targets(report))
    ]


def _cpu(r: CaseResult | None) -> float | None:
    return r.server_cpu_us if r else None


def _path_targets(
    report: Report, c: int, path: str, bare: CaseResult | None, gw: CaseResult | None
) -> list[Target]:
    """One SQL path's targets at `c` connections, against its own bare baseline."""
    r = report.get(path, "history", c)
    cpu = _cpu(r)
    return [
        Target(
            f"{c} connections: {path} PostgreSQL CPU <= 1.5x {BARE_OF[path]}",
            _ratio(cpu, _cpu(bare)),
            1.5,
            at_most=True,
        ),
        Target(
            f"{c} connections: {path} PostgreSQL CPU <= 1.0x graphile-worker's job",
            _ratio(cpu, _cpu(gw)),
            1.0,
            at_most=True,
        ),
        Target(
            f"{c} connections: {path} actions/s >= 0.8x {BARE_OF[path]}",
            _ratio(r.per_second if r else None, bare.per_second if bare else None),
            0.8,
            at_most=False,
        ),
        Target(
            f"{c} connections: {path} on empty tables, PostgreSQL CPU <= 1.2x with history",
            _ratio(_cpu(report.get(path, "empty", c)), cpu),
            1.2,
            at_most=True,
        ),
    ]


def to_json(report: Report) -> dict[str, Any]:
    doc: dict[str, Any] = _jsonable(asdict(report))
    for entry, r in zip(doc["results"], report.results, strict=True):
        entry["per_second"] = r.per_second
    doc["targets"] = [
        {
            "target": v.target.name,
            "measured": v.target.value,
            "met": v.target.met,
            "rounds": [r.value for r in v.rounds],
            "met_in_rounds": v.met_in_rounds,
        }
        for v in verdicts(report)
    ]
    return doc


def parse(argv: list[str] | None = None) -> tuple[Options, Path | None]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.executor_path", description=__doc__)
    p.add_argument("--database-url", help="measure this server instead of a private cluster")
    p.add_argument("--not-durable", action="store_true", help="private cluster with fsync=off")
    p.add_argument("-n", "--actions", type=int, default=2_000, help="actions per case and run")
    p.add_argument("--connections", default="4,16", help="connection counts (loops)")
    p.add_argument("--history", type=int, default=50_000, help="settled actions of history")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--tables", default=",".join(TABLES), help="empty, history or both")
    p.add_argument("--rounds", type=int, default=3, help="rounds per case (medians reported)")
    p.add_argument("--work-dir", type=Path, help="every loop's log and figures")
    p.add_argument("--json", type=Path, help="also write the full report as JSON here")
    args = p.parse_args(argv)
    return Options(
        database_url=args.database_url,
        durable=not args.not_durable,
        actions=args.actions,
        connections=tuple(int(x) for x in args.connections.split(",")),
        history=args.history,
        cases=tuple(x.strip() for x in args.cases.split(",") if x.strip()),
        tables=tuple(x.strip() for x in args.tables.split(",") if x.strip()),
        rounds=args.rounds,
        work_dir=args.work_dir,
    ), args.json


def main(argv: list[str] | None = None) -> None:
    options, json_path = parse(argv)
    report = run(options)
    print(markdown(report))
    print(f"\n(total {report.seconds:.0f}s)")
    if json_path:
        json_path.write_text(json.dumps(to_json(report), indent=2), encoding="utf-8")


__all__ = [
    "CALLS",
    "CaseResult",
    "Options",
    "Report",
    "Target",
    "Verdict",
    "each_round",
    "markdown",
    "run",
    "targets",
    "to_json",
    "verdicts",
]

if __name__ == "__main__":
    main()
