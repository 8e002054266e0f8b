"""Deprecated: the previous release's `resolver.receipts`, kept for one release. Import from
`resolver.evidence` (providers) or `resolver.executor` (executors) instead (CHANGELOG.md,
Upgrading); every name here warns once per importing line."""

from __future__ import annotations

from typing import Any

from resolver._deprecated import forward

_forward = forward(__name__, "resolver.evidence.receipts")


def __getattr__(name: str) -> Any:
    return _forward(name)
