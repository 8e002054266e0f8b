"""The executor SDK: the execution client and receipt writing, what an executor imports."""

from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.executor.receipts import WrittenReceipt, write_receipt
from resolver.executor.side_effects import RunResult, SideEffect, SideEffectRunner

__all__ = [
    "CompletionResult",
    "ExecutionClient",
    "RunResult",
    "SideEffect",
    "SideEffectRunner",
    "WrittenReceipt",
    "write_receipt",
]
