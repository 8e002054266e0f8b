"""Structured log lines of the cycle: a subscriber of the cycle events."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from resolver.core.domain import CommitReport, ItemOutcome, LateRecord, ProviderFailure
from resolver.core.errors import StorageUnavailable
from resolver.core.events import CycleEvents, CycleReport, InspectedPage, outcome_label

# Outcomes an operator acts on (a person decides, an escalation, a lost fence) keep a line of
# their own at info; the others are listed by dispatch id in the page's `recovery_cycle`
# line, with a line each at debug.
ATTENTION_OUTCOMES = frozenset({"manual", "escalated", "fence_rejected"})


class CycleLog(CycleEvents):
    """Provider failures, one `recovery_cycle` line per page naming every dispatch id by
    outcome (the audit trail an operator greps by dispatch id), a `recovery_outcome` line
    per item that needs a human or lost its fence (every item at debug), storage retries."""

    def __init__(self, logger: Any) -> None:
        self._root = logger
        self._log = logger
        self._owner: str | None = None
        self._page: dict[str, list[str]] = {}

    def cycle_started(self, owner: str) -> None:
        if owner != self._owner:  # bound once per replica, not per cycle
            self._owner, self._log = owner, self._root.bind(replica_id=owner)

    def inspected(self, page: InspectedPage) -> None:
        for call in page.calls:
            if call.failure is ProviderFailure.TIMEOUT:
                self._log.warning(
                    "provider_timeout", provider=call.label, items=len(call.identities)
                )
            elif call.failure is ProviderFailure.ERROR:
                self._log.warning(
                    "provider_error", provider=call.label, error=type(call.error).__name__
                )
        self._provider_failures(page)

    def _provider_failures(self, page: InspectedPage) -> None:
        """One line per provider, action type and failure kind of the page (one per cycle),
        however many items it failed for: `error` when a human must act."""
        failed: dict[tuple[str, str, ProviderFailure, str], int] = {}
        for call in page.calls:
            if call.failure is not None:
                for identity in call.identities:
                    key = (call.label, identity.action_type, call.failure, call.cause or "")
                    failed[key] = failed.get(key, 0) + 1
        for (provider, action_type, kind, cause), items in sorted(failed.items()):
            emit = self._log.error if kind.needs_operator else self._log.warning
            # `cause` (the SQLSTATE or HTTP status) is what the runbook tells the operator
            # to read; it is absent when the source gave none (a timeout, a refused connect).
            emit(
                "provider_failed",
                provider=provider,
                action_type=action_type,
                kind=kind.value,
                items=items,
                **({"cause": cause} if cause else {}),
            )

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        page: dict[str, list[str]] = {}
        every_item = _debug_enabled(self._log)
        for outcome in outcomes:
            identity = outcome.item.identity
            label = outcome_label(outcome, report)
            page.setdefault(label, []).append(identity.dispatch_id)
            attention = label in ATTENTION_OUTCOMES
            if not (attention or every_item):
                continue  # listed in the page's line; no per-item call at info
            line = self._log.info if attention else self._log.debug
            line(
                "recovery_outcome",
                dispatch_id=identity.dispatch_id,
                action_type=identity.action_type,
                finding=outcome.finding.kind.value,
                outcome=label,
                committed=identity.dispatch_id in report.accepted,
            )
        self._page = page

    def cycle_completed(self, report: CycleReport, seconds: float) -> None:
        if report.findings:  # a page was inspected and committed
            self._log.info(
                "recovery_cycle",
                claimed=report.claimed,
                accepted=len(report.accepted),
                rejected=len(report.rejected),
                findings={kind.value: n for kind, n in report.findings.items()},
                dispatch_ids=self._page,
            )
        self._page = {}

    def storage_retry(self, error: StorageUnavailable, failures: int, delay_seconds: float) -> None:
        self._log.warning(
            "storage_unavailable", error=str(error), retry_in_seconds=round(delay_seconds, 2)
        )

    def late_evidence(self, records: Sequence[LateRecord]) -> None:
        # A contradiction is what a person must act on: a warning, one line per dispatch.
        for record in records:
            if record.recorded:
                line = self._log.warning if record.contradicts else self._log.info
                line(
                    "late_evidence_contradicts" if record.contradicts else "late_evidence_agrees",
                    dispatch_id=record.watch.identity.dispatch_id,
                    action_type=record.watch.identity.action_type,
                    decided=record.watch.decided_outcome.value,
                    finding=record.finding.value,
                )


def _debug_enabled(logger: Any) -> bool:
    """Whether debug lines are written; a logger that cannot say is asked every time."""
    is_enabled_for = getattr(logger, "is_enabled_for", None)
    return True if is_enabled_for is None else bool(is_enabled_for(logging.DEBUG))
