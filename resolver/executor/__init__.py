"""The executor SDK: the execution client and receipt writing, what an executor imports."""

from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.executor.receipts import WrittenReceipt, write_receipt

__all__ = ["CompletionResult", "ExecutionClient", "WrittenReceipt", "write_receipt"]
