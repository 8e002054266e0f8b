"""Domain vocabulary: every value type the modules pass each other, in one module.

States, findings, identities and the canonical action digest; what the reconciler commits and
the backlog it reads; executions, grants and manual decisions as stored and as decided. This
module imports nothing of the resolver but `errors`, so any module may import it without a
cycle. Settings of one component (`WorkerSettings`, `ReconcilerSettings`) and the private
types of one module stay with that module.

Every value type is a frozen `msgspec.Struct`: immutable and compared by value like a frozen
dataclass, but its class is built in C (a frozen dataclass generates and compiles its methods
at import, a large share of the start-up) and an instance costs a tenth of a frozen
dataclass's (which sets each field through `object.__setattr__`), for several instances per
resolution. Copy one with a change by `msgspec.structs.replace`.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal, get_args

import msgspec

from resolver.core.errors import InvalidDispatch

# The domain's sets and shapes, each spelled once in Python here and once in the database
# (resolver/db/schema/functions/01_recovery_core.sql); tests/integration/schema/test_domain_sets.py
# compares the two, and the console's copies (resolver/human/console/app.js) with these.

# The one shape of an identifier, in the same text as the database's resolver_is_id; request
# models validate with it as it is. In Python it ends in `\Z`, not `$`: `$` also matches
# before a trailing newline, which PostgreSQL's check would then refuse at commit time.
ID_REGEX = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
ID_PATTERN = re.compile(ID_REGEX.removesuffix("$") + r"\Z")
# The shape of an action type, in the same text as resolver_dispatch_create's check.
ACTION_TYPE_REGEX = r"^[a-z][a-z0-9_.-]{0,63}$"
ACTION_TYPE_PATTERN = re.compile(ACTION_TYPE_REGEX.removesuffix("$") + r"\Z")
RESULT_CODE_PATTERN = re.compile(r"^[a-z0-9_.\-]{1,64}\Z")
REASON_CODE_PATTERN = RESULT_CODE_PATTERN
HEX64_PATTERN = re.compile(r"^[0-9a-f]{64}\Z")
CAUSE_PATTERN = re.compile(r"^[a-z0-9_]{1,32}\Z")
# The same rules as JSON Schema patterns for request models (ECMA regex has no `\Z`; the
# request validator matches whole strings, so `$` cannot pass a trailing newline there).
REASON_CODE_REGEX = r"^[a-z0-9_.\-]{1,64}$"
HEX64_REGEX = r"^[0-9a-f]{64}$"
# PostgreSQL bigint: a larger number would fail in the database, so it is refused before.
BIGINT_MAX = 2**63 - 1

# What was approved, for people: the same rules as resolver_action_summary_problem
# (resolver/db/schema/functions/01_recovery_core.sql), checked here first for a clear error in the
# executor's own process; the database checks them again.
SUMMARY_MAX_BYTES = 2048
SUMMARY_MAX_FACTS = 8
_SUMMARY_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_SUMMARY_SECRET_LABEL = re.compile(
    r"(passw|secret|token|api.?key|private.?key|credential|authori[sz]ation|cookie)", re.I
)
_SUMMARY_SECRET_VALUE = re.compile(
    r"(-----BEGIN|^(bearer|basic)\s|eyJ[A-Za-z0-9_-]+\.|://[^/@\s]*:[^/@\s]*@|[A-Za-z0-9+/=_]{32})",
    re.I,
)


class ExecutionState(StrEnum):
    LEASED = "leased"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"


# The states an execution never leaves (the database's resolver_terminal_states()).
TerminalState = Literal["succeeded", "failed", "blocked"]
TERMINAL_STATES: frozenset[ExecutionState] = frozenset(map(ExecutionState, get_args(TerminalState)))


class ControlStatus(StrEnum):
    ARMED = "armed"
    MANUAL = "manual"
    RESOLVED = "resolved"


class FindingKind(StrEnum):
    VERIFIED_SUCCEEDED = "verified_succeeded"
    VERIFIED_FAILED = "verified_failed"
    STILL_RUNNING = "still_running"
    MISSING = "missing"
    CONFLICT = "conflict"
    UNSUPPORTED = "unsupported"
    UNAVAILABLE = "unavailable"

    @property
    def is_verified(self) -> bool:
        return self in _VERIFIED_KINDS


# The status each finding sends its control to: the database's routing rule
# (resolver_finding_status), which the page commit applies; Python reads it from here only to
# validate configuration and to name what a commit did, never to route.
FINDING_ROUTE: Mapping[FindingKind, ControlStatus] = {
    FindingKind.VERIFIED_SUCCEEDED: ControlStatus.RESOLVED,
    FindingKind.VERIFIED_FAILED: ControlStatus.RESOLVED,
    FindingKind.STILL_RUNNING: ControlStatus.ARMED,
    FindingKind.MISSING: ControlStatus.ARMED,
    FindingKind.CONFLICT: ControlStatus.MANUAL,
    FindingKind.UNSUPPORTED: ControlStatus.MANUAL,
    FindingKind.UNAVAILABLE: ControlStatus.ARMED,
}
_VERIFIED_KINDS = frozenset(
    k for k, route in FINDING_ROUTE.items() if route is ControlStatus.RESOLVED
)


# The manual reason of a control whose non-final finding outlasted its escalation window.
ESCALATION_REASON = "evidence_window_elapsed"
# The findings an escalation window may be configured for: those the routing re-arms (neither
# verified nor already waiting for a human). Read to validate configuration only: the commit
# itself decides and reports each escalation.
ESCALATABLE = frozenset(k for k, route in FINDING_ROUTE.items() if route is ControlStatus.ARMED)


class ProviderFailure(StrEnum):
    """Why an evidence provider could not answer (its finding is then `unavailable`).

    `outage` and `timeout` are transient: the source is down, slow or restarting, and the
    backoff retries. `configuration` will not heal by waiting: a missing GRANT, a broken
    query, an undefined table or column, a credential the source refuses (HTTP 401/403).
    `error` is a provider that raised: a bug, reported like a configuration error.
    """

    OUTAGE = "outage"
    TIMEOUT = "timeout"
    CONFIGURATION = "configuration"
    ERROR = "error"

    @property
    def needs_operator(self) -> bool:
        return self in (ProviderFailure.CONFIGURATION, ProviderFailure.ERROR)


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ResolutionSource(StrEnum):
    AUTOMATIC = "automatic"
    MANUAL = "manual"


def canonical_json(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no insignificant whitespace, UTF-8, no floats."""
    _reject_floats(value)
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


# Exact types that need no look inside; anything else (floats, containers, subclasses)
# takes the full check. Receipts are flat objects of these, verified once per item.
_PLAIN_TYPES = frozenset({str, int, bool, type(None)})


def _reject_floats(value: Any) -> None:
    # Floats have no single canonical text form across languages; digests must be portable.
    if isinstance(value, float):
        raise InvalidDispatch("canonical JSON admits no floats; encode the number as a string")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidDispatch("canonical JSON object keys must be strings")
            if type(item) not in _PLAIN_TYPES:
                _reject_floats(item)
    elif isinstance(value, list | tuple):
        for item in value:
            if type(item) not in _PLAIN_TYPES:
                _reject_floats(item)


def action_digest(action: Any) -> str:
    """Lowercase hex sha256 of the canonical JSON of the approved action."""
    return hashlib.sha256(canonical_json(action)).hexdigest()


def sha256_hex(data: bytes | str) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


class DispatchIdentity(msgspec.Struct, frozen=True):
    """The immutable identity every piece of evidence must be bound to (docs/design.md)."""

    schema_version: int
    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    action_digest: str
    attempt: int
    started_at_ms: int
    idempotency_key: str


class Finding(msgspec.Struct, frozen=True):
    """What a provider observed. Only verified kinds carry evidence for a resolution."""

    kind: FindingKind
    evidence_digest: str | None = None
    result_code: str | None = None
    failure: ProviderFailure | None = None
    """Only on `unavailable`: why the source did not answer (counted, logged, in /readyz)."""
    cause: str | None = None
    """Why the evidence says what it says, as a short code, never message text: with a
    failure the source's refusal (`sqlstate_42501`, `http_403`, logged on `provider_failed`
    and listed in /readyz); on a conflict, missing or unsupported finding the provider's
    reason (`unknown_kid`, `digest_mismatch`, `http_404`). Kept on the control
    (`last_reason`, `reason_counts`) and shown to the operator."""

    def __post_init__(self) -> None:
        if self.failure is not None and self.kind is not FindingKind.UNAVAILABLE:
            raise ValueError("only an unavailable finding names a provider failure")
        if self.cause is not None:
            if self.kind is FindingKind.UNAVAILABLE and self.failure is None:
                raise ValueError("a cause goes with a failure on an unavailable finding")
            if self.kind in _VERIFIED_KINDS or not CAUSE_PATTERN.match(self.cause):
                raise ValueError(
                    "a cause goes with a failure or an unverified finding and matches"
                    " [a-z0-9_]{1,32}"
                )
        if self.kind in _VERIFIED_KINDS:  # not the property: a Python call per finding
            if self.evidence_digest is None or not HEX64_PATTERN.match(self.evidence_digest):
                raise ValueError("a verified finding needs a lowercase hex sha256 evidence digest")
            if self.result_code is None or not RESULT_CODE_PATTERN.match(self.result_code):
                raise ValueError(
                    "a verified finding needs a result code matching [a-z0-9_.-]{1,64}"
                )
        elif self.evidence_digest is not None or self.result_code is not None:
            raise ValueError(f"a {self.kind} finding carries no evidence")

    @property
    def outcome(self) -> Outcome | None:
        if self.kind is FindingKind.VERIFIED_SUCCEEDED:
            return Outcome.SUCCEEDED
        if self.kind is FindingKind.VERIFIED_FAILED:
            return Outcome.FAILED
        return None

    @classmethod
    def verified(cls, outcome: Outcome, evidence_digest: str, result_code: str) -> Finding:
        kind = (
            FindingKind.VERIFIED_SUCCEEDED
            if outcome is Outcome.SUCCEEDED
            else FindingKind.VERIFIED_FAILED
        )
        return cls(kind, evidence_digest, result_code)


class SummaryFact(msgspec.Struct, frozen=True):
    """One labelled fact of an action summary: `Amount` / `2,490.00 EUR`."""

    label: str
    value: str


class ActionSummary(msgspec.Struct, frozen=True):
    """What was approved, for the person who decides on it: a title and a few labelled
    facts (amount and order, command and host, package and version, target).

    Low-sensitivity by rule: never a secret, tool arguments or a raw response. Bounded,
    free of control and invisible characters, and refused when a label names a secret or a
    value looks like one (docs/executor-protocol.md). No rule reads it; people read it.
    """

    title: str
    facts: tuple[SummaryFact, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= len(self.title) <= 120:
            raise InvalidDispatch("action_summary title must be 1-120 characters")
        if len(self.facts) > SUMMARY_MAX_FACTS:
            raise InvalidDispatch("action_summary takes at most 8 facts")
        for fact in self.facts:
            if not (1 <= len(fact.label) <= 40 and 1 <= len(fact.value) <= 200):
                raise InvalidDispatch(
                    "each action_summary fact needs a 1-40 character label and a 1-200"
                    " character value"
                )
            if _SUMMARY_SECRET_LABEL.search(fact.label):
                raise InvalidDispatch(
                    "an action_summary label names a secret: secrets never go in the summary"
                )
        for text in (self.title, *(t for f in self.facts for t in (f.label, f.value))):
            if _SUMMARY_INVISIBLE.search(text):
                raise InvalidDispatch(
                    "action_summary takes no control, zero-width or direction-override character"
                )
            if _SUMMARY_SECRET_VALUE.search(text):
                raise InvalidDispatch(
                    "an action_summary value looks like a secret or a digest (a key, token,"
                    " credential or 32+ character code): never put one in the summary"
                )
        if len(self.json()) > SUMMARY_MAX_BYTES:
            raise InvalidDispatch("action_summary must be at most 2048 bytes as JSON")

    @classmethod
    def of(cls, title: str, facts: Mapping[str, str] | None = None) -> ActionSummary:
        """`ActionSummary.of("Charge", {"Amount": "2,490.00 EUR", "Order": "ord-1"})`."""
        return cls(title, tuple(SummaryFact(k, v) for k, v in (facts or {}).items()))

    @classmethod
    def from_stored(cls, value: Mapping[str, Any] | None) -> ActionSummary | None:
        """A summary as the database keeps it (already checked there)."""
        if value is None:
            return None
        facts = tuple(SummaryFact(f["label"], f["value"]) for f in value.get("facts", ()))
        return cls(value["title"], facts)

    def json(self) -> str:
        """The stored JSON (compact, as PostgreSQL's jsonb counts it closely enough)."""
        return msgspec.json.encode(self).decode("utf-8")


class DispatchSpec(msgspec.Struct, frozen=True):
    """What an executor asks to record before anything runs; validated on construction."""

    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    action_digest: str
    idempotency_key: str
    schema_version: int = 1
    supersedes_dispatch_id: str | None = None
    action_summary: ActionSummary | None = None
    """What was approved, for people (optional; shown to the operator, read by no rule)."""

    def __post_init__(self) -> None:
        for name in ("dispatch_id", "approval_request_id", "project_id", "idempotency_key"):
            if not ID_PATTERN.match(getattr(self, name)):
                raise InvalidDispatch(
                    f"{name} must be 1-128 characters of [A-Za-z0-9_.:-], starting alphanumeric"
                )
        if self.supersedes_dispatch_id is not None and not ID_PATTERN.match(
            self.supersedes_dispatch_id
        ):
            raise InvalidDispatch("supersedes_dispatch_id has the same shape as dispatch_id")
        if not ACTION_TYPE_PATTERN.match(self.action_type):
            raise InvalidDispatch("action_type must match [a-z][a-z0-9_.-]{0,63}")
        if not HEX64_PATTERN.match(self.action_digest):
            raise InvalidDispatch(
                "action_digest must be a lowercase hex sha256 (use action_digest())"
            )
        if not 1 <= self.schema_version <= 32767:
            raise InvalidDispatch("schema_version must be between 1 and 32767")


class ExecutionLease(msgspec.Struct, frozen=True):
    """The executor's fence: every start/renew/complete must present it unchanged."""

    dispatch_id: str
    owner: str
    token: str
    version: int
    attempt: int
    lease_expires_at_ms: int
    state: ExecutionState


class ClaimedItem(msgspec.Struct, frozen=True):
    """One recovery control claimed by this replica, with the identity for providers."""

    identity: DispatchIdentity
    recovery_token: str
    recovery_version: int
    execution_version: int
    finding_count: int
    claimed_at_ms: int | None = None
    """The database clock at the claim: lets a history checker prove no live lease was taken."""


def check_mutation_id(mutation_id: str) -> None:
    """A mutation id, the idempotency key of a terminal write: the one id shape."""
    if not ID_PATTERN.match(mutation_id):
        raise ValueError("mutation_id must be 1-128 characters of [A-Za-z0-9_.:-]")


def check_evidence_digest(evidence_digest: str | None) -> None:
    """An optional evidence digest: a lowercase hex sha256 when given."""
    if evidence_digest is not None and not HEX64_PATTERN.match(evidence_digest):
        raise ValueError("evidence_digest must be a lowercase hex sha256")


class Completion(msgspec.Struct, frozen=True):
    """The executor's report of a finished side effect."""

    outcome: Outcome
    result_code: str
    mutation_id: str
    evidence_digest: str | None = None

    def __post_init__(self) -> None:
        if not RESULT_CODE_PATTERN.match(self.result_code):
            raise ValueError("result_code must match [a-z0-9_.-]{1,64}")
        check_mutation_id(self.mutation_id)
        check_evidence_digest(self.evidence_digest)


# -- recovery: what the reconciler commits and the backlog it reads ----------------------

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


# -- executions and manual resolution as stored and as decided --------------------------


class ExecutionView(msgspec.Struct, frozen=True):
    """An execution as stored, with the resolution (if any) that closed it."""

    dispatch_id: str
    state: ExecutionState
    owner: str
    version: int
    attempt: int
    lease_expires_at_ms: int
    started_at_ms: int | None
    finished_at_ms: int | None
    result_code: str | None
    completion_mutation_id: str | None
    evidence_digest: str | None
    resolution_source: ResolutionSource | None
    resolution_outcome: ExecutionState | None
    resolution_evidence_digest: str | None
    db_now_ms: int

    @property
    def recovery_required(self) -> bool:
        return self.state is ExecutionState.EXECUTING and self.lease_expires_at_ms <= self.db_now_ms


class Grant(msgspec.Struct, frozen=True):
    """The versions of a user's `approval.recover` binding and its project, as read."""

    project_version: int
    role_binding_version: int


class ManualContext(msgspec.Struct, frozen=True):
    project_id: str
    state: ExecutionState
    version: int
    lease_expires_at_ms: int
    control_status: ControlStatus | None
    resolution_mutation_id: str | None
    resolution_source: ResolutionSource | None
    resolution_outcome: ExecutionState | None
    resolution_actor: str | None
    resolution_reason_code: str | None
    resolution_evidence_digest: str | None
    resolution_expected_version: int | None
    mutation_dispatch_id: str | None
    db_now_ms: int
    resolution_confirmed_by: str | None = None
    """The second person of a two-person resolution (None for one person)."""
    mutation_proposal_closed_as: str | None = None
    """The mutation id names a proposal (or its closing): how it ended, None while open."""
    mutation_proposed_by: str | None = None


class OpenProposal(msgspec.Struct, frozen=True):
    """The open first decision of a two-person case, waiting for a second person."""

    decision: Decision
    proposed_by: str
    proposed_at_ms: int
    expires_at_ms: int
    reason_code: str
    evidence_digest: str | None
    expected_execution_version: int


class ProposalRecord(msgspec.Struct, frozen=True):
    """One two-person proposal in a case's history, open or closed."""

    decision: Decision
    reason_code: str
    proposed_by: str
    proposed_at_ms: int
    expires_at_ms: int
    closed_as: str | None
    """`confirmed`, `rejected`, `withdrawn`, `expired` or `voided`; None while open."""
    closed_at_ms: int | None
    closed_by: str | None
    close_reason_code: str | None


class ManualQueueItem(msgspec.Struct, frozen=True):
    """One open case as the manual queue and the waiting list show it."""

    dispatch_id: str
    project_id: str
    action_type: str
    last_finding: FindingKind | None
    finding_count: int
    manual_at_ms: int | None
    execution_version: int
    started_at_ms: int
    attempt: int
    approval_request_id: str = ""
    idempotency_key: str = ""
    action_digest: str = ""
    manual_reason: str | None = None
    last_failure_class: ProviderFailure | None = None
    first_inspected_at_ms: int | None = None
    since_ms: int = 0
    """When the case entered its list (the keyset): manual_at_ms or first_inspected_at_ms."""
    proposal: OpenProposal | None = None
    action_summary: ActionSummary | None = None
    last_reason: str | None = None
    """The last inspection's reason code (`unknown_kid`, `http_404`), if its provider gave one."""
    two_person_decisions: tuple[Decision, ...] = ()
    """The decisions a two-person rule covers for this action type."""
    owner: str = ""
    """The executor that held the lease (its owner name: a host, a pod)."""
    sort_key: str = ""
    """The row's value of the list's sort column (the keyset's first part)."""
    next_look_at_ms: int | None = None
    """A waiting case's next inspection; None in the manual queue."""
    escalates_at_ms: int | None = None
    """When a waiting case goes to the manual queue if its evidence stays what it last was
    (at the first look from then on); None when that finding never escalates."""


class FoundDispatch(msgspec.Struct, frozen=True):
    """One dispatch a lookup found: enough to open its case and to tell several apart."""

    dispatch_id: str
    project_id: str
    action_type: str
    created_at_ms: int
    matched_by: str
    """Which id matched: `dispatch_id`, `idempotency_key` or `approval_request_id`."""
    state: str | None
    """The execution's state; None when it was never leased."""
    control_status: str | None
    closed_by: str | None
    action_summary: ActionSummary | None = None
    pruned_at_ms: int | None = None
    """When retention pruned it (its execution, or the whole dispatch); None while kept."""
    pruned_run_id: int | None = None
    pruned_export_digest: str | None = None
    """The sha256 of the export the pruning run wrote, if it wrote one."""


class CaseSort(StrEnum):
    """The order of an open list: oldest first, or grouped by a column (oldest first within)."""

    AGE = "age"
    ACTION_TYPE = "action_type"
    PROJECT_ID = "project_id"
    LAST_FINDING = "last_finding"


class CaseList(StrEnum):
    """The lists of open cases: the manual queue, and those still waiting for evidence."""

    MANUAL = "manual"
    WAITING = "waiting"


class CaseFilter(msgspec.Struct, frozen=True):
    """Filters of the case lists; None does not filter. `q` is an exact dispatch id,
    idempotency key or approval request id."""

    project_id: str | None = None
    action_type: str | None = None
    last_finding: FindingKind | None = None
    min_age_ms: int = 0
    q: str | None = None
    summary: str | None = None
    """Words of what was approved (its summary's title or facts), case-insensitive."""
    open_proposal: bool = False
    """Only cases whose two-person proposal waits for a second person."""
    owner: str | None = None
    """The executor that held the lease (its owner name: a host, a pod)."""
    last_reason: str | None = None
    """The last inspection's reason code."""


NO_FILTER = CaseFilter()


class CaseIdentity(msgspec.Struct, frozen=True):
    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    action_digest: str
    idempotency_key: str
    schema_version: int
    supersedes_dispatch_id: str | None
    superseded_by: tuple[str, ...]
    created_at_ms: int
    action_summary: ActionSummary | None = None


class CaseExecution(msgspec.Struct, frozen=True):
    state: ExecutionState
    owner: str | None
    attempt: int
    version: int
    started_at_ms: int | None
    lease_expires_at_ms: int
    finished_at_ms: int | None
    result_code: str | None
    recovery_required: bool


class CaseControl(msgspec.Struct, frozen=True):
    status: ControlStatus
    armed_at_ms: int
    finding_count: int
    finding_counts: Mapping[str, int]
    first_inspected_at_ms: int | None
    last_inspected_at_ms: int | None
    last_finding: FindingKind | None
    last_failure_class: ProviderFailure | None
    last_evidence_digest: str | None
    next_scan_at_ms: int
    manual_at_ms: int | None
    manual_reason: str | None
    closed_by: str | None
    closed_at_ms: int | None
    last_reason: str | None = None
    reason_counts: Mapping[str, int] = msgspec.field(default_factory=dict)
    escalates_at_ms: int | None = None
    """While armed: when the case goes to the manual queue if its evidence stays what it
    last was (at the first look from then on); None when that finding never escalates."""


class CaseResolution(msgspec.Struct, frozen=True):
    source: ResolutionSource
    outcome: ExecutionState
    decision: Decision | None
    reason_code: str | None
    actor_user_id: str | None
    evidence_digest: str | None
    resolved_at_ms: int
    mutation_id: str


class CaseAuthorization(msgspec.Struct, frozen=True):
    user_id: str
    permission: str
    amr: tuple[str, ...]
    auth_time_ms: int
    role: str


class Case(msgspec.Struct, frozen=True):
    """Everything known about one dispatch, read-only: what an operator decides on."""

    identity: CaseIdentity
    execution: CaseExecution | None
    control: CaseControl | None
    resolution: CaseResolution | None
    authorizations: tuple[CaseAuthorization, ...]
    db_now_ms: int
    proposal: OpenProposal | None = None
    late_evidence: tuple[LateEvidence, ...] = ()
    """Verified findings observed after a manual decision (docs/manual-resolution.md)."""
    proposals: tuple[ProposalRecord, ...] = ()
    """Every two-person proposal of the case, open or closed, oldest first."""
    two_person_decisions: tuple[Decision, ...] = ()
    """The decisions a two-person rule covers for this action type."""


class DecisionFilter(msgspec.Struct, frozen=True):
    """Filters of the decisions list; None does not filter. `q` is an exact dispatch id,
    idempotency key or approval request id (as in CaseFilter); `overridden_finding` is the
    finding the decision overrode; the time range [since_ms, until_ms) is when it was made."""

    project_id: str | None = None
    user_id: str | None = None
    since_ms: int = 0
    until_ms: int = 2**63 - 1
    action_type: str | None = None
    overridden_finding: FindingKind | None = None
    q: str | None = None


class DecisionRecord(msgspec.Struct, frozen=True):
    """One manual decision as the decisions list shows it."""

    dispatch_id: str
    project_id: str
    action_type: str
    idempotency_key: str
    approval_request_id: str
    decision: Decision
    outcome: ExecutionState
    actor_user_id: str
    confirmed_by: str | None
    reason_code: str
    amr: tuple[str, ...]
    auth_time_ms: int
    evidence_digest: str | None
    overridden_finding: FindingKind | None
    resolved_at_ms: int
    resolution_id: int
    contradicted: bool | None = None
    """Late evidence contradicted (True) or agreed with (False) it; None while none came."""


class Decision(StrEnum):
    CONFIRM_SUCCEEDED = "confirm_succeeded"
    CONFIRM_FAILED = "confirm_failed"
    ABANDON_UNKNOWN = "abandon_unknown"

    @property
    def terminal_state(self) -> ExecutionState:
        return _TERMINAL_STATE[self]

    @classmethod
    def settling(cls, outcome: ExecutionState) -> Decision:
        """The decision whose terminal state is `outcome`."""
        return next(d for d, state in _TERMINAL_STATE.items() if state is outcome)


_TERMINAL_STATE = {
    Decision.CONFIRM_SUCCEEDED: ExecutionState.SUCCEEDED,
    Decision.CONFIRM_FAILED: ExecutionState.FAILED,
    Decision.ABANDON_UNKNOWN: ExecutionState.BLOCKED,
}


class Principal(msgspec.Struct, frozen=True):
    """A user as a verified token describes them: stable id, when and how they authenticated,
    and who vouched for it (the token's issuer and the key id it was verified with)."""

    user_id: str
    auth_time_ms: int
    amr: tuple[str, ...]
    issuer: str
    token_kid: str


class SignedFact(msgspec.Struct, frozen=True):
    """What a signed authorization fact adds (resolver.human.signing): the verified token's
    issuer and key id, and the API's Ed25519 signature over the fact with its key id."""

    issuer: str
    token_kid: str
    signing_kid: str
    signature: str


class Authority(msgspec.Struct, frozen=True):
    """Who acts, on what standing: the person, the project of the dispatch, and their grant
    there as read; a fenced human write checks each again inside the database."""

    principal: Principal
    project_id: str
    grant: Grant


class DecisionLimits(msgspec.Struct, frozen=True):
    """The service's limits a fenced human write is held to: how old the strong sign-in may
    be, the leeway for a sign-in time ahead of the database clock, and how long a proposal
    stays open."""

    max_auth_age_ms: int
    clock_leeway_ms: int
    proposal_ttl_ms: int


class ManualDecision(msgspec.Struct, frozen=True):
    dispatch_id: str
    decision: Decision
    mutation_id: str
    expected_execution_version: int
    reason_code: str
    evidence_digest: str | None = None

    def __post_init__(self) -> None:
        check_mutation_id(self.mutation_id)
        if not REASON_CODE_PATTERN.match(self.reason_code):
            raise ValueError("reason_code must match [a-z0-9_.-]{1,64}")
        check_evidence_digest(self.evidence_digest)
        if self.expected_execution_version < 1:
            raise ValueError("expected_execution_version must be >= 1")


class ManualResult(StrEnum):
    COMMITTED = "committed"
    REPLAYED = "replayed"
    PROPOSED = "proposed"
    """A two-person case: recorded as a proposal, waiting for a second person."""


class ProposalAction(StrEnum):
    """What a person does to an open proposal without deciding."""

    WITHDRAW = "withdraw"
    REJECT = "reject"


class ProposalClose(msgspec.Struct, frozen=True):
    """Withdraw (the proposer) or reject (anyone else) the open proposal on a dispatch."""

    dispatch_id: str
    action: ProposalAction
    mutation_id: str
    reason_code: str


class ProposalResult(StrEnum):
    WITHDRAWN = "withdrawn"
    REJECTED = "rejected"
    REPLAYED = "replayed"


class AuditLink(msgspec.Struct, frozen=True):
    """One link of the audit chain of manual decisions, with its content rebuilt from the
    stored facts (`facts_content`, None when the resolution was pruned)."""

    seq: int
    mutation_id: str
    dispatch_id: str
    content: str
    prev_hash: str
    hash: str
    recorded_at_ms: int
    facts_content: str | None


class PruneRunRecord(msgspec.Struct, frozen=True):
    """The prune run that recorded an export: the range of audit links it removed (None for
    a run before the range was recorded)."""

    run_id: int
    audit_first_seq: int | None
    audit_last_seq: int | None

    def covers(self, seq: int) -> bool:
        if self.audit_first_seq is None or self.audit_last_seq is None:
            return True
        return self.audit_first_seq <= seq <= self.audit_last_seq


# -- late evidence after a manual decision ------------------------------------------------


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


# -- the outcome feed: what a runtime learns after the resolver -------------------------


class DispatchState(StrEnum):
    """A dispatch's state as a runtime reads it: the stored execution state, `pending` before
    the first lease, and `recovery_required` (never stored) for an executing execution whose
    lease has expired on the database clock."""

    PENDING = "pending"
    LEASED = "leased"
    EXECUTING = "executing"
    RECOVERY_REQUIRED = "recovery_required"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"

    @property
    def terminal(self) -> bool:
        return self.value in TERMINAL_STATES


class OutcomeKind(StrEnum):
    """What a feed record reports (resolver_outcomes_after's `kind`)."""

    SETTLED = "settled"
    """The dispatch reached a terminal state (succeeded, failed, blocked)."""
    CONTRADICTED = "contradicted"
    """Verified evidence seen after a person's decision disagrees with it; the state stays."""
    SUPERSEDED = "superseded"
    """A new dispatch does the action again (`superseded_by`)."""


class SettledBy(StrEnum):
    EXECUTOR = "executor"
    """The executor's own completion."""
    RESOLVER = "resolver"
    """A resolver replica, from verified evidence (`finding`)."""
    PERSON = "person"
    """A person's decision (`actors`, `reason_code`)."""


# CloudEvents 1.0: each record's `type` is this prefix and its kind; `source` defaults to this.
OUTCOME_EVENT_TYPE_PREFIX = "approved-action-resolver.outcome."
OUTCOME_EVENT_SOURCE = "urn:approved-action-resolver:outcomes"


def rfc3339_ms(ms: int) -> str:
    """Milliseconds since the epoch as an RFC 3339 UTC time (CloudEvents' `time`)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class OutcomeRecord(msgspec.Struct, frozen=True):
    """One record of the outcome feed, as resolver_outcomes_after answers it.

    `cursor` is its place in the feed (`xid:seq`): save it after handling the record and read
    after it next time. `state` is the terminal state for `settled` and `contradicted` (the
    person's decision, which the contradiction does not change), and the superseded
    dispatch's state at that moment for `superseded`.
    """

    cursor: str
    kind: OutcomeKind
    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    state: DispatchState
    settled_by: SettledBy | None
    finding: str | None
    result_code: str | None
    evidence_digest: str | None
    mutation_id: str | None
    reason_code: str | None
    actors: tuple[str, ...] | None
    superseded_by: str | None
    occurred_at_ms: int

    def cloud_event(self, source: str = OUTCOME_EVENT_SOURCE) -> dict[str, Any]:
        """The record as a CloudEvents 1.0 event in structured JSON form: `id` the cursor
        (unique in the feed), `subject` the dispatch id, `time` when it happened, `data`
        every field. Forward it to an event bus as it is."""
        data = msgspec.to_builtins(self)
        return {
            "specversion": "1.0",
            "id": self.cursor,
            "source": source,
            "type": OUTCOME_EVENT_TYPE_PREFIX + self.kind.value,
            "subject": self.dispatch_id,
            "time": rfc3339_ms(self.occurred_at_ms),
            "datacontenttype": "application/json",
            "data": data,
        }


class DispatchStatus(msgspec.Struct, frozen=True):
    """One dispatch now, as resolver_dispatch_status answers it: identity, effective state on
    the database clock, what settled it, and the newest dispatch that supersedes it."""

    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    idempotency_key: str
    supersedes_dispatch_id: str | None
    superseded_by: str | None
    state: DispatchState
    attempt: int | None
    lease_expires_at_ms: int | None
    started_at_ms: int | None
    finished_at_ms: int | None
    result_code: str | None
    evidence_digest: str | None
    settled_by: SettledBy | None
    finding: str | None
    reason_code: str | None
    actors: tuple[str, ...] | None
    control_status: ControlStatus | None
    created_at_ms: int
    db_now_ms: int

    @property
    def settled(self) -> bool:
        return self.state.terminal

    @property
    def lease_live(self) -> bool:
        """Leased or executing under a lease that has not expired: someone may be working."""
        return (
            self.state in (DispatchState.LEASED, DispatchState.EXECUTING)
            and self.lease_expires_at_ms is not None
            and self.lease_expires_at_ms > self.db_now_ms
        )


class HistoryEntry(msgspec.Struct, frozen=True):
    """One step of a dispatch's history (resolver_dispatch_history): `created`, `started`,
    then its feed records with their cursors."""

    cursor: str | None
    kind: str
    state: DispatchState
    settled_by: SettledBy | None
    finding: str | None
    result_code: str | None
    reason_code: str | None
    actors: tuple[str, ...] | None
    superseded_by: str | None
    attempt: int | None
    occurred_at_ms: int
