"""`python -m benchmarks.executor_instructions`: the executor path's server work, counted.

The same path as `benchmarks.executor_serial` (`executor_loop`'s steps, `sql` and `bare` by
default, each case in its own freshly migrated database), on a private durable cluster whose
server runs under callgrind, valgrind's instruction counter. Per action: the instructions
one session's backend executed, from two sessions of different lengths (their difference over
the difference of their actions, so the connection's start and the warm-up cancel out).

An instruction count repeats for the same build and the same inputs whatever else the
machine does, where a CPU time on a shared machine spreads by a fifth from one run to the
next: this is where a change of a few percent to a function, a trigger or a check is weighed.
It leaves out the kernel (the WAL flush, the socket) and counts a cheap instruction like a
dear one, so it says which build does less work, not how much less time it takes; the
concurrent benchmark (`benchmarks.executor_path`) says that. Needs valgrind (Debian's
`valgrind`); the server runs about fifty times slower under it.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from benchmarks.executor_loop import PATH_CASES, LoopStats, Steps, Timer, actions
from benchmarks.executor_serial import prepare_database
from benchmarks.procs import callgrind_total
from benchmarks.server import Databases, describe
from resolver.demo import localpg

START_SECONDS = 300


@dataclass(frozen=True, slots=True)
class Options:
    actions: int = 240
    """Actions of the longer session; the shorter runs a quarter of them."""
    rounds: int = 2
    cases: tuple[str, ...] = ("sql", "bare")
    warmup: int = 30
    """Actions each session runs before it counts: its plans made, its caches filled."""


@dataclass(slots=True)
class CaseCount:
    case: str
    per_action: list[float] = field(default_factory=list)
    """Instructions per action, one figure per round."""

    @property
    def median(self) -> float:
        return statistics.median(self.per_action)


def run(options: Options) -> dict[str, CaseCount]:
    unknown = set(options.cases) - set(PATH_CASES)
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}; known: {sorted(PATH_CASES)}")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian's `valgrind` package)")
    data_dir = Path(tempfile.mkdtemp(prefix="resolver-bench-"))
    try:
        cluster, urls = _prepare(data_dir, options.cases)
        counts = {case: CaseCount(case) for case in options.cases}
        with _counted_server(cluster) as out_dir:
            for case, url in urls.items():
                # Uncounted: the first session on a database also fills what every later one
                # finds there (the relation cache's file, the shared buffers).
                _session(out_dir, url, case, "prime", 0, options.warmup)
            for round_ in range(options.rounds):
                # Alternating, as the serial tool does (here only the tables' growth differs).
                order = options.cases if round_ % 2 == 0 else tuple(reversed(options.cases))
                for case in order:
                    counts[case].per_action.append(
                        _per_action(out_dir, urls[case], case, round_, options)
                    )
        return counts
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _prepare(data_dir: Path, cases: tuple[str, ...]) -> tuple[localpg.Cluster, dict[str, str]]:
    """Migrate each case's database on the cluster run normally (migrating under the counter
    would take minutes), then stop it: the counted server starts on the same data, port and
    user, so each case's URL stays valid."""
    cluster = localpg.start(data_dir, durable=True)
    try:
        dbs = Databases(describe(cluster.url, private=True))
        return cluster, {case: prepare_database(dbs, case, False) for case in cases}
    finally:
        cluster.stop()


@contextlib.contextmanager
def _counted_server(cluster: localpg.Cluster) -> Iterator[Path]:
    """The stopped cluster started again under callgrind; yields where each process's counts
    land (`backend.<pid>`)."""
    data_dir = cluster.data_dir
    out_dir = data_dir.parent / f"{data_dir.name}-callgrind"
    out_dir.mkdir()
    out_dir.chmod(0o777)  # the server's user writes there
    command = [
        "valgrind",
        "--tool=callgrind",
        "--trace-children=yes",
        f"--callgrind-out-file={out_dir}/backend.%p",
        str(cluster.bin_dir / "postgres"),
        "-D",
        str(data_dir),
        "-p",
        str(cluster.port),
        "-k",
        str(data_dir),
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "autovacuum=off",
    ]
    if cluster.run_as:
        command = ["runuser", "-u", cluster.run_as, "--", *command]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(cluster.url, server)
        yield out_dir
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(out_dir, ignore_errors=True)


def _wait_for(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            psycopg.connect(url, connect_timeout=5).close()
            return
        except psycopg.OperationalError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the server did not start under valgrind") from None
            time.sleep(0.5)


def _per_action(out_dir: Path, url: str, case: str, round_: int, options: Options) -> float:
    short = max(1, options.actions // 4)
    fewer = _session(out_dir, url, case, f"r{round_}a", short, options.warmup)
    more = _session(out_dir, url, case, f"r{round_}b", options.actions, options.warmup)
    return (more - fewer) / (options.actions - short)


def _session(out_dir: Path, url: str, case: str, tag: str, n: int, warmup: int) -> int:
    """The instructions of one session's backend: a warm-up, then `n` actions."""
    bare, grouped = PATH_CASES[case]
    steps = Steps(url, bare=bare)
    try:
        run = grouped(steps)
        time_it = Timer(LoopStats())
        for action in actions(f"w{tag}-", warmup):
            run(action, time_it)
        for action in actions(f"m{tag}-", n):
            run(action, time_it)
        pid = steps.conn.info.backend_pid
    finally:
        steps.conn.close()
    return _total(out_dir / f"backend.{pid}")


def _total(path: Path) -> int:
    # The backend exits, and callgrind writes its counts, shortly after its session closed.
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if (total := callgrind_total(path)) is not None:
            return total
        time.sleep(0.2)
    raise SystemExit(f"no instruction count in {path}")


def markdown(counts: dict[str, CaseCount]) -> str:
    lines = [
        "| case | instructions per action (median) | rounds | x bare |",
        "|---|---|---|---|",
    ]
    for name, count in counts.items():
        base = counts.get("bare2" if name.endswith("2") else "bare")
        ratio = f"{count.median / base.median:.2f}" if base is not None else ""
        rounds = ", ".join(f"{v:,.0f}" for v in count.per_action)
        lines.append(f"| {name} | {count.median:,.0f} | {rounds} | {ratio} |")
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.executor_instructions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = Options()
    parser.add_argument("-n", "--actions", type=int, default=defaults.actions)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument(
        "--cases", default=",".join(defaults.cases), help="of sql, sql2, bare, bare2"
    )
    args = parser.parse_args(argv)
    return Options(args.actions, args.rounds, tuple(args.cases.split(",")))


def main(argv: list[str] | None = None) -> None:
    print(markdown(run(parse(argv))))


if __name__ == "__main__":
    main()
