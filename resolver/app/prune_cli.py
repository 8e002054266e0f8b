"""`resolver prune`: the retention command; its failures end as every command's do (`exits`)."""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import BinaryIO

import click
import structlog

from resolver.app.composition import open_retention
from resolver.app.config import load_settings
from resolver.app.exits import exit_codes
from resolver.retention import pruning as retention

log = structlog.get_logger("resolver.prune")
# Every committed batch was whole and nothing exported was lost, whatever the failure.
RETRY_HINT = "committed batches stand, run again"


def _duration(_ctx: click.Context, _param: click.Parameter, value: str) -> int:
    try:
        return retention.parse_duration_ms(value)
    except retention.InvalidDuration as exc:
        raise click.BadParameter(str(exc)) from None


def _default_actor() -> str:
    return os.environ.get("HOSTNAME") or socket.gethostname()


@click.command("prune")
@click.option(
    "--older-than",
    "older_than_ms",
    required=True,
    callback=_duration,
    metavar="DURATION",
    help="Prune dispatches settled longer ago than this (e.g. 90d, 12h, 1d12h).",
)
@click.option("--dry-run", is_flag=True, help="Count what would go; write nothing.")
@click.option(
    "--batch",
    default=500,
    show_default=True,
    type=click.IntRange(1, retention.MAX_BATCH),
    help="Dispatches per batch; each batch is its own short transaction.",
)
@click.option(
    "--export",
    "export_path",
    default=None,
    metavar="FILE|-",
    help="Write one JSON line per pruned dispatch (identity, resolution, authorization) "
    "to a new FILE (in a DIRECTORY: a new file named after the UTC time), or stdout for -, "
    "fsynced before anything is deleted.",
)
@click.option(
    "--include-audit",
    is_flag=True,
    help="Delete the audit facts too (identity, resolution, authorization); needs --export.",
)
@click.option(
    "--lock-timeout",
    "lock_timeout_ms",
    default=2_000,
    show_default=True,
    type=click.IntRange(10, 600_000),
    metavar="MS",
    help="lock_timeout of each batch; a batch that hits it rolls back whole and is retried.",
)
@click.option(
    "--duty-cycle",
    default=0.1,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True),
    metavar="FRACTION",
    help="Share of wall time spent in batches; the rest is pauses sized to the last batch, "
    "so the resolver keeps most of a busy database.",
)
@click.option(
    "--past-consumers",
    is_flag=True,
    help="Also prune outcome records a registered outcome consumer has not read yet (the run "
    "names each consumer and counts them); by default such dispatches stay for a later run.",
)
@click.option("--actor", default=None, help="Who runs the prune, recorded with the run.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@exit_codes(retry_hint=RETRY_HINT)
def prune_cmd(
    older_than_ms: int,
    dry_run: bool,
    batch: int,
    export_path: str | None,
    include_audit: bool,
    lock_timeout_ms: int,
    duty_cycle: float,
    past_consumers: bool,
    actor: str | None,
    as_json: bool,
) -> None:
    """Remove settled dispatches (terminal execution, resolved control) older than a cut-off.

    Open and manual dispatches are never touched. Audit facts stay unless --include-audit.
    """
    if include_audit and export_path is None and not dry_run:
        raise click.UsageError("--include-audit deletes audit facts: it needs --export FILE|-")
    if dry_run and export_path is not None:
        raise click.UsageError("--dry-run writes nothing: drop --export")
    settings = load_settings()
    # The summary goes to stderr when the export owns stdout.
    echo_err = export_path == "-"
    stream = _open_export(export_path)
    try:
        with open_retention(settings) as store:
            options = retention.PruneOptions(
                older_than_ms=older_than_ms,
                batch=batch,
                dry_run=dry_run,
                include_audit=include_audit,
                export=stream,
                actor=(actor or _default_actor())[:128],
                lock_timeout_ms=lock_timeout_ms,
                duty_cycle=duty_cycle,
                past_consumers=past_consumers,
            )
            report = retention.prune(store, options, on_batch=_log_batch)
    finally:
        if stream is not None and export_path != "-":
            stream.close()
    if report.export_digest is not None and not (as_json and not echo_err):
        # With --json the digest is in the document (export_sha256): stdout stays one object.
        click.echo(f"export sha256 {report.export_digest}", err=echo_err)
    _log_consumers(report)
    click.echo(
        json.dumps(report.document(), indent=2) if as_json else _summary(report), err=echo_err
    )


def _open_export(path: str | None) -> BinaryIO | None:
    if path is None:
        return None
    if path == "-":
        return sys.stdout.buffer
    target = retention.export_path(path)
    stream = retention.open_export(target)
    click.echo(f"export file {target}", err=True)
    return stream


def _log_batch(run_id: int, result: retention.BatchResult) -> None:
    log.info(
        "prune_batch",
        run_id=run_id,
        dispatches=result.dispatches,
        audit=result.audit,
        evidence=result.evidence,
        remnants=result.remnants,
        outcomes=result.outcomes,
        outcomes_unread=result.outcomes_unread,
    )


def _log_consumers(report: retention.PruneReport) -> None:
    for consumer in report.consumers:
        if consumer.holding:
            log.warning(
                "prune_passed_consumer" if report.past_consumers else "prune_held_for_consumer",
                consumer=consumer.consumer,
                cursor=consumer.cursor,
                saved_at_ms=consumer.saved_at_ms,
                dispatches=consumer.holding,
            )


def _consumer_lines(report: retention.PruneReport) -> str:
    behind = [c for c in report.consumers if c.holding]
    if not behind:
        return ""
    if report.past_consumers:
        head = (
            f"\n{report.outcomes_unread} outcome records pruned before these consumers read them:"
        )
    elif report.dry_run:
        head = "\nheld back for outcome consumers that have not read them yet:"
    else:
        head = (
            f"\n{report.held_for_consumers} settled dispatches stay for outcome consumers "
            "that have not read them yet (--past-consumers prunes them):"
        )
    lines = [
        f"  {c.consumer} at {c.cursor}, saved at {c.saved_at_ms}: {c.holding} dispatches"
        for c in behind
    ]
    return "\n".join([head, *lines])


def _summary(report: retention.PruneReport) -> str:
    return _run_line(report) + _consumer_lines(report)


def _run_line(report: retention.PruneReport) -> str:
    if report.dry_run:
        return (
            f"dry run: {report.candidates} dispatches settled before cut-off "
            f"{report.cutoff_ms} would be pruned ({report.audited_candidates} with audit facts)"
        )
    line = (
        f"prune run {report.run_id}: {report.dispatches} dispatches pruned, "
        f"{report.audit} with their audit facts, {report.evidence} evidence rows, "
        f"{report.batches} batches"
    )
    if report.remnants:
        line += f", {report.remnants} audit remnants"
    if report.outcomes:
        line += f", {report.outcomes} outcome records"
    if report.skipped:
        line += f"; {report.skipped} exported dispatches were busy and stay for a later run"
    return line
