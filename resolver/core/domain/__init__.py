"""Domain vocabulary: every value type the modules pass each other, one module per concern.

`shapes` (identifiers, codes, digests), `sets` (states, finding kinds and their routing,
provider failures, outcomes, decisions), `canonical` (canonical JSON, the action digest),
`findings` (the dispatch identity, a finding), `dispatch` (the specification, its summary,
the lease, the completion, the execution as stored), `recovery` (claimed items, the page
commit, the backlog), `decisions` (who decides, the decision and its answers, proposals),
`late_evidence`, `cases` (the human side's read models), `audit` and `outcomes` (the
outcome feed's records and one dispatch's status, as a runtime reads them). Import the names
from this package: which module defines one is not part of its name.

The package imports nothing of the resolver but `errors`, so any module may import it
without a cycle. Settings of one component (`WorkerSettings`, `ReconcilerSettings`) and the
private types of one module stay with that module.

Every value type is a frozen `msgspec.Struct`: immutable and compared by value like a frozen
dataclass, but its class is built in C (a frozen dataclass generates and compiles its methods
at import, a large share of the start-up) and an instance costs a tenth of a frozen
dataclass's (which sets each field through `object.__setattr__`), for several instances per
resolution. Copy one with a change by `msgspec.structs.replace`.
"""

from resolver._compat import guard_internal
from resolver.core.domain.audit import (
    AuditLink,
    PruneRunRecord,
)
from resolver.core.domain.canonical import (
    action_digest,
    canonical_json,
    sha256_hex,
)
from resolver.core.domain.cases import (
    FIND_WORDS_MIN,
    NO_FILTER,
    Case,
    CaseAuthorization,
    CaseControl,
    CaseExecution,
    CaseFilter,
    CaseIdentity,
    CaseList,
    CaseResolution,
    CaseSort,
    DecisionFilter,
    DecisionRecord,
    FoundDispatch,
    ManualQueueItem,
    PruneMark,
)
from resolver.core.domain.decisions import (
    Act,
    Authority,
    DecisionLimits,
    Grant,
    ManualCommitAnswer,
    ManualContext,
    ManualDecision,
    ManualResult,
    OpenProposal,
    Principal,
    ProposalAction,
    ProposalClose,
    ProposalCloseAnswer,
    ProposalRecord,
    ProposalResult,
    SignedFact,
)
from resolver.core.domain.dispatch import (
    SUMMARY_MAX_BYTES,
    SUMMARY_MAX_FACTS,
    ActionSummary,
    Completion,
    DispatchSpec,
    ExecutionLease,
    ExecutionView,
    StartedExecution,
    SummaryFact,
)
from resolver.core.domain.findings import (
    UNEXPLAINED_CONFLICT,
    DispatchIdentity,
    Finding,
)
from resolver.core.domain.late_evidence import (
    LateEvidence,
    LateObservation,
    LateRecord,
    LateWatch,
)
from resolver.core.domain.outcomes import (
    OUTCOME_EVENT_SOURCE,
    OUTCOME_EVENT_TYPE_PREFIX,
    DispatchState,
    DispatchStatus,
    HistoryEntry,
    OutcomeKind,
    OutcomeRecord,
    SettledBy,
    rfc3339_ms,
)
from resolver.core.domain.recovery import (
    BACKLOG_QUEUES,
    PAGE_SIZE_HARD_CAP,
    BacklogSnapshot,
    ClaimedItem,
    CommitReport,
    ItemOutcome,
)
from resolver.core.domain.sets import (
    ESCALATABLE,
    ESCALATION_REASON,
    FINDING_ROUTE,
    TERMINAL_STATES,
    VERIFIED_KINDS,
    ControlStatus,
    Decision,
    ExecutionState,
    FindingKind,
    Outcome,
    ProviderFailure,
    ResolutionSource,
    TerminalState,
)
from resolver.core.domain.shapes import (
    ACTION_TYPE_PATTERN,
    ACTION_TYPE_REGEX,
    BIGINT_MAX,
    CAUSE_PATTERN,
    HEX64_PATTERN,
    HEX64_REGEX,
    ID_PATTERN,
    ID_REGEX,
    REASON_CODE_PATTERN,
    REASON_CODE_REGEX,
    RESULT_CODE_PATTERN,
    check_evidence_digest,
    check_mutation_id,
)

__all__ = [
    "ACTION_TYPE_PATTERN",
    "ACTION_TYPE_REGEX",
    "BACKLOG_QUEUES",
    "BIGINT_MAX",
    "CAUSE_PATTERN",
    "ESCALATABLE",
    "ESCALATION_REASON",
    "FINDING_ROUTE",
    "FIND_WORDS_MIN",
    "HEX64_PATTERN",
    "HEX64_REGEX",
    "ID_PATTERN",
    "ID_REGEX",
    "NO_FILTER",
    "OUTCOME_EVENT_SOURCE",
    "OUTCOME_EVENT_TYPE_PREFIX",
    "PAGE_SIZE_HARD_CAP",
    "REASON_CODE_PATTERN",
    "REASON_CODE_REGEX",
    "RESULT_CODE_PATTERN",
    "SUMMARY_MAX_BYTES",
    "SUMMARY_MAX_FACTS",
    "TERMINAL_STATES",
    "UNEXPLAINED_CONFLICT",
    "VERIFIED_KINDS",
    "Act",
    "ActionSummary",
    "AuditLink",
    "Authority",
    "BacklogSnapshot",
    "Case",
    "CaseAuthorization",
    "CaseControl",
    "CaseExecution",
    "CaseFilter",
    "CaseIdentity",
    "CaseList",
    "CaseResolution",
    "CaseSort",
    "ClaimedItem",
    "CommitReport",
    "Completion",
    "ControlStatus",
    "Decision",
    "DecisionFilter",
    "DecisionLimits",
    "DecisionRecord",
    "DispatchIdentity",
    "DispatchSpec",
    "DispatchState",
    "DispatchStatus",
    "ExecutionLease",
    "ExecutionState",
    "ExecutionView",
    "Finding",
    "FindingKind",
    "FoundDispatch",
    "Grant",
    "HistoryEntry",
    "ItemOutcome",
    "LateEvidence",
    "LateObservation",
    "LateRecord",
    "LateWatch",
    "ManualCommitAnswer",
    "ManualContext",
    "ManualDecision",
    "ManualQueueItem",
    "ManualResult",
    "OpenProposal",
    "Outcome",
    "OutcomeKind",
    "OutcomeRecord",
    "Principal",
    "ProposalAction",
    "ProposalClose",
    "ProposalCloseAnswer",
    "ProposalRecord",
    "ProposalResult",
    "ProviderFailure",
    "PruneMark",
    "PruneRunRecord",
    "ResolutionSource",
    "SettledBy",
    "SignedFact",
    "StartedExecution",
    "SummaryFact",
    "TerminalState",
    "action_digest",
    "canonical_json",
    "check_evidence_digest",
    "check_mutation_id",
    "rfc3339_ms",
    "sha256_hex",
]


# Last: public names read from here outside the product warn (resolver/_compat).
guard_internal(__name__)
