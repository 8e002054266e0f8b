"""`resolver` command line: migrate, run, api, status, demo, prune.

The commands only: how they end on a failure is `exits` (one exit code per failure class for
every command), their start-up wait and stop signals are `lifecycle`, what they build comes
from the composition root.
"""

from __future__ import annotations

# isort: off
# First: it sets up the import phase below (see the module; `imports_done` ends it).
from resolver.app import bootstrap

# isort: on
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import structlog

from resolver import __version__
from resolver.app.composition import (
    build_api,
    build_replica,
    build_verifier,
    configure_logging,
    demo_replica,
    migration_policy,
    open_store,
    serve_endpoints,
)
from resolver.app.config import Settings, load_settings, provider_variables, unknown_variables
from resolver.app.exits import EXIT_CONFIG, EXIT_FAILED, exit_codes, fail
from resolver.app.lifecycle import (
    DatabaseWatch,
    ensure_schema,
    run_until_signalled,
    stop_on_signals,
    stop_signals_blocked,
    wait_for_database,
)
from resolver.app.prune_cli import prune_cmd
from resolver.app.status import status_document, status_text
from resolver.core.errors import ConfigError
from resolver.db import migrate as migrations
from resolver.telemetry import jsonlogs
from resolver.telemetry.metrics import DEFAULT_COUNT_CAP

if TYPE_CHECKING:
    from resolver.demo.live import LiveOptions

bootstrap.imports_done()

log = structlog.get_logger("resolver.cli")


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
    "--from",
    "from_revision",
    default=None,
    metavar="REVISION",
    help="With --sql: the script upgrades a database at REVISION (`resolver status` shows it) "
    "instead of building an empty schema.",
)
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
@exit_codes()
def migrate_cmd(
    offline: bool,
    revision: str,
    from_revision: str | None,
    downgrade_to: str | None,
    with_grants: bool,
) -> None:
    """Create or upgrade the schema (idempotent); --downgrade rolls it back.

    DDL waits at most RESOLVER_MIGRATION_LOCK_TIMEOUT_MS for a lock, then the attempt rolls
    back and is retried (RESOLVER_MIGRATION_ATTEMPTS in all).
    """
    if with_grants and downgrade_to is not None:
        raise click.UsageError("--grants applies to an upgraded schema; drop it with --downgrade")
    if from_revision is not None and not offline:
        raise click.UsageError("--from says where a printed script starts: use it with --sql")
    if offline:
        if downgrade_to is not None:
            raise click.UsageError("--sql prints an upgrade; drop it with --downgrade")
        click.echo(migrations.upgrade_sql(revision, from_revision))
        if with_grants:
            click.echo(migrations.grants_sql())
        return
    settings = settings_from_env()
    url, policy = settings.require_database_url(), migration_policy(settings)
    if downgrade_to is not None:
        migrations.downgrade(url, downgrade_to, policy)
    else:
        migrations.upgrade(url, revision, policy)
    current = migrations.current_revision(url, settings.connect_timeout_seconds, policy.pooler)
    click.echo(f"schema at revision {current}")
    if with_grants:
        migrations.apply_grants(url, policy)
        click.echo(f"grants applied ({migrations.GRANTS_FILE.name})")


@main.command("run")
@click.option("--once", is_flag=True, help="Run a single cycle and exit.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Provider config (YAML); defaults to RESOLVER_CONFIG.",
)
@exit_codes()
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
        if not wait_for_database(settings, replica.runtime.heartbeat):
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


@main.command("api")
@click.option(
    "--openapi",
    "print_openapi",
    is_flag=True,
    help="Print the API's OpenAPI document (not served over HTTP) and exit.",
)
@exit_codes()
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
@click.option(
    "--export",
    "exports",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="An export of `resolver prune --include-audit` covering a pruned range (repeatable).",
)
@click.option(
    "--public-keys",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="`kid=hex` lines of the API's fact-signing public keys, current and retired "
    "(default: RESOLVER_AUDIT_PUBLIC_KEYS_FILE); without them signatures are not checked.",
)
@click.option(
    "--anchor",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A head line an earlier verify printed, kept outside the database: the chain must "
    "still hold it.",
)
@exit_codes()
def audit_verify_cmd(
    exports: tuple[Path, ...], public_keys: Path | None, anchor: Path | None
) -> None:
    """Recompute the audit chain of manual decisions; exit 1 naming the first broken link.

    On success the last line is the head as JSON: store it elsewhere (a log shipper, an
    anchor file) and pass it back with --anchor."""
    from resolver.human.audit import ExportUnreadable, read_anchor, recorded_exports, verify_chain
    from resolver.human.signing import PublicKeysUnreadable, load_public_keys

    settings = settings_from_env()
    keys_file = public_keys or settings.audit_public_keys_file
    try:
        keys = load_public_keys(keys_file) if keys_file is not None else None
    except PublicKeysUnreadable as exc:
        raise click.BadParameter(str(exc), param_hint="--public-keys") from None
    try:
        anchored = read_anchor(anchor) if anchor is not None else None
    except ExportUnreadable as exc:
        raise click.BadParameter(str(exc), param_hint="--anchor") from None
    ensure_schema(
        settings.require_database_url(),
        settings.connect_timeout_seconds,
        settings.database_pooler,
    )
    store = open_store(settings)
    try:
        try:
            exported, problems = recorded_exports(store.audit, exports)
        except (ExportUnreadable, OSError) as exc:
            raise click.BadParameter(str(exc), param_hint="--export") from None
        report = verify_chain(store.audit, exported=exported, public_keys=keys, anchor=anchored)
    finally:
        store.close()
    if report.broken is not None:
        click.echo(f"audit chain broken at {report.broken.describe()}", err=True)
    for problem in problems:
        click.echo(problem, err=True)
    if report.broken is not None or problems:
        sys.exit(EXIT_FAILED)
    signatures = (
        "signatures verified"
        if report.signatures_checked
        else "signatures NOT checked (no --public-keys)"
    )
    click.echo(
        f"audit chain verified: {report.links} links ({report.pruned} with pruned facts, "
        f"{report.unsigned} recorded before facts were signed, {report.unbound} before facts "
        f"named their act); {signatures}; "
        f"head seq {report.head_seq} hash {report.head_hash}"
    )
    click.echo(report.head_line(int(time.time() * 1000)))


@audit_group.command("public-key")
@exit_codes()
def audit_public_key_cmd() -> None:
    """Print the `kid=hex` line of the API's fact-signing key (RESOLVER_AUDIT_SIGNING_KEY_FILE
    and RESOLVER_AUDIT_SIGNING_KID) for the public-keys file `resolver audit verify` reads."""
    from resolver.human.signing import FactSigner

    settings = settings_from_env()
    click.echo(FactSigner.from_file(*settings.require_audit_signing()).public_line())


@main.command("status")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@exit_codes()
def status_cmd(as_json: bool) -> None:
    """The backlog as /metrics reports it: open controls by queue and action type, ages."""
    settings = settings_from_env()
    ensure_schema(
        settings.require_database_url(),
        settings.connect_timeout_seconds,
        settings.database_pooler,
    )
    store = open_store(settings)
    try:
        snapshot = store.backlog.backlog_snapshot(DEFAULT_COUNT_CAP)
    finally:
        store.close()
    click.echo(
        json.dumps(status_document(snapshot), indent=2) if as_json else status_text(snapshot)
    )


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
@click.option(
    "--object-store",
    default=None,
    metavar="URL",
    help="Also settle an action type from receipt objects in this S3-compatible store "
    "(needs the s3 extra; credentials from AWS_* variables or a profile).",
)
@click.option("--object-bucket", default="receipts", show_default=True)
@exit_codes()
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
    object_store: str | None,
    object_bucket: str,
) -> None:
    """Seed crashed executions, resolve them, and show what happened (or watch it live)."""
    if not verbose:
        configure_logging("WARNING")  # the demo's own summary is the output
    if live and object_store is not None:
        raise click.UsageError("--object-store goes with the demo without --live")
    if not live:
        from resolver.demo import simple as demo

        demo.run(
            count=count,
            data_dir=data_dir.resolve(),
            echo=click.echo,
            build_replica=demo_replica,
            object_store=object_store,
            object_bucket=object_bucket,
        )
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
    stop_on_signals(stop)
    close: Callable[[], None] = lambda: None  # noqa: E731
    if sys.stdout.isatty():
        render, close = demo_view.rich_renderer()
    else:
        render = demo_view.plain_renderer(sys.stdout)
    try:
        return run_live(options, data_dir=data_dir, render=render, stop=stop)
    finally:
        close()


# Retention's command lives in its own module (resolver/app/prune_cli.py).
main.add_command(prune_cmd)
