"""The executor API: everything an executor imports, from this one module.

`from resolver.executor import SideEffectRunner, DispatchSpec, Outcome, ...`: the names in
`__all__` (docs/executor-sdk.md lists them) are public and follow the version policy
(docs/versioning.md); the submodules behind them are not.
"""

from resolver._compat.postgres_store import PostgresStore
from resolver.core.domain import (
    ActionSummary,
    Completion,
    DispatchSpec,
    ExecutionLease,
    Outcome,
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
from resolver.db.store.execution import PostgresExecutionStore
from resolver.db.store.handle import PostgresHandle
from resolver.evidence.receipts import KeyRing
from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.executor.receipts import WrittenReceipt, write_receipt
from resolver.executor.side_effects import RunResult, SideEffect, SideEffectRunner

__all__ = [
    "ActionSummary",
    "CommitUnknown",
    "Completion",
    "CompletionResult",
    "DispatchSpec",
    "ExecutionClient",
    "ExecutionLease",
    "FenceConflict",
    "InvalidDispatch",
    "KeyRing",
    "LeaseLost",
    "MutationNotCommitted",
    "NotFound",
    "NotLeasable",
    "Outcome",
    "PostgresExecutionStore",
    "PostgresHandle",
    "PostgresStore",
    "ReceiptRejected",
    "ResolverError",
    "RunResult",
    "SideEffect",
    "SideEffectRunner",
    "StorageUnavailable",
    "SummaryFact",
    "WrittenReceipt",
    "action_digest",
    "sha256_hex",
    "write_receipt",
]
