"""`python -m benchmarks.run`: every figure of docs/performance.md from one command."""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from benchmarks import peer, pgbench, seed
from benchmarks.phases import (
    DELAYED_ACTION,
    HTTP_ACTION,
    INSTANT_ACTION,
    RECEIPT_ACTION,
    DrainCase,
    DrainResult,
    HttpCase,
    IdleResult,
    ScanResult,
    drain,
    http_drain,
    idle_writes,
    scan_cost,
)
from benchmarks.server import Databases, Server, open_server
from resolver.core.provider import ENTRY_POINT_GROUP, installed_entry_points

RECEIPT_PROVIDER = "internal_mutation"
HTTP_PAGE = 16
# Frames of the --profile-seconds summary printed per drain (the JSON report has 30).
PROFILE_LINES = 18


class Echo(Protocol):
    def __call__(self, text: str, /, *, end: str = ...) -> None: ...


def _print(text: str, /, *, end: str = "\n") -> None:
    print(text, end=end, flush=True)


@dataclass(frozen=True, slots=True)
class Options:
    database_url: str | None = None
    durable: bool = True
    count: int = 50_000
    replicas: int = 4
    page_sizes: tuple[int, ...] = (16, 64)
    providers: tuple[str, ...] = ("receipts", "instant", "delayed", "http")
    pgbench_seconds: int = 20
    rounds: int = 1
    pgbench_scale: int = 10
    pgbench_clients: int = 4
    idle_seconds: float = 30.0
    closed_small: int = 1_000
    closed_large: int = 1_000_000
    scan_due: int = 1_000
    scan_samples: int = 300
    max_drain_seconds: float = 120.0
    http_count: int = 20_000
    http_latency_ms: float = 20.0
    http_cap_per_second: float = 450.0
    work_dir: Path | None = None
    profile_seconds: float = 0.0
    with_peer: bool = True


@dataclass(slots=True)
class Report:
    machine: dict[str, Any]
    options: dict[str, Any]
    pgbench_tps: list[float] = field(default_factory=list)
    drains: list[DrainResult] = field(default_factory=list)
    peer_runs: list[peer.PeerResult] = field(default_factory=list)
    scan: ScanResult | None = None
    idle: IdleResult | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def pgbench_mean(self) -> float | None:
        return sum(self.pgbench_tps) / len(self.pgbench_tps) if self.pgbench_tps else None

    def drain_for(self, kind: str, page_size: int, action_type: str) -> DrainResult | None:
        """The median run (by resolutions/s) of one case over the rounds."""
        runs = sorted(
            (
                d
                for d in self.drains
                if (d.case.kind, d.case.page_size) == (kind, page_size)
                and (kind == "bare" or d.case.action_type == action_type)
            ),
            key=lambda d: d.per_second,
        )
        return runs[(len(runs) - 1) // 2] if runs else None

    @property
    def peer_median(self) -> peer.PeerResult | None:
        """The graphile-worker peer's median run (by jobs/s) over the rounds."""
        runs = sorted(self.peer_runs, key=lambda r: r.per_second)
        return runs[(len(runs) - 1) // 2] if runs else None

    def case_medians(self) -> list[DrainResult]:
        seen: dict[str, DrainResult] = {}
        for d in self.drains:
            if d.case.name not in seen:
                median = self.drain_for(d.case.kind, d.case.page_size, d.case.action_type)
                assert median is not None
                seen[d.case.name] = median
        return list(seen.values())


def installed_providers() -> set[str]:
    return {ep.name for ep in installed_entry_points(ENTRY_POINT_GROUP)}


def provider_config(installed: set[str]) -> dict[str, Any]:
    action_types: dict[str, Any] = {}
    if "bench_instant" in installed:
        action_types[INSTANT_ACTION] = {"provider": "bench_instant", "benchmark_only": True}
    if "bench_delayed" in installed:
        action_types[DELAYED_ACTION] = {
            "provider": "bench_delayed",
            "benchmark_only": True,
            "latency_ms": 5,
        }
    if RECEIPT_PROVIDER in installed:
        action_types[RECEIPT_ACTION] = {"provider": RECEIPT_PROVIDER}
    return {"action_types": action_types}


def cases(options: Options, installed: set[str], page: int) -> list[DrainCase]:
    """The bare loop first, then the resolver cases right after it, at one page size."""
    out = [DrainCase(f"bare-p{page}", "bare", page)]
    wanted = (
        ("receipts", RECEIPT_PROVIDER, RECEIPT_ACTION),
        ("instant", "bench_instant", INSTANT_ACTION),
        ("delayed", "bench_delayed", DELAYED_ACTION),
    )
    for key, provider, action in wanted:
        if key in options.providers and provider in installed:
            out.append(
                DrainCase(f"{key}-p{page}", "resolver", page, action, receipts=key == "receipts")
            )
    return out


def compile_sources() -> None:
    """Byte-compile the resolver as the image does (`compileall` in deploy/Dockerfile): with
    PYTHONDONTWRITEBYTECODE set, every replica would otherwise compile it again at start."""
    import providers
    import resolver

    for package in (resolver, providers):
        for directory in package.__path__:
            compileall.compile_dir(directory, quiet=1)


def run(options: Options, *, echo: Echo = _print) -> Report:
    started = time.monotonic()
    compile_sources()
    work_dir = options.work_dir or Path(tempfile.mkdtemp(prefix="resolver-bench-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    with open_server(options.database_url, durable=options.durable) as server:
        report = Report(machine=machine(server), options=_jsonable(asdict(options)))
        echo(f"server: PostgreSQL {server.version} ({'private' if server.private else 'given'})")
        dbs = Databases(server)
        try:
            _run_phases(options, server, dbs, work_dir, report, echo)
        finally:
            dbs.close()
    report.seconds = time.monotonic() - started
    return report


def _run_phases(
    options: Options,
    server: Server,
    dbs: Databases,
    work_dir: Path,
    report: Report,
    echo: Echo,
) -> None:
    extensions = ("pg_stat_statements",) if server.has_pg_stat_statements else ()
    resolver_url = dbs.create("resolver", migrated=True, extensions=extensions)
    installed = installed_providers()
    for key, provider in (
        ("receipts", RECEIPT_PROVIDER),
        ("instant", "bench_instant"),
        ("delayed", "bench_delayed"),
        ("http", "http_receipt"),
    ):
        if key in options.providers and provider not in installed:
            report.notes.append(f"provider {provider!r} is not installed: {key} not measured")
    config_path = work_dir / "providers.yaml"
    config_path.write_text(yaml.safe_dump(provider_config(installed)), encoding="utf-8")
    replica_env = {
        "RESOLVER_DATABASE_URL": resolver_url,
        "RESOLVER_CONFIG": str(config_path),
        **seed.keys_env(seed.BENCH_KEYS),
    }
    if options.idle_seconds > 0:
        echo(f"idle: one replica, nothing due, {options.idle_seconds:g}s")
        report.idle = idle_writes(
            resolver_url,
            seconds=options.idle_seconds,
            work_dir=work_dir,
            replica_env=replica_env,
            private=server.private,
            statements=server.has_pg_stat_statements,
        )
        echo(f"  {report.idle}")
    bench = pgbench.find_pgbench()
    pgbench_url = None
    if bench is None:
        report.notes.append("pgbench not found: no TPC-B baseline (install postgresql-contrib)")
    elif options.pgbench_seconds > 0:
        pgbench_url = dbs.create("pgbench", migrated=False)
        echo(f"pgbench: initialising scale {options.pgbench_scale}")
        pgbench.initialise(bench, pgbench_url, options.pgbench_scale)
        _pgbench(options, bench, pgbench_url, report, echo)
    peer_at = _peer_setup(options, dbs, report, echo)
    # pgbench before and after each page size's drains: the baseline is measured under
    # the same machine load as the figures it is compared with.
    for page in options.page_sizes:
        for round_no in range(options.rounds):
            if peer_at is not None and page == max(options.page_sizes):
                echo(f"peer graphile-worker (round {round_no + 1}/{options.rounds}): ", end="")
                peer_run = peer.run(*peer_at, options.count, all_server_processes=server.private)
                report.peer_runs.append(peer_run)
                echo(peer.describe(peer_run))
            for case in cases(options, installed, page):
                echo(f"drain {case.name} (round {round_no + 1}/{options.rounds}): ", end="")
                result = drain(
                    resolver_url,
                    case,
                    count=options.count,
                    processes=options.replicas,
                    work_dir=work_dir,
                    replica_env=replica_env,
                    statements=server.has_pg_stat_statements,
                    max_seconds=options.max_drain_seconds,
                    all_server_processes=server.private,
                    profile_seconds=options.profile_seconds,
                )
                report.drains.append(result)
                echo(describe(result))
        if page == HTTP_PAGE and "http" in options.providers and "http_receipt" in installed:
            _http(options, server, resolver_url, work_dir, replica_env, report, echo)
        if bench is not None and pgbench_url is not None:
            _pgbench(options, bench, pgbench_url, report, echo)
    if pgbench_url is not None:
        dbs.drop(pgbench_url)
    if peer_at is not None:
        dbs.drop(peer_at[1])
    dbs.drop(resolver_url)
    if options.closed_large > 0:
        echo(f"scan: claim latency with {options.closed_small} vs {options.closed_large} closed")
        small = dbs.create("scan_small", migrated=True)
        large = dbs.create("scan_large", migrated=True)
        report.scan = scan_cost(
            small,
            large,
            closed_small=options.closed_small,
            closed_large=options.closed_large,
            due=options.scan_due,
            page_size=min(options.page_sizes),
            samples=options.scan_samples,
        )
        echo(f"  ratio {report.scan.ratio:.2f}")


def _peer_setup(
    options: Options, dbs: Databases, report: Report, echo: Echo
) -> tuple[Path, str] | None:
    """The graphile-worker peer installed and its database migrated, or None (noted)."""
    if not options.with_peer:
        return None
    reason = peer.unavailable_reason()
    if reason is not None:
        report.notes.append(reason)
        return None
    echo("peer: installing graphile-worker (npm ci, cached) and its schema")
    install_dir = peer.install()
    url = dbs.create("graphile", migrated=False)
    peer.migrate(install_dir, url)
    return install_dir, url


def _http(
    options: Options,
    server: Server,
    url: str,
    work_dir: Path,
    replica_env: dict[str, str],
    report: Report,
    echo: Echo,
) -> None:
    case = DrainCase(f"http-p{HTTP_PAGE}", "resolver", HTTP_PAGE, HTTP_ACTION)
    http = HttpCase(
        latency_ms=options.http_latency_ms, max_requests_per_second=options.http_cap_per_second
    )
    echo(f"drain {case.name} ({options.http_latency_ms:g} ms per request): ", end="")
    result = http_drain(
        url,
        case,
        http,
        count=options.http_count,
        processes=options.replicas,
        work_dir=work_dir,
        replica_env=replica_env,
        keys=seed.BENCH_KEYS,
        statements=server.has_pg_stat_statements,
        max_seconds=options.max_drain_seconds,
        all_server_processes=server.private,
        profile_seconds=options.profile_seconds,
    )
    report.drains.append(result)
    echo(describe(result))


def _pgbench(options: Options, bench: Path, url: str, report: Report, echo: Echo) -> None:
    tps = pgbench.tps(bench, url, clients=options.pgbench_clients, seconds=options.pgbench_seconds)
    report.pgbench_tps.append(tps)
    echo(f"pgbench: {tps:,.0f} TPS at {options.pgbench_clients} clients")


def machine(server: Server) -> dict[str, Any]:
    mem_kb = 0
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "postgresql": server.version,
        "python": platform.python_version(),
        "private_cluster": server.private,
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


def describe(d: DrainResult) -> str:
    """One line per drain, as it finishes."""
    parts = [f"{d.per_second:,.0f}/s ({d.resolved} in {d.seconds:.2f}s steady)"]
    if d.process_cpu_us is not None:
        parts.append(f"cpu/resolution {d.process_cpu_us:.0f} us")
    if d.server_cpu_us is not None:
        parts.append(f"postgres {d.server_cpu_us:.0f} us")
    if d.startup_ms is not None:
        parts.append(f"first claim {d.startup_ms / 1000:.2f}s after spawn")
    if d.slowest_started_ms is not None:
        parts.append(f"last replica started {d.slowest_started_ms / 1000:.2f}s after spawn")
    if d.timed_out:
        parts.append("TIMED OUT")
    lines = [", ".join(parts)]
    for share, frame in (d.profile or [])[:PROFILE_LINES]:
        lines.append(f"    replica py-spy {100 * share:5.1f}%  {frame}")
    for row in d.statements or []:
        lines.append(
            f"    server us/resolution {row['exec_us_per_resolution']:6.1f} exec"
            f" {row['plan_us_per_resolution']:5.1f} plan, calls/resolution"
            f" {row['calls_per_resolution']:.3f}: {row['query']}"
        )
    return "\n".join(lines)


def _ratio_target(
    name: str, value: float | None, factor: float, *, at_most: bool = False, unit: str = "x"
) -> tuple[str, str, bool | None]:
    if value is None:
        return (name, "not measured", None)
    met = value <= factor if at_most else value >= factor
    shown = f"{value:.2f}x" if unit == "x" else f"{value:,.0f} {unit}"
    return (name, shown, met)


def targets(report: Report) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met?) for every target the benchmark holds the resolver to;
    None when not measured. Ratios are within this one run."""
    out: list[tuple[str, str, bool | None]] = []
    base = report.pgbench_mean
    for page, x_bare_min, x_base_min, pg_max in ((16, 0.9, 2.0, 85.0), (64, 0.85, 4.0, 65.0)):
        d = report.drain_for("resolver", page, RECEIPT_ACTION)
        bare = report.drain_for("bare", page, RECEIPT_ACTION)
        x_bare = d.per_second / bare.per_second if d and bare and bare.per_second else None
        out.append(_ratio_target(f"page {page}: >= {x_bare_min:g}x bare loop", x_bare, x_bare_min))
        x_base = d.per_second / base if d and base else None
        out.append(_ratio_target(f"page {page}: >= {x_base_min:g}x pgbench", x_base, x_base_min))
        over = _over(d.process_cpu_us if d else None, bare.process_cpu_us if bare else None)
        out.append(
            _ratio_target(
                f"page {page}: replica CPU <= bare loop + 15 us/resolution",
                over,
                15.0,
                at_most=True,
                unit="us over the bare loop",
            )
        )
        out.append(
            _ratio_target(
                f"page {page}: PostgreSQL CPU <= {pg_max:g} us/resolution",
                d.server_cpu_us if d else None,
                pg_max,
                at_most=True,
                unit="us",
            )
        )
        server_x = (
            d.server_cpu_us / bare.server_cpu_us
            if d and bare and d.server_cpu_us and bare.server_cpu_us
            else None
        )
        out.append(
            _ratio_target(
                f"page {page}: PostgreSQL CPU <= 1.1x the bare loop's", server_x, 1.1, at_most=True
            )
        )
    d64 = report.drain_for("resolver", 64, RECEIPT_ACTION)
    gw = report.peer_median
    x_peer = d64.per_second / gw.per_second if d64 and gw and gw.per_second else None
    out.append(_ratio_target("page 64: >= 0.5x graphile-worker jobs/s", x_peer, 0.5))
    startups = [d.startup_ms for d in report.drains if d.startup_ms is not None]
    if startups:
        worst = max(startups) / 1000
        out.append(
            ("start-up to first claim <= 0.4 s", f"{worst:.2f} s (worst drain)", worst <= 0.4)
        )
    else:
        out.append(("start-up to first claim <= 0.4 s", "not measured", None))
    out += http_targets(report.drain_for("resolver", HTTP_PAGE, HTTP_ACTION))
    if report.scan is None:
        out.append(("claim latency 1M/1k <= 1.2", "not measured", None))
    else:
        out.append(
            ("claim latency 1M/1k <= 1.2", f"{report.scan.ratio:.2f}", report.scan.ratio <= 1.2)
        )
    resolver_rss = [d.peak_rss_mb for d in report.drains if d.case.kind == "resolver"]
    if resolver_rss:
        peak = max(resolver_rss)
        out.append(("RSS <= 120 MB per replica", f"{peak:.0f} MB", peak <= 120))
    if report.idle is None:
        out.append(("zero idle writes", "not measured", None))
    else:
        idle = report.idle
        wal = "n/a" if idle.statement_wal_bytes is None else f"{idle.statement_wal_bytes}"
        out.append(
            (
                "zero idle writes",
                f"{idle.tuples_written} tuples, {wal} WAL bytes by its statements, "
                f"{idle.cycles} cycles in {idle.seconds:g}s",
                idle.writes_nothing,
            )
        )
    return out


def http_targets(d: DrainResult | None) -> list[tuple[str, str, bool | None]]:
    names = (
        "http_receipt 20 ms, page 16: >= 1,500 resolutions/s",
        "http_receipt: <= 1 new connection per replica per minute",
        "http_receipt: rate cap holds within 5 %",
    )
    if d is None or d.http is None:
        return [(name, "not measured", None) for name in names]
    h = d.http
    steady = float(h["steady_new_connections_per_replica_per_minute"])
    peak = float(h["max_window_over_cap"])
    return [
        (names[0], f"{d.per_second:,.0f}/s", d.per_second >= 1500),
        (
            names[1],
            f"{steady:.1f} reopened/min beyond the pool "
            f"({h['connections_per_replica']} opened, max_in_flight {h['max_in_flight']})",
            steady <= 1,
        ),
        (names[2], f"busiest 1-s window {peak:.3f}x the cap", peak <= 1.05),
    ]


def _over(value: float | None, bare: float | None) -> float | None:
    return value - bare if value is not None and bare is not None else None


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def markdown(report: Report) -> str:
    base = report.pgbench_mean
    lines = [
        "| case | page | steady resolutions/s | x pgbench | x bare loop | CPU us/resolution: "
        "processes | PostgreSQL | first claim s | claim mean ms | statements / resolution "
        "| peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in report.case_medians():
        bare = report.drain_for("bare", d.case.page_size, "")
        x_base = f"{d.per_second / base:.2f}" if base else "n/a"
        x_bare = f"{d.per_second / bare.per_second:.2f}" if bare and bare.per_second else "n/a"
        flag = " (timed out)" if d.timed_out else ""
        startup = None if d.startup_ms is None else d.startup_ms / 1000
        lines.append(
            f"| {d.case.name}{flag} | {d.case.page_size} | {d.per_second:,.0f} | {x_base} "
            f"| {x_bare} | {_num(d.process_cpu_us)} | {_num(d.server_cpu_us)} "
            f"| {_num(startup, '{:.2f}')} | {_num(d.claim_ms_mean, '{:.2f}')} "
            f"| {_num(d.statements_per_resolution, '{:.2f}')} | {d.peak_rss_mb:.0f} |"
        )
    gw = report.peer_median
    if gw is not None:
        lines.append(
            f"| graphile-worker (peer) | 500 | {gw.per_second:,.0f} jobs/s "
            f"| {gw.per_second / base:.2f} | n/a | {_num(gw.process_cpu_us)} "
            f"| {_num(gw.server_cpu_us)} | n/a | n/a | n/a | {gw.peak_rss_mb:.0f} |"
            if base
            else f"| graphile-worker (peer) | 500 | {gw.per_second:,.0f} jobs/s | n/a | n/a "
            f"| {_num(gw.process_cpu_us)} | {_num(gw.server_cpu_us)} | n/a | n/a | n/a "
            f"| {gw.peak_rss_mb:.0f} |"
        )
    tps = ", ".join(f"{t:,.0f}" for t in report.pgbench_tps) or "n/a"
    lines += ["", f"pgbench TPC-B-like TPS at 4 clients (each run): {tps}"]
    http = report.drain_for("resolver", HTTP_PAGE, HTTP_ACTION)
    if http is not None and http.http is not None:
        h = http.http
        lines.append(
            f"http_receipt ({h['latency_ms']} ms per request, cap {h['cap_per_second']:g}/s and "
            f"{h['max_in_flight']} in flight per replica): {http.per_second:,.0f} resolutions/s; "
            f"connections opened per replica {h['connections_per_replica']}, reopened beyond the "
            f"pool {h['steady_new_connections_per_replica_per_minute']:.1f}/min; "
            f"busiest 1-s window "
            f"{h['max_window_over_cap']:.3f}x the cap, mean {h['mean_rate_over_cap']:.3f}x"
        )
    if report.scan:
        s = report.scan
        lines.append(
            f"claim latency p50 (p99), {s.closed_small:,} closed: {s.small_p50_ms:.3f} "
            f"({s.small_p99_ms:.3f}) ms; {s.closed_large:,} closed: {s.large_p50_ms:.3f} "
            f"({s.large_p99_ms:.3f}) ms; ratio {s.ratio:.2f}"
        )
    lines += ["", "| target | measured | met |", "|---|---|---|"]
    for name, measured, met in targets(report):
        verdict = "not measured" if met is None else ("yes" if met else "**no**")
        lines.append(f"| {name} | {measured} | {verdict} |")
    lines += [f"- {note}" for note in report.notes]
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> tuple[Options, Path | None]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    p.add_argument("--database-url", help="measure this server instead of a private cluster")
    p.add_argument("--not-durable", action="store_true", help="private cluster with fsync=off")
    p.add_argument("-K", "--count", type=int, default=50_000, help="due controls per drain")
    p.add_argument("-R", "--replicas", type=int, default=4, help="replica processes")
    p.add_argument("--page-sizes", default="16,64")
    p.add_argument("--providers", default="receipts,instant,delayed,http")
    p.add_argument("--rounds", type=int, default=1, help="drains per case (median reported)")
    p.add_argument("--pgbench-seconds", type=int, default=20)
    p.add_argument("--pgbench-scale", type=int, default=10)
    p.add_argument("--idle-seconds", type=float, default=30.0)
    p.add_argument("--closed-small", type=int, default=1_000)
    p.add_argument("--closed-large", type=int, default=1_000_000)
    p.add_argument("--scan-samples", type=int, default=300)
    p.add_argument("--max-drain-seconds", type=float, default=120.0)
    p.add_argument("--http-count", type=int, default=20_000, help="due controls, http case")
    p.add_argument("--http-latency-ms", type=float, default=20.0)
    p.add_argument(
        "--http-cap", type=float, default=450.0, help="http_receipt requests/s per replica"
    )
    p.add_argument("--work-dir", type=Path, help="logs and stats of the measured processes")
    p.add_argument(
        "--profile-seconds",
        type=float,
        default=0.0,
        help="py-spy one replica of each drain for this long (needs py-spy; perturbs it a little)",
    )
    p.add_argument(
        "--no-peer",
        action="store_true",
        help="skip the graphile-worker peer case (it needs node and npm)",
    )
    p.add_argument("--json", type=Path, help="also write the full report as JSON here")
    args = p.parse_args(argv)
    return Options(
        database_url=args.database_url,
        durable=not args.not_durable,
        count=args.count,
        replicas=args.replicas,
        page_sizes=tuple(int(x) for x in args.page_sizes.split(",")),
        providers=tuple(x.strip() for x in args.providers.split(",") if x.strip()),
        rounds=args.rounds,
        pgbench_seconds=args.pgbench_seconds,
        pgbench_scale=args.pgbench_scale,
        idle_seconds=args.idle_seconds,
        closed_small=args.closed_small,
        closed_large=args.closed_large,
        scan_samples=args.scan_samples,
        max_drain_seconds=args.max_drain_seconds,
        http_count=args.http_count,
        http_latency_ms=args.http_latency_ms,
        http_cap_per_second=args.http_cap,
        work_dir=args.work_dir,
        profile_seconds=args.profile_seconds,
        with_peer=not args.no_peer,
    ), args.json


def to_json(report: Report) -> dict[str, Any]:
    doc: dict[str, Any] = _jsonable(asdict(report))
    doc["pgbench_mean"] = report.pgbench_mean
    for entry, d in zip(doc["drains"], report.drains, strict=True):
        entry["per_second"] = d.per_second
    for entry, r in zip(doc["peer_runs"], report.peer_runs, strict=True):
        entry["per_second"] = r.per_second
    if report.scan:
        doc["scan"]["ratio"] = report.scan.ratio
    doc["targets"] = [
        {"target": name, "measured": measured, "met": met}
        for name, measured, met in targets(report)
    ]
    return doc


def main(argv: list[str] | None = None) -> None:
    options, json_path = parse(argv)
    report = run(options)
    print()
    print(markdown(report))
    print(f"\n(total {report.seconds:.0f}s)")
    if json_path:
        json_path.write_text(json.dumps(to_json(report), indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
