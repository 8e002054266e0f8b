"""Recovery: the items a replica claims, what the page commit takes and reports, and the
backlog it reads."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from resolver.core.domain.findings import DispatchIdentity, Finding
from resolver.core.domain.sets import ControlStatus


class ClaimedItem(msgspec.Struct, frozen=True):
    """One recovery control claimed by this replica, with the identity for providers."""

    identity: DispatchIdentity
    recovery_token: str
    recovery_version: int
    execution_version: int
    finding_count: int
    claimed_at_ms: int | None = None
    """The database clock at the claim: lets a history checker prove no live lease was taken."""
    next_due_at_ms: int | None = None
    """When the next armed control falls due after this claim (None: none is armed past it):
    how long a replica may sleep after a partial page."""


# Most controls one cycle claims: keeps every cycle's work (a claim, a provider call, a
# commit) bounded. Settings refuse more; the claim statement is rendered for no more.
PAGE_SIZE_HARD_CAP = 64


class ItemOutcome(msgspec.Struct, frozen=True):
    """A finding to commit for one claimed item, under that item's fences."""

    item: ClaimedItem
    finding: Finding
    retry_delay_ms: int
    mutation_id: str
    escalate_after_ms: int | None = None
    """How long a non-final finding may last, counted from the case's first inspection,
    before the page commit sends the control to the manual queue (None: never)."""


class CommitReport(msgspec.Struct, frozen=True):
    """What a page commit wrote: each accepted dispatch with the status the database routed its
    control to (resolver_finding_status decides; the replica only reports it)."""

    routed: Mapping[str, ControlStatus]
    rejected: frozenset[str]
    accepted: frozenset[str] = frozenset()
    """The dispatches of `routed`, as a set (built once: subscribers test it per item);
    always derived from `routed`, whatever a caller passes."""
    escalated: frozenset[str] = frozenset()
    """The dispatches of `routed` the database sent to a person because their non-final
    finding outlasted its window (manual reason `evidence_window_elapsed`), as it answered."""

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "accepted", frozenset(self.routed))


BACKLOG_QUEUES: tuple[str, ...] = ("due", "waiting", "manual")


class BacklogSnapshot(msgspec.Struct, frozen=True):
    """Open recovery work: the one read model of `/metrics` and `resolver status`.

    Counts are capped at `count_cap` per partial index (armed, manual), so a runaway backlog
    costs a bounded read; the ages are exact whatever the backlog.
    """

    db_now_ms: int
    count_cap: int
    dispatches: dict[tuple[str, str], int] = msgspec.field(default_factory=dict)
    """Open dispatches by (queue, action_type)."""
    oldest_claimable_at_ms: int | None = None
    oldest_manual_at_ms: int | None = None
    open_proposals: int = 0
    """Two-person proposals waiting for a second person (neither closed nor expired)."""
    oldest_open_proposal_at_ms: int | None = None

    def controls_by_status(self) -> dict[str, int]:
        """Open controls by stored status: armed (due or waiting) and manual."""
        queues = self.by_queue()
        return {"armed": queues["due"] + queues["waiting"], "manual": queues["manual"]}

    @property
    def capped(self) -> bool:
        """True when a count stopped at the cap: the real figures are then at least these."""
        return any(n >= self.count_cap for n in self.controls_by_status().values())

    def by_queue(self) -> dict[str, int]:
        """Every queue, zero when empty, so the series exist before the first backlog."""
        totals = dict.fromkeys(BACKLOG_QUEUES, 0)
        for (queue, _action_type), count in self.dispatches.items():
            totals[queue] = totals.get(queue, 0) + count
        return totals

    @property
    def oldest_claimable_age_seconds(self) -> float:
        return _age_seconds(self.db_now_ms, self.oldest_claimable_at_ms)

    @property
    def oldest_manual_age_seconds(self) -> float:
        return _age_seconds(self.db_now_ms, self.oldest_manual_at_ms)

    @property
    def oldest_open_proposal_age_seconds(self) -> float:
        return _age_seconds(self.db_now_ms, self.oldest_open_proposal_at_ms)


def _age_seconds(now_ms: int, since_ms: int | None) -> float:
    return 0.0 if since_ms is None else max(0, now_ms - since_ms) / 1000.0
