"""`resolver` command line: migrate, run, api, status, demo, prune.

Exit codes: 0 done; 1 a run whose last cycle outlived the shutdown grace, a migration
PostgreSQL refused, or an unexpected error (its traceback is in the JSON log); 2
configuration or usage error; 3 database unreachable or schema not migrated (`resolver
run`: after waiting the start-up limit). Every expected failure is one line on stderr, never a
traceback. `resolver prune` has its own codes (4-6 beyond these; see prune_cli).
"""

from __future__ import annotations

# isort: off
# First: it sets up the import phase below (see the module; `imports_done` ends it).
from resolver.app import bootstrap

# isort: on
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import structlog

from resolver import __version__
from resolver.app import startup
from resolver.app.composition import (
    build_api,
    build_replica,
    build_verifier,
    configure_logging,
    migration_policy,
    open_store,
    serve_endpoints,
)
from resolver.app.config import Settings, load_settings, provider_variables, unknown_variables
from resolver.app.prune_cli import prune_cmd
from resolver.core.domain import BacklogSnapshot
from resolver.core.errors import ConfigError, ResolverError, SchemaNotReady, StorageUnavailable
from resolver.core.replica import Replica
from resolver.db import migrate as migrations
from resolver.telemetry import jsonlogs
from resolver.telemetry.health import Heartbeat
from resolver.telemetry.metrics import DEFAULT_COUNT_CAP

if TYPE_CHECKING:
    from resolver.demo.live import LiveOptions

bootstrap.imports_done()

F = TypeVar("F", bound=Callable[..., Any])
log = structlog.get_logger("resolver.cli")

EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_STORAGE = 3


def fail(prefix: str, exc: BaseException, code: int) -> None:
    # libpq messages span lines ("Is the server running…"): the answer is one line.
    click.echo(f"{prefix}: {' '.join(str(exc).split())}", err=True)
    sys.exit(code)


def friendly_errors(func: F) -> F:
    """Known failures end with one line on stderr and a distinct exit code, no traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            fail("configuration error", exc, EXIT_CONFIG)
        except (StorageUnavailable, SchemaNotReady) as exc:
            fail("database error", exc, EXIT_STORAGE)
        except ResolverError as exc:
            fail("error", exc, EXIT_FAILED)
        except click.ClickException:
            raise  # a usage error: click prints it and exits 2
        except Exception as exc:
            log.exception("unexpected_error", error=type(exc).__name__)
            fail("error", RuntimeError(f"unexpected {type(exc).__name__}; see the log"), 1)
        return None

    return wrapper  # type: ignore[return-value]


@click.group()
@click.version_option(__version__, prog_name="resolver")
@click.option("--log-level", default="INFO", show_default=True, envvar="RESOLVER_LOG_LEVEL")
def main(log_level: str) -> None:
    """Evidence-only recovery of outcome-unknown executions of approved actions."""
    try:
        configure_logging(log_level)
    except ConfigError as exc:
        fail("configuration error", exc, EXIT_CONFIG)


def settings_from_env(**overrides: Any) -> Settings:
    """The validated settings, after a warning for each `RESOLVER_*` name nothing reads."""
    settings = load_settings(**overrides)
    extra = provider_variables(settings.config)
    for name, closest in unknown_variables(os.environ, extra):
        log.warning(
            "unknown_environment_variable",
            name=name,
            did_you_mean=closest,
            hint=f"{name} is ignored" + (f"; did you mean {closest}?" if closest else ""),
        )
    return settings


@main.command("migrate")
@click.option("--sql", "offline", is_flag=True, help="Print the DDL instead of running it.")
@click.option("--revision", default="head", show_default=True, help="Upgrade to this revision.")
@click.option(
    "--downgrade",
    "downgrade_to",
    default=None,
    metavar="REVISION",
    help="Roll the schema back to REVISION (or `base`) instead of upgrading.",
)
@click.option(
    "--grants",
    "with_grants",
    is_flag=True,
    help="Then apply the roles' privileges (grants.sql; roles.sql must have created the roles).",
)
@friendly_errors
def migrate_cmd(offline: bool, revision: str, downgrade_to: str | None, with_grants: bool) -> None:
    """Create or upgrade the schema (idempotent); --downgrade rolls it back.

    DDL waits at most RESOLVER_MIGRATION_LOCK_TIMEOUT_MS for a lock, then the attempt rolls
    back and is retried (RESOLVER_MIGRATION_ATTEMPTS in all).
    """
    if with_grants and downgrade_to is not None:
        raise click.UsageError("--grants applies to an upgraded schema; drop it with --downgrade")
    if offline:
        click.echo(migrations.upgrade_sql(revision))
        if with_grants:
            click.echo(migrations.grants_sql())
        return
    settings = settings_from_env()
    url, policy = settings.require_database_url(), migration_policy(settings)
    if downgrade_to is not None:
        migrations.downgrade(url, downgrade_to, policy)
    else:
        migrations.upgrade(url, revision, policy)
    current = migrations.current_revision(url, settings.connect_timeout_seconds)
    click.echo(f"schema at revision {current}")
    if with_grants:
        migrations.apply_grants(url, policy)
        click.echo(f"grants applied ({migrations.GRANTS_FILE.name})")


def ensure_schema(url: str, connect_timeout_seconds: float) -> None:
    status, current = migrations.schema_status(url, connect_timeout_seconds)
    if status in (migrations.SchemaStatus.MISSING, migrations.SchemaStatus.BEHIND):
        raise SchemaNotReady(
            f"schema is at revision {current or 'none'}, this resolver needs "
            f"{migrations.head_revision()}; run `resolver migrate` first"
        )
    if status is migrations.SchemaStatus.AHEAD:
        log.warning("schema_ahead", revision=current, expected=migrations.head_revision())


@main.command("run")
@click.option("--once", is_flag=True, help="Run a single cycle and exit.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Provider config (YAML); defaults to RESOLVER_CONFIG.",
)
@friendly_errors
def run_cmd(once: bool, config_path: Path | None) -> None:
    """Claim, inspect and commit in a loop until SIGTERM/SIGINT."""
    # Blocked before any thread (pool, HTTP) exists, so all of them inherit it.
    with stop_signals_blocked():
        _run_replica(once, config_path)


def _run_replica(once: bool, config_path: Path | None) -> None:
    overrides = {"config": config_path} if config_path else {}
    settings = settings_from_env(**overrides)
    structlog.contextvars.bind_contextvars(replica_id=settings.replica_id)
    replica = build_replica(settings)
    try:
        serve_endpoints(replica, settings)
        # Endpoints first: while the database is away, /healthz answers and /readyz says no.
        if not _wait_for_database(settings, replica.runtime.heartbeat):
            return  # stopped while waiting; `finally` closes what was built
        log.info(
            "resolver_started",
            replica_id=settings.replica_id,
            page_size=settings.page_size,
            once=once,
        )
        clean = run_until_signalled(
            replica, once=once, grace_seconds=settings.shutdown_grace_seconds
        )
    finally:
        replica.close()
    log.info("resolver_stopped", replica_id=settings.replica_id, cycles=replica.cycles_completed)
    if not clean:
        sys.exit(1)


STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
_WAKE = signal.SIGUSR1


def _wait_for_database(settings: Settings, heartbeat: Heartbeat) -> bool:
    """Wait for a reachable, migrated database up to RESOLVER_STARTUP_TIMEOUT_SECONDS, as
    running replicas ride out an outage; False when a stop signal came meanwhile."""

    def sleep(seconds: float) -> bool:
        # Stop signals are blocked in this thread: wait for one, or for the delay to pass.
        return signal.sigtimedwait(STOP_SIGNALS, seconds) is not None

    return _await_database(settings, sleep, heartbeat.beat)


def _await_database(
    settings: Settings, sleep: Callable[[float], bool], beat: Callable[[], None]
) -> bool:
    """Retry the schema check with backoff up to the start-up limit (then raise its error);
    `sleep` returns True when a stop request ended the wait (then False)."""
    url = settings.require_database_url()

    def retrying(exc: BaseException, delay: float) -> None:
        beat()  # waiting is the process alive and retrying: liveness holds
        log.warning(
            "database_not_ready", error=type(exc).__name__, retry_in_seconds=round(delay, 3)
        )

    return startup.wait_until_ready(
        lambda: ensure_schema(url, settings.connect_timeout_seconds),
        limit_seconds=settings.startup_timeout_seconds,
        max_delay_seconds=settings.storage_retry_max_seconds,
        sleep=sleep,
        on_retry=retrying,
    )


class DatabaseWatch:
    """`resolver api`'s start-up wait, beside the server instead of before it.

    The API serves at once, as `resolver run` serves its endpoints before it waits: while
    the database is away or not yet migrated, /healthz answers (a liveness probe must not
    restart a pod for its database) and /readyz says no. The same limit as `resolver run`
    applies: past RESOLVER_STARTUP_TIMEOUT_SECONDS `give_up` stops the server and `failure`
    holds the error, which the command then raises (exit 3).
    """

    def __init__(self, settings: Settings, give_up: Callable[[], None]) -> None:
        self.failure: ResolverError | None = None
        self._settings = settings
        self._give_up = give_up
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="database-wait", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5)

    def _watch(self) -> None:
        try:
            _await_database(self._settings, self._stopped.wait, lambda: None)
        except ResolverError as exc:
            self.failure = exc
            self._give_up()


@contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """Block stop signals in this thread and every thread it starts, for the block's length.

    They are then taken synchronously by `sigwait` in the main thread: no asynchronous
    handler can interrupt a lock holder (a log write, an Event) and deadlock the process.
    On exit the previous mask comes back (an in-process caller, such as a test runner, must
    not keep it, nor pass it on to the processes it starts); a stop signal still pending
    then is consumed first, its stop having already happened.
    """
    watched = {*STOP_SIGNALS, _WAKE}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    try:
        yield
    finally:
        while signal.sigpending() & watched - previous:
            signal.sigtimedwait(watched - previous, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def run_until_signalled(replica: Replica[Any], *, once: bool, grace_seconds: float) -> bool:
    """Wire the stop signals to the replica: start it, wait for SIGTERM/SIGINT (or for the
    loop to end by itself), then stop it within the grace period.

    Returns False when the cycle in flight outlived the grace period (see `Replica.stop`).
    """
    with stop_signals_blocked():
        main_thread = threading.get_ident()
        # A loop that outlives the grace period must not wake a caller that stopped waiting
        # (its mask restored, SIGUSR1 would end the process): the waker checks under a lock.
        guard = threading.Lock()
        armed = [True]

        def wake() -> None:
            with guard:
                if armed[0]:
                    signal.pthread_kill(main_thread, _WAKE)

        replica.start(once=once, on_exit=wake)
        received = signal.sigwait({*STOP_SIGNALS, _WAKE})
        if received != _WAKE:
            log.info("shutdown_requested", signal=signal.Signals(received).name)
        try:
            return replica.stop(grace_seconds)
        finally:
            with guard:
                armed[0] = False


@main.command("api")
@click.option(
    "--openapi",
    "print_openapi",
    is_flag=True,
    help="Print the API's OpenAPI document (not served over HTTP) and exit.",
)
@friendly_errors
def api_cmd(print_openapi: bool) -> None:
    """Serve the manual-resolution API (the human queue and decisions).

    /healthz and /readyz answer on the API port; /metrics (and the probes with details) on
    RESOLVER_HTTP_PORT when set, as for `resolver run`.
    """
    if print_openapi:
        from resolver.human.api import openapi_document

        click.echo(json.dumps(openapi_document(), indent=2, sort_keys=True))
        return

    import uvicorn

    settings = settings_from_env()
    verifier = build_verifier(settings)
    api = build_api(settings, verifier)
    server = uvicorn.Server(
        uvicorn.Config(
            api.app,
            host=settings.api_host,
            port=settings.api_port,
            server_header=False,
            **jsonlogs.uvicorn_options(),
        )
    )

    def give_up() -> None:
        server.should_exit = True  # what uvicorn's own SIGTERM handler sets

    watch = DatabaseWatch(settings, give_up)
    try:
        watch.start()
        server.run()
    finally:
        watch.stop()
        api.close()
    if watch.failure is not None:
        raise watch.failure


@main.group("audit")
def audit_group() -> None:
    """The tamper-evident audit of manual decisions."""


@audit_group.command("verify")
@friendly_errors
def audit_verify_cmd() -> None:
    """Recompute the audit chain of manual decisions; exit 1 naming the first broken link."""
    from resolver.human.audit import verify_chain

    settings = settings_from_env()
    ensure_schema(settings.require_database_url(), settings.connect_timeout_seconds)
    store = open_store(settings)
    try:
        report = verify_chain(store)
    finally:
        store.close()
    if report.broken is not None:
        click.echo(f"audit chain broken at {report.broken.describe()}", err=True)
        sys.exit(EXIT_FAILED)
    click.echo(
        f"audit chain verified: {report.links} links ({report.pruned} with pruned facts); "
        f"head seq {report.head_seq} hash {report.head_hash}"
    )


@main.command("status")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@friendly_errors
def status_cmd(as_json: bool) -> None:
    """The backlog as /metrics reports it: open controls by queue and action type, ages."""
    settings = settings_from_env()
    ensure_schema(settings.require_database_url(), settings.connect_timeout_seconds)
    store = open_store(settings)
    try:
        snapshot = store.backlog_snapshot(DEFAULT_COUNT_CAP)
    finally:
        store.close()
    click.echo(
        json.dumps(status_document(snapshot), indent=2) if as_json else status_text(snapshot)
    )


def status_document(snapshot: BacklogSnapshot) -> dict[str, Any]:
    """The same figures as the backlog gauges of /metrics, from the same read model."""
    queues = snapshot.by_queue()
    return {
        "controls": snapshot.controls_by_status(),
        "queues": queues,
        "action_types": {
            f"{queue}/{action_type}": count
            for (queue, action_type), count in sorted(snapshot.dispatches.items())
        },
        "due": queues["due"],
        "count_cap": snapshot.count_cap,
        "capped": snapshot.capped,
        "oldest_claimable_age_seconds": snapshot.oldest_claimable_age_seconds,
        "oldest_manual_age_seconds": snapshot.oldest_manual_age_seconds,
    }


def status_text(snapshot: BacklogSnapshot) -> str:
    doc = status_document(snapshot)
    at_least = "at least " if doc["capped"] else ""
    lines = [f"{'queue':<10}{'controls':>10}"]
    lines += [f"{name:<10}{count:>10}" for name, count in doc["queues"].items()]
    lines += [f"  {key:<30}{count:>8}" for key, count in doc["action_types"].items()]
    lines.append(
        f"due now: {at_least}{doc['due']}"
        f"   oldest claimable: {doc['oldest_claimable_age_seconds']:.1f}s"
        f"   oldest manual: {doc['oldest_manual_age_seconds']:.1f}s"
    )
    return "\n".join(lines)


@main.command("demo")
@click.option("--count", default=3, show_default=True, help="Crashed executions per action type.")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=Path(".resolver-demo"),
    show_default=True,
    help="Private cluster directory when RESOLVER_DATABASE_URL is unset.",
)
@click.option("--verbose", is_flag=True, help="Also print the resolver's JSON log lines.")
@click.option(
    "--live",
    is_flag=True,
    help="Three `resolver run` replicas, a crashing executor, a killed replica and the "
    "operator console, watched live until Ctrl-C.",
)
@click.option("--replicas", default=3, show_default=True, type=click.IntRange(1, 8))
@click.option(
    "--simulate-seconds",
    default=20.0,
    show_default=True,
    type=click.FloatRange(1, 3600),
    help="(--live) How long the executor keeps dispatching.",
)
@click.option(
    "--rate",
    default=20.0,
    show_default=True,
    type=click.FloatRange(0.1, 500),
    help="(--live) Approved actions dispatched per second.",
)
@click.option("--api-port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option("--no-console", is_flag=True, help="(--live) Do not serve the operator console.")
@click.option(
    "--stop-after",
    type=click.FloatRange(1, 86_400),
    default=None,
    help="(--live) Stop by itself after this many seconds instead of waiting for Ctrl-C.",
)
@click.option("--seed", type=int, default=None, help="(--live) Seed of the executor's stories.")
@friendly_errors
def demo_cmd(
    count: int,
    data_dir: Path,
    verbose: bool,
    live: bool,
    replicas: int,
    simulate_seconds: float,
    rate: float,
    api_port: int,
    no_console: bool,
    stop_after: float | None,
    seed: int | None,
) -> None:
    """Seed crashed executions, resolve them, and show what happened (or watch it live)."""
    if not verbose:
        configure_logging("WARNING")  # the demo's own summary is the output
    if not live:
        from resolver.demo import simple as demo

        demo.run(count=count, data_dir=data_dir.resolve(), echo=click.echo)
        return
    from resolver.demo.live import LiveOptions

    options = LiveOptions(
        replicas=replicas,
        simulate_seconds=simulate_seconds,
        rate_per_second=rate,
        console=not no_console,
        api_port=api_port,
        stop_after_seconds=stop_after,
        seed=seed,
    )
    sys.exit(_run_live_demo(options, data_dir.resolve()))


def _run_live_demo(options: LiveOptions, data_dir: Path) -> int:
    from resolver.demo import view as demo_view
    from resolver.demo.live import run_live

    stop = threading.Event()
    # The replicas run in sessions of their own; closing the terminal (SIGHUP) must still
    # stop them in order rather than leave them running.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    close: Callable[[], None] = lambda: None  # noqa: E731
    if sys.stdout.isatty():
        render, close = demo_view.rich_renderer()
    else:
        render = demo_view.plain_renderer(sys.stdout)
    try:
        return run_live(options, data_dir=data_dir, render=render, stop=stop)
    finally:
        close()


# Retention lives in its own module (resolver/app/prune_cli.py) with its own error handling.
main.add_command(prune_cmd)
