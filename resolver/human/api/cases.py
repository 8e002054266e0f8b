"""The read routes of the manual-resolution API: the whole case, the lists, the decisions.

Everything here is read-only and project-scoped: a caller sees only projects where it holds
`approval.recover` or `approval.recover.read`; an unknown and a forbidden dispatch answer
alike (404). Every query parameter is typed and bounded before any SQL runs; cursors are
opaque keysets this API issued.
"""

# No `from __future__ import annotations`: FastAPI resolves the endpoint annotations.

import base64
import binascii
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, BeforeValidator, ConfigDict

from resolver.core.domain import (
    ACTION_TYPE_REGEX,
    BIGINT_MAX,
    FIND_WORDS_MIN,
    ID_PATTERN,
    ID_REGEX,
    ActionSummary,
    Case,
    CaseFilter,
    CaseList,
    CaseSort,
    DecisionFilter,
    DecisionRecord,
    FindingKind,
    FoundDispatch,
    ManualQueueItem,
    Principal,
)
from resolver.core.ports import CaseReader
from resolver.human.api.deps import Context, User
from resolver.human.api.models import Proposal
from resolver.human.api.problems import ApiError, problem_responses

MAX_LIMIT = 100
MAX_CURSOR_LENGTH = 300
# `total` counts at most this many matching cases: a runaway backlog costs a bounded read.
# The console says "1,000 or more": a person triages the first pages and narrows the filter,
# and the count answers beside the page within the console's 50 ms at any history.
TOTAL_CAP = 1_000
MAX_AGE_SECONDS = 10 * 366 * 86_400
# Free text on one line: no control character reaches a query.
ONE_LINE = r"^[^\x00-\x1f\x7f]+$"


def _digits(max_digits: int) -> Callable[[object], object]:
    """Query integers in plain ASCII digits only: no sign, space, `_`, `7.0` or exponent."""

    def check(value: object) -> object:
        if isinstance(value, str) and not (
            value.isascii() and value.isdigit() and len(value) <= max_digits
        ):
            raise ValueError("must be a decimal integer")
        return value

    return check


Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT), BeforeValidator(_digits(6))]
Cursor = Annotated[str | None, Query(max_length=MAX_CURSOR_LENGTH)]
ProjectId = Annotated[str | None, Query(pattern=ID_REGEX)]
ActionType = Annotated[str | None, Query(pattern=ACTION_TYPE_REGEX)]
LastFinding = Annotated[FindingKind | None, Query()]
# Each filter is named after the item field it matches: a decision shows the finding it
# overrode, an open case its last one.
OverriddenFinding = Annotated[
    FindingKind | None, Query(description="the finding the decision overrode")
]
MinAge = Annotated[int, Query(ge=0, le=MAX_AGE_SECONDS), BeforeValidator(_digits(12))]
Lookup = Annotated[
    str | None,
    Query(pattern=ID_REGEX, description="exact dispatch id, idempotency key or approval id"),
]
TimeMs = Annotated[int | None, Query(ge=0, le=BIGINT_MAX), BeforeValidator(_digits(19))]
UserId = Annotated[str | None, Query(min_length=1, max_length=128)]
SummaryWords = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=100,
        pattern=ONE_LINE,
        description="words of what was approved (the summary's title or facts), any case",
    ),
]


class SummaryFactOut(BaseModel):
    label: str
    value: str


class ActionSummaryOut(BaseModel):
    """What was approved, as the executor summarised it for people (text, never markup)."""

    title: str
    facts: list[SummaryFactOut]

    @classmethod
    def of(cls, summary: ActionSummary | None) -> "ActionSummaryOut | None":
        if summary is None:
            return None
        return cls(
            title=summary.title,
            facts=[SummaryFactOut(label=f.label, value=f.value) for f in summary.facts],
        )


class QueueEntry(BaseModel):
    """One open case as the manual queue and the waiting list show it."""

    model_config = ConfigDict(frozen=True)

    dispatch_id: str
    project_id: str
    action_type: str
    approval_request_id: str
    idempotency_key: str
    action_digest: str
    last_finding: FindingKind | None
    last_failure_class: str | None
    finding_count: int
    first_inspected_at_ms: int | None
    manual_at_ms: int | None
    """When the case entered the manual queue (null on the waiting list)."""
    manual_reason: str | None
    """Why: `conflict`, `unsupported` or `evidence_window_elapsed` (an escalation)."""
    execution_version: int
    """Send it back as `expected_execution_version`: the decision is fenced on it."""
    started_at_ms: int
    attempt: int
    proposal: Proposal | None = None
    """The open two-person proposal, if one waits for a second person."""
    action_summary: ActionSummaryOut | None = None
    """What was approved, if the executor said (a title and labelled facts)."""
    last_reason: str | None = None
    """Why the last finding is what it is (`unknown_kid`, `http_404`), if its provider said."""
    two_person_decisions: list[str] = []
    """The decisions that need two people on this action type (a rule names them)."""
    owner: str = ""
    """The executor that held the lease (its owner name: a host, a pod)."""
    next_look_at_ms: int | None = None
    """Waiting list: when the evidence is looked for next (null in the manual queue)."""
    escalates_at_ms: int | None = None
    """Waiting list: when the case goes to the manual queue if its evidence stays what it
    last was (at the first look from then on); null when that finding never escalates."""

    @classmethod
    def of(cls, item: ManualQueueItem) -> "QueueEntry":
        return cls(
            dispatch_id=item.dispatch_id,
            project_id=item.project_id,
            action_type=item.action_type,
            approval_request_id=item.approval_request_id,
            idempotency_key=item.idempotency_key,
            action_digest=item.action_digest,
            last_finding=item.last_finding,
            last_failure_class=item.last_failure_class,
            finding_count=item.finding_count,
            first_inspected_at_ms=item.first_inspected_at_ms,
            manual_at_ms=item.manual_at_ms,
            manual_reason=item.manual_reason,
            execution_version=item.execution_version,
            started_at_ms=item.started_at_ms,
            attempt=item.attempt,
            proposal=Proposal.of(item.proposal),
            action_summary=ActionSummaryOut.of(item.action_summary),
            last_reason=item.last_reason,
            two_person_decisions=[d.value for d in item.two_person_decisions],
            owner=item.owner,
            next_look_at_ms=item.next_look_at_ms,
            escalates_at_ms=item.escalates_at_ms,
        )


class CaseCounts(BaseModel):
    """The matching cases counted by each triage dimension (each value is also a filter)."""

    action_type: dict[str, int]
    reason: dict[str, int]
    """By the last reason code, or the last finding when the provider gave no reason."""
    project_id: dict[str, int]
    owner: dict[str, int]
    """By the executor that held the lease."""
    cap: int
    """At most this many cases are counted: sums at the cap mean "at least"."""


class QueuePage(BaseModel):
    items: list[QueueEntry]
    next_cursor: str | None
    total: int
    """Cases matching the filter, counted up to `total_cap` (a total at the cap means at
    least that many)."""
    total_cap: int = TOTAL_CAP
    """Where the count stops: 1,000."""


class CaseIdentityOut(BaseModel):
    dispatch_id: str
    approval_request_id: str
    project_id: str
    action_type: str
    action_digest: str
    idempotency_key: str
    schema_version: int
    supersedes_dispatch_id: str | None
    superseded_by: list[str]
    created_at_ms: int
    action_summary: ActionSummaryOut | None = None
    """What was approved, if the executor said: shown to people, read by no rule."""


class CaseExecutionOut(BaseModel):
    state: str
    owner: str | None
    attempt: int
    version: int
    started_at_ms: int | None
    lease_expires_at_ms: int
    finished_at_ms: int | None
    result_code: str | None
    recovery_required: bool


class CaseControlOut(BaseModel):
    status: str
    armed_at_ms: int
    finding_count: int
    finding_counts: dict[str, int]
    first_inspected_at_ms: int | None
    last_inspected_at_ms: int | None
    last_finding: str | None
    last_failure_class: str | None
    last_evidence_digest: str | None
    next_scan_at_ms: int
    manual_at_ms: int | None
    manual_reason: str | None
    closed_by: str | None
    closed_at_ms: int | None
    last_reason: str | None = None
    """The last inspection's reason code (`unknown_kid`, `http_404`), if its provider gave one."""
    reason_counts: dict[str, int] = {}
    """How often each reason code was seen (at most 16 by name, the rest as `other`)."""
    escalates_at_ms: int | None = None
    """While armed: when the case goes to the manual queue if its evidence stays what it last
    was (at the first look from then on, `next_scan_at_ms` being the next); null when that
    finding never escalates (or not looked at since the upgrade that records it)."""


class CaseResolutionOut(BaseModel):
    source: str
    outcome: str
    decision: str | None
    reason_code: str | None
    actor_user_id: str | None
    evidence_digest: str | None
    resolved_at_ms: int
    mutation_id: str


class CaseAuthorizationOut(BaseModel):
    user_id: str
    permission: str
    amr: list[str]
    auth_time_ms: int
    role: str


class LateEvidenceOut(BaseModel):
    finding: str
    agrees: bool
    evidence_digest: str | None
    observed_at_ms: int


class ProposalHistoryOut(BaseModel):
    """One two-person proposal of the case, open or closed."""

    decision: str
    reason_code: str
    proposed_by: str
    proposed_at_ms: int
    expires_at_ms: int
    closed_as: str | None
    """`confirmed`, `rejected`, `withdrawn`, `expired` or `voided`; null while open."""
    closed_at_ms: int | None
    closed_by: str | None
    close_reason_code: str | None


class PrunedOut(BaseModel):
    """Retention pruned this dispatch: what stays is in the run's export, if it wrote one."""

    run_id: int
    pruned_at_ms: int
    export_digest: str | None
    """The sha256 of the run's export (`resolver audit verify --export` checks a file against
    it); null when the run wrote none."""


class CaseOut(BaseModel):
    """The whole case of one dispatch, read-only."""

    identity: CaseIdentityOut
    execution: CaseExecutionOut | None
    """Null only for a dispatch that was never leased."""
    control: CaseControlOut | None
    proposal: Proposal | None
    resolution: CaseResolutionOut | None
    authorizations: list[CaseAuthorizationOut]
    late_evidence: list[LateEvidenceOut]
    proposals: list[ProposalHistoryOut] = []
    """Every two-person proposal of the case, open or closed, oldest first: the history."""
    two_person_decisions: list[str] = []
    """The decisions that need two people on this action type (a rule names them)."""
    pruned: PrunedOut | None = None
    """Retention pruned its execution (`execution` and `control` are then null) and kept its
    identity and decision as audit facts: when, by which run, under which export. Null while
    retention kept it whole."""

    @classmethod
    def of(cls, case: Case) -> "CaseOut":
        return cls(
            identity=_identity(case),
            execution=CaseExecutionOut(**_fields(case.execution)) if case.execution else None,
            control=CaseControlOut(**_fields(case.control)) if case.control else None,
            proposal=Proposal.of(case.proposal),
            resolution=CaseResolutionOut(**_fields(case.resolution)) if case.resolution else None,
            authorizations=[CaseAuthorizationOut(**_fields(a)) for a in case.authorizations],
            late_evidence=[LateEvidenceOut(**_fields(e)) for e in case.late_evidence],
            proposals=[ProposalHistoryOut(**_fields(p)) for p in case.proposals],
            two_person_decisions=[d.value for d in case.two_person_decisions],
            pruned=PrunedOut(**_fields(case.pruned)) if case.pruned else None,
        )


class DecisionEntry(BaseModel):
    dispatch_id: str
    project_id: str
    action_type: str
    idempotency_key: str
    approval_request_id: str
    decision: str
    outcome: str
    actor_user_id: str
    confirmed_by: str | None
    reason_code: str
    amr: list[str]
    auth_time_ms: int
    evidence_digest: str | None
    overridden_finding: str | None
    """The finding the decision overrode (the control's last one), null if never inspected."""
    resolved_at_ms: int
    contradicted: bool | None
    """Whether late evidence contradicted the decision; null while none was observed."""

    @classmethod
    def of(cls, record: DecisionRecord) -> "DecisionEntry":
        fields = _fields(record)
        fields.pop("resolution_id")
        return cls(**fields)


class FoundEntry(BaseModel):
    """One dispatch a lookup found, whatever its state."""

    dispatch_id: str
    project_id: str
    action_type: str
    created_at_ms: int
    matched_by: str
    """What matched: `dispatch_id`, `idempotency_key`, `approval_request_id`, or `summary`
    (the words are in what was approved: its title, a fact's label or value)."""
    state: str | None
    """The execution's state (`executing`, `succeeded`...); null when never leased."""
    control_status: str | None
    closed_by: str | None
    """How recovery closed: `completion` (its executor), `automatic` (verified evidence) or
    `manual` (a person); null while open or never armed."""
    action_summary: ActionSummaryOut | None = None
    pruned: PrunedOut | None = None
    """Null while retention kept it; else when and by which run it was pruned."""

    @classmethod
    def of(cls, found: FoundDispatch) -> "FoundEntry":
        fields = _fields(found)
        fields["action_summary"] = ActionSummaryOut.of(found.action_summary)
        run_id = fields.pop("pruned_run_id")
        at_ms = fields.pop("pruned_at_ms")
        digest = fields.pop("pruned_export_digest")
        if run_id is not None and at_ms is not None:
            fields["pruned"] = PrunedOut(run_id=run_id, pruned_at_ms=at_ms, export_digest=digest)
        return cls(**fields)


class FindPage(BaseModel):
    items: list[FoundEntry]
    """Newest first, at most 20; empty when nothing you may read matches."""


class DecisionPage(BaseModel):
    items: list[DecisionEntry]
    next_cursor: str | None
    total: int
    """Decisions matching the filter, counted up to `total_cap` (a total at the cap means at
    least that many)."""
    total_cap: int = TOTAL_CAP
    """Where the count stops: 1,000."""


def _identity(case: Case) -> CaseIdentityOut:
    fields = _fields(case.identity)
    fields["action_summary"] = ActionSummaryOut.of(case.identity.action_summary)
    return CaseIdentityOut(**fields)


def _fields(value: msgspec.Struct) -> dict[str, Any]:
    """A domain value as a dict of its fields (tuples as lists)."""
    return {
        name: list(v) if isinstance(v, tuple) else v
        for name, v in msgspec.structs.asdict(value).items()
    }


def case_filter(
    project_id: ProjectId = None,
    action_type: ActionType = None,
    last_finding: LastFinding = None,
    min_age_seconds: MinAge = 0,
    q: Lookup = None,
    summary: SummaryWords = None,
    open_proposal: Annotated[
        bool, Query(description="only cases whose proposal waits for a second person")
    ] = False,
    owner: Annotated[
        str | None,
        Query(min_length=1, max_length=128, description="the executor that held the lease"),
    ] = None,
    last_reason: Annotated[
        str | None,
        Query(pattern=r"^[a-z0-9_]{1,32}$", description="the last inspection's reason code"),
    ] = None,
) -> CaseFilter:
    """The case lists' shared filter, every part typed and bounded before any SQL."""
    return CaseFilter(
        project_id,
        action_type,
        last_finding,
        min_age_seconds * 1000,
        q,
        summary,
        open_proposal,
        owner,
        last_reason,
    )


Filters = Annotated[CaseFilter, Depends(case_filter)]
Sort = Annotated[
    CaseSort,
    Query(description="oldest first (`age`), or grouped by a column, oldest first within"),
]
# The read routes sit behind the same edge and token check as the decisions.
router = APIRouter()


@router.get(
    "/v1/manual-queue",
    response_model=QueuePage,
    responses=problem_responses(401, 422),
    summary="The manual queue, oldest first, filtered",
)
def manual_queue(
    context: Context,
    user: User,
    filters: Filters,
    sort: Sort = CaseSort.AGE,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> QueuePage:
    return _case_page(context.store, user, CaseList.MANUAL, filters, sort, limit, cursor)


@router.get(
    "/v1/manual-queue/counts",
    response_model=CaseCounts,
    responses=problem_responses(401, 422),
    summary="The matching manual cases by action type, reason, project and executor",
)
def manual_queue_counts(context: Context, user: User, filters: Filters) -> CaseCounts:
    return _case_counts(context.store, user, CaseList.MANUAL, filters)


@router.get(
    "/v1/waiting/counts",
    response_model=CaseCounts,
    responses=problem_responses(401, 422),
    summary="The matching waiting cases by action type, reason, project and executor",
)
def waiting_counts(context: Context, user: User, filters: Filters) -> CaseCounts:
    return _case_counts(context.store, user, CaseList.WAITING, filters)


@router.get(
    "/v1/waiting",
    response_model=QueuePage,
    responses=problem_responses(401, 422),
    summary="Armed cases inspected at least once and not settled, oldest first",
)
def waiting(
    context: Context,
    user: User,
    filters: Filters,
    sort: Sort = CaseSort.AGE,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> QueuePage:
    return _case_page(context.store, user, CaseList.WAITING, filters, sort, limit, cursor)


@router.get(
    "/v1/dispatches/{dispatch_id}",
    response_model=CaseOut,
    responses=problem_responses(401, 404, 422),
)
def get_case(
    context: Context, user: User, dispatch_id: Annotated[str, Path(pattern=ID_REGEX)]
) -> CaseOut:
    case = context.store.get_case(user.user_id, dispatch_id)
    if case is None:
        # One answer for unknown and forbidden: the caller learns nothing about others.
        raise ApiError(404, "not_found", "no such dispatch in a project you may read")
    return CaseOut.of(case)


@router.get(
    "/v1/decisions",
    response_model=DecisionPage,
    responses=problem_responses(401, 422),
    summary="Manual decisions, newest first, filtered",
)
def decisions(
    context: Context,
    user: User,
    project_id: ProjectId = None,
    action_type: ActionType = None,
    overridden_finding: OverriddenFinding = None,
    user_id: UserId = None,
    since_ms: TimeMs = None,
    until_ms: TimeMs = None,
    q: Lookup = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> DecisionPage:
    filters = DecisionFilter(
        project_id=project_id,
        user_id=user_id,
        since_ms=since_ms if since_ms is not None else 0,
        until_ms=until_ms if until_ms is not None else BIGINT_MAX,
        action_type=action_type,
        overridden_finding=overridden_finding,
        q=q,
    )
    before = _decode_decision_cursor(cursor)
    records = context.store.list_decisions(user.user_id, filters, limit, before)
    total = context.store.count_decisions(user.user_id, filters, TOTAL_CAP)
    next_cursor = (
        _encode(f"{records[-1].resolved_at_ms}:{records[-1].resolution_id}")
        if len(records) == limit
        else None
    )
    return DecisionPage(
        items=[DecisionEntry.of(r) for r in records], next_cursor=next_cursor, total=total
    )


@router.get(
    "/v1/find",
    response_model=FindPage,
    responses=problem_responses(401, 422),
    summary="Find dispatches by exact id, or by words of what was approved",
)
def find(
    context: Context,
    user: User,
    q: Lookup = None,
    words: Annotated[
        str | None,
        Query(
            min_length=FIND_WORDS_MIN,
            max_length=100,
            pattern=ONE_LINE,
            description="words of what was approved (its title, a fact's label or value), any case",
        ),
    ] = None,
) -> FindPage:
    """Every dispatch you may read that the id `q` names exactly, or whose summary of what
    was approved contains `words`, whatever its state: open, waiting, settled by its executor
    or automatically, decided, superseded, pruned. Give one of the two. A pruned dispatch says
    when, by which prune run and under which export digest; it is found by its ids for one
    retention period after its prune (the record then goes too; it keeps no summary)."""
    if (q is None) == (words is None):
        raise ApiError(422, "invalid_request", "give exactly one of q (an id) and words")
    if q is not None:
        found = context.store.find_dispatches(user.user_id, q)
    else:
        found = context.store.find_by_words(user.user_id, str(words))
    return FindPage(items=[FoundEntry.of(f) for f in found])


def _case_page(
    store: CaseReader,
    user: Principal,
    which: CaseList,
    filters: CaseFilter,
    sort: CaseSort,
    limit: int,
    cursor: str | None,
) -> QueuePage:
    after, after_key = _decode_sorted_cursor(cursor, sort)
    items = store.list_cases(
        user.user_id, which, limit, after, filters, sort=sort, after_key=after_key
    )
    total = store.count_cases(user.user_id, which, filters, TOTAL_CAP)
    next_cursor = _encode(_sorted_cursor(items[-1], sort)) if len(items) == limit else None
    return QueuePage(items=[QueueEntry.of(i) for i in items], next_cursor=next_cursor, total=total)


def _case_counts(
    store: CaseReader, user: Principal, which: CaseList, filters: CaseFilter
) -> CaseCounts:
    counts = store.case_counts(user.user_id, which, filters, TOTAL_CAP)
    return CaseCounts(**counts, cap=TOTAL_CAP)


def _bad_cursor() -> ApiError:
    return ApiError(422, "invalid_request", "invalid fields: cursor")


def _encode(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
    except (ValueError, binascii.Error):
        raise _bad_cursor() from None
    at, _, rest = raw.partition(":")
    if not (at.isdigit() and len(at) <= 19 and int(at) <= BIGINT_MAX):
        raise _bad_cursor()
    return int(at), rest


def _decode_case_cursor(cursor: str | None) -> tuple[int, str] | None:
    """A cursor this API issued, or 422: every part bounded and typed before any SQL."""
    if cursor is None:
        return None
    at, dispatch_id = _decode(cursor)
    if not ID_PATTERN.match(dispatch_id):
        raise _bad_cursor()
    return at, dispatch_id


def _sorted_cursor(item: ManualQueueItem, sort: CaseSort) -> str:
    """`since:dispatch_id`, or `since:key/dispatch_id` when grouped by a column (no key, id
    or code contains `/`)."""
    if sort is CaseSort.AGE:
        return f"{item.since_ms}:{item.dispatch_id}"
    return f"{item.since_ms}:{item.sort_key}/{item.dispatch_id}"


def _decode_sorted_cursor(cursor: str | None, sort: CaseSort) -> tuple[tuple[int, str] | None, str]:
    if cursor is None:
        return None, ""
    if sort is CaseSort.AGE:
        return _decode_case_cursor(cursor), ""
    at, rest = _decode(cursor)
    key, slash, dispatch_id = rest.partition("/")
    if not slash or len(key) > 128 or not ID_PATTERN.match(dispatch_id):
        raise _bad_cursor()
    if key and not ID_PATTERN.match(key):
        raise _bad_cursor()
    return (at, dispatch_id), key


def _decode_decision_cursor(cursor: str | None) -> tuple[int, int] | None:
    if cursor is None:
        return None
    at, resolution_id = _decode(cursor)
    if not (resolution_id.isdigit() and len(resolution_id) <= 19):
        raise _bad_cursor()
    if int(resolution_id) > BIGINT_MAX:
        raise _bad_cursor()
    return at, int(resolution_id)
