"""Retention: prune settled dispatches in bounded batches, exporting audit facts first.

The rules (what is settled, what is an audit fact, what may go) live in the database's
prune functions; this module drives them: cut-off on the database clock,
the export written, flushed and fsynced before anything it lists is deleted, one short
transaction per batch, a run row that counts every committed batch.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, Protocol

import msgspec

from resolver.core.errors import LockTimeout, ResolverError

MAX_BATCH = 10_000
_DURATION = re.compile(r"(\d+)(w|d|h|m|s)")
_UNIT_MS = {"w": 604_800_000, "d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1_000}


class InvalidDuration(ResolverError, ValueError):
    """A duration is not of the form `30d`, `12h`, `1d12h`, `90m`, `45s` or `2w`."""


class ExportFailed(ResolverError):
    """The export could not be written or made durable; nothing was deleted."""


def parse_duration_ms(text: str) -> int:
    """`1d12h` -> 129600000. Units w, d, h, m, s; at least one; the total must be positive."""
    value = text.strip().lower()
    if not value or _DURATION.sub("", value):
        raise InvalidDuration(
            f"{text!r} is not a duration: use numbers with units (w, d, h, m, s), e.g. 30d, 1d12h"
        )
    total = sum(int(n) * _UNIT_MS[unit] for n, unit in _DURATION.findall(value))
    if total <= 0:
        raise InvalidDuration(f"{text!r} is not a positive duration")
    return total


class PruneCandidate(msgspec.Struct, frozen=True):
    dispatch_id: str
    audited: bool
    """Has a resolution (and, for a manual one, an authorization): audit facts."""
    record: dict[str, Any]
    """The export document: identity, terminal state, resolution, authorization."""


class BatchResult(msgspec.Struct, frozen=True):
    dispatches: int
    """Settled dispatches whose execution, control and evidence went."""
    audit: int
    """Dispatches whose audit facts (identity, resolution, authorization) went."""
    evidence: int
    """Provider evidence rows removed."""
    remnants: int = 0
    """Audit remnants (identity and resolution left by an earlier run) removed whole."""
    outcomes: int = 0
    """Outcome feed records removed with the dispatches they report."""
    outcomes_unread: int = 0
    """Of those, records a registered consumer had not read (a run past consumers only)."""


class ConsumerHold(msgspec.Struct, frozen=True):
    """A registered outcome consumer and what it holds back from a run with this cut-off."""

    consumer: str
    cursor: str
    saved_at_ms: int
    holding: int
    """Settled dispatches older than the cut-off with an outcome record after its cursor."""


class RunTotals(msgspec.Struct, frozen=True):
    dispatches: int
    audit: int
    evidence: int


class PruneSummary(msgspec.Struct, frozen=True):
    """Every recorded run, as /metrics shows it."""

    dispatches_pruned: int
    audit_pruned: int
    last_batch_at_ms: int | None
    last_finished_at_ms: int | None


class RetentionStore(Protocol):
    def db_now_ms(self) -> int: ...

    def candidates(
        self,
        cutoff_ms: int,
        include_audit: bool,
        after: str,
        limit: int,
        past_consumers: bool = False,
    ) -> list[PruneCandidate]: ...

    def begin(
        self,
        cutoff_ms: int,
        include_audit: bool,
        export_digest: str | None,
        actor: str,
        past_consumers: bool = False,
    ) -> int: ...

    def consumers(self, cutoff_ms: int) -> list[ConsumerHold]: ...

    def batch(
        self, run_id: int, limit: int, dispatch_ids: Sequence[str] | None, lock_timeout_ms: int
    ) -> BatchResult: ...

    def finish(self, run_id: int) -> RunTotals: ...


class PruneOptions(msgspec.Struct, frozen=True):
    older_than_ms: int
    batch: int = 500
    dry_run: bool = False
    include_audit: bool = False
    export: BinaryIO | None = None
    actor: str = "resolver-prune"
    lock_timeout_ms: int = 2_000
    lock_retries: int = 5
    duty_cycle: float = 1.0
    """Fraction of wall time spent in batches: after a batch that took t, rest
    t * (1 - duty_cycle) / duty_cycle. A busy database makes batches slower and the rests
    longer, so a long prune leaves most of the database to the resolver."""
    past_consumers: bool = False
    """Prune outcome records a registered consumer has not read yet (the run counts them);
    without it, a dispatch with such a record stays for a later run."""

    def __post_init__(self) -> None:
        if not 1 <= self.batch <= MAX_BATCH:
            raise ValueError(f"batch must be between 1 and {MAX_BATCH}")
        if self.include_audit and self.export is None and not self.dry_run:
            raise ValueError("--include-audit deletes audit facts: it needs --export")
        if self.older_than_ms <= 0:
            raise ValueError("the retention period must be positive")
        if not 0 < self.duty_cycle <= 1:
            raise ValueError("the duty cycle must be in (0, 1]")


class PruneReport(msgspec.Struct):
    cutoff_ms: int
    dry_run: bool
    past_consumers: bool = False
    run_id: int | None = None
    candidates: int = 0
    audited_candidates: int = 0
    dispatches: int = 0
    audit: int = 0
    evidence: int = 0
    batches: int = 0
    export_digest: str | None = None
    export_lines: int = 0
    skipped: int = 0
    """Exported dispatches another transaction held (or that changed) during the run:
    still in the database, they go in a later run."""
    remnants: int = 0
    outcomes: int = 0
    outcomes_unread: int = 0
    """Outcome records a registered consumer had not read, pruned by a run past consumers."""
    consumers: list[ConsumerHold] = msgspec.field(default_factory=list)
    """The registered consumers: after a run that holds back, what each still holds back;
    before a run past consumers, what each was about to lose."""

    @property
    def held_for_consumers(self) -> int:
        """Settled dispatches old enough to go that the slowest consumer keeps."""
        return max((c.holding for c in self.consumers), default=0)

    def add(self, result: BatchResult) -> None:
        self.batches += 1
        self.dispatches += result.dispatches
        self.audit += result.audit
        self.evidence += result.evidence
        self.remnants += result.remnants
        self.outcomes += result.outcomes
        self.outcomes_unread += result.outcomes_unread

    def document(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "run_id": self.run_id,
            "cutoff_ms": self.cutoff_ms,
            "candidates": self.candidates,
            "audited_candidates": self.audited_candidates,
            "dispatches_pruned": self.dispatches,
            "audit_pruned": self.audit,
            "evidence_pruned": self.evidence,
            "remnants_pruned": self.remnants,
            "batches": self.batches,
            "export_sha256": self.export_digest,
            "export_lines": self.export_lines,
            "skipped": self.skipped,
            "outcomes_pruned": self.outcomes,
            "past_consumers": self.past_consumers,
            "outcomes_unread_pruned": self.outcomes_unread,
            "held_for_consumers": 0 if self.past_consumers else self.held_for_consumers,
            "consumers": [msgspec.to_builtins(c) for c in self.consumers],
        }


BatchHook = Callable[[int, BatchResult], None]


def prune(
    store: RetentionStore,
    options: PruneOptions,
    *,
    on_batch: BatchHook | None = None,
    pause: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> PruneReport:
    """One prune run. With an export, everything is exported and made durable first, and
    only the exported dispatches are then deleted, batch by batch."""
    cutoff_ms = store.db_now_ms() - options.older_than_ms
    report = PruneReport(
        cutoff_ms=cutoff_ms, dry_run=options.dry_run, past_consumers=options.past_consumers
    )
    if options.dry_run:
        for candidate in _all_candidates(store, cutoff_ms, options):
            report.candidates += 1
            report.audited_candidates += candidate.audited
        report.consumers = store.consumers(cutoff_ms)
        return report
    if options.past_consumers:
        # Said before anything goes: which consumers lose records they have not read.
        report.consumers = store.consumers(cutoff_ms)
    ids: list[str] | None = None
    if options.export is not None:
        ids = _export(store, cutoff_ms, options, options.export, report)
    report.run_id = store.begin(
        cutoff_ms,
        options.include_audit,
        report.export_digest,
        options.actor,
        options.past_consumers,
    )
    _run_batches(store, options, report, ids, on_batch, pause, clock)
    if ids is not None:
        report.candidates = len(ids)
        report.skipped = len(ids) - report.dispatches - report.remnants
    store.finish(report.run_id)
    if not options.past_consumers:
        report.consumers = store.consumers(cutoff_ms)
    return report


def _run_batches(
    store: RetentionStore,
    options: PruneOptions,
    report: PruneReport,
    ids: list[str] | None,
    on_batch: BatchHook | None,
    pause: Callable[[float], None],
    clock: Callable[[], float],
) -> None:
    """Batches until the exported ids are done, or (no export) until one takes nothing."""
    assert report.run_id is not None
    rest_per_busy = (1 - options.duty_cycle) / options.duty_cycle
    for chunk in _chunks(ids, options.batch):
        started = clock()
        result = _batch_with_retries(store, report.run_id, chunk, options, pause)
        busy = clock() - started
        report.add(result)
        if on_batch is not None:
            on_batch(report.run_id, result)
        if chunk is None and result.dispatches == 0:
            return
        if rest_per_busy:
            pause(busy * rest_per_busy)


def _all_candidates(
    store: RetentionStore, cutoff_ms: int, options: PruneOptions
) -> Iterator[PruneCandidate]:
    after = ""
    while True:
        page = store.candidates(
            cutoff_ms, options.include_audit, after, options.batch, options.past_consumers
        )
        yield from page
        if len(page) < options.batch:
            return
        after = page[-1].dispatch_id


def _export(
    store: RetentionStore,
    cutoff_ms: int,
    options: PruneOptions,
    stream: BinaryIO,
    report: PruneReport,
) -> list[str]:
    digest = hashlib.sha256()
    ids: list[str] = []
    try:
        for candidate in _all_candidates(store, cutoff_ms, options):
            line = export_line(candidate.record)
            stream.write(line)
            digest.update(line)
            ids.append(candidate.dispatch_id)
            report.audited_candidates += candidate.audited
        make_durable(stream)
    except OSError as exc:
        raise ExportFailed(f"cannot write the export: {exc.strerror or exc}") from exc
    report.export_digest = digest.hexdigest()
    report.export_lines = len(ids)
    return ids


def export_line(record: dict[str, Any]) -> bytes:
    """One JSON Lines record: canonical (sorted keys, no spaces), UTF-8, newline-terminated."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8") + b"\n"


def make_durable(stream: BinaryIO) -> None:
    """Flush and fsync. A pipe or terminal cannot be fsynced: its reader owns durability."""
    stream.flush()
    try:
        os.fsync(stream.fileno())
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise


def export_path(path: str, now: Callable[[], float] = time.time) -> str:
    """`path` itself, or for an existing directory a new file in it named after the UTC time
    (a CronJob's mounted volume gets one file per run)."""
    if not os.path.isdir(path):
        return path
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now()))
    return os.path.join(path, f"resolver-prune-{stamp}.jsonl")


def open_export(path: str) -> BinaryIO:
    """A new file (never an existing one: an earlier export is evidence), its directory
    entry made durable too."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise ExportFailed(f"{path} exists; an export is never overwritten") from exc
    except OSError as exc:
        raise ExportFailed(f"cannot create {path}: {exc.strerror}") from exc
    directory = os.path.dirname(os.path.abspath(path))
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass  # some filesystems refuse a directory fsync; the file's own fsync still runs
    return os.fdopen(fd, "wb")


def _chunks(ids: list[str] | None, size: int) -> Iterator[list[str] | None]:
    if ids is None:
        while True:
            yield None
    else:
        for start in range(0, len(ids), size):
            yield ids[start : start + size]


def _batch_with_retries(
    store: RetentionStore,
    run_id: int,
    chunk: list[str] | None,
    options: PruneOptions,
    pause: Callable[[float], None],
) -> BatchResult:
    for attempt in range(options.lock_retries + 1):
        try:
            return store.batch(run_id, options.batch, chunk, options.lock_timeout_ms)
        except LockTimeout:
            if attempt == options.lock_retries:
                raise
            # Someone holds a row the batch must wait for (a late evidence insert): the
            # batch rolled back whole; let them finish.
            pause(min(0.1 * 2**attempt, 2.0))
    raise AssertionError("unreachable")
