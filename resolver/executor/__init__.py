"""The executor API: everything an executor imports, from this one module.

`from resolver.executor import SideEffectRunner, DispatchSpec, Outcome, ...`: the names in
`__all__` (docs/executor-sdk.md lists them) are public and follow the version policy
(docs/versioning.md); the submodules behind them are not.
"""

from resolver.core.domain import (
    ActionSummary,
    Completion,
    DispatchIdentity,
    DispatchSpec,
    ExecutionLease,
    ExecutionState,
    ExecutionView,
    Outcome,
    ResolutionSource,
    SummaryFact,
    action_digest,
    sha256_hex,
)
from resolver.core.errors import (
    CommitUnknown,
    FenceConflict,
    InvalidDispatch,
    LeaseLost,
    MutationNotCommitted,
    NotFound,
    NotLeasable,
    ReceiptRejected,
    ResolverError,
    StorageUnavailable,
)
from resolver.core.ports import ExecutionStore
from resolver.db.connect import Pooler
from resolver.db.store.execution import PostgresExecutionStore
from resolver.db.store.handle import PostgresHandle
from resolver.evidence.object_store import ObjectStoreSettings
from resolver.evidence.receipts import KeyRing
from resolver.executor.bindings import (
    git_commit_evidence_digest,
    git_commit_trailer,
    idempotency_binding,
    oci_annotations,
    oci_manifest_evidence_digest,
)
from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.executor.object_receipts import (
    PublicationError,
    PublicationFailed,
    PublicationUnknown,
    PublishedReceipt,
    ReceiptAlreadyPublished,
    ReceiptPublisher,
)
from resolver.executor.receipts import WrittenReceipt, write_receipt
from resolver.executor.side_effects import RunResult, SideEffect, SideEffectRunner

__all__ = [
    "ActionSummary",
    "CommitUnknown",
    "Completion",
    "CompletionResult",
    "DispatchIdentity",
    "DispatchSpec",
    "ExecutionClient",
    "ExecutionLease",
    "ExecutionState",
    "ExecutionStore",
    "ExecutionView",
    "FenceConflict",
    "InvalidDispatch",
    "KeyRing",
    "LeaseLost",
    "MutationNotCommitted",
    "NotFound",
    "NotLeasable",
    "ObjectStoreSettings",
    "Outcome",
    "Pooler",
    "PostgresExecutionStore",
    "PostgresHandle",
    "PublicationError",
    "PublicationFailed",
    "PublicationUnknown",
    "PublishedReceipt",
    "ReceiptAlreadyPublished",
    "ReceiptPublisher",
    "ReceiptRejected",
    "ResolutionSource",
    "ResolverError",
    "RunResult",
    "SideEffect",
    "SideEffectRunner",
    "StorageUnavailable",
    "SummaryFact",
    "WrittenReceipt",
    "action_digest",
    "git_commit_evidence_digest",
    "git_commit_trailer",
    "idempotency_binding",
    "oci_annotations",
    "oci_manifest_evidence_digest",
    "sha256_hex",
    "write_receipt",
]
