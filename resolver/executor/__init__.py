"""The executor SDK: the execution client and receipt writing, what an executor imports."""

from resolver.core.domain import ActionSummary, DispatchSpec, SummaryFact
from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.executor.receipts import WrittenReceipt, write_receipt
from resolver.executor.side_effects import RunResult, SideEffect, SideEffectRunner

__all__ = [
    "ActionSummary",
    "CompletionResult",
    "DispatchSpec",
    "ExecutionClient",
    "RunResult",
    "SideEffect",
    "SideEffectRunner",
    "SummaryFact",
    "WrittenReceipt",
    "write_receipt",
]
