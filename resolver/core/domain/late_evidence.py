"""Late evidence: verified findings observed after a manual decision, recorded beside it."""

from __future__ import annotations

import msgspec

from resolver.core.domain.findings import DispatchIdentity, Finding
from resolver.core.domain.sets import ExecutionState, FindingKind


class LateEvidence(msgspec.Struct, frozen=True):
    """A verified finding observed after a manual decision, recorded beside it: the terminal
    state never changes; `agrees` says whether it says what the decision said."""

    finding: FindingKind
    agrees: bool
    evidence_digest: str
    observed_at_ms: int


class LateWatch(msgspec.Struct, frozen=True):
    """One claimed watch: a manual decision's dispatch the provider looks at again."""

    identity: DispatchIdentity
    watch_token: str
    decided_outcome: ExecutionState
    observations: int


class LateObservation(msgspec.Struct, frozen=True):
    """What one look found, as the fenced record takes it."""

    watch: LateWatch
    finding: Finding
    observation_id: str
    next_look_ms: int


class LateRecord(msgspec.Struct, frozen=True):
    """What the record of one observation did: `recorded` late evidence (then `agrees`), or
    only scheduled the next look. Absent from a report: its fence did not hold."""

    watch: LateWatch
    finding: FindingKind
    recorded: bool
    agrees: bool | None
    observation_id: str = ""

    @property
    def contradicts(self) -> bool:
        return self.recorded and self.agrees is False
