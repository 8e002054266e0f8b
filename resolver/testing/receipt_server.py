"""Deprecated: the previous release's `resolver.testing.receipt_server`, kept for one release.
Import from `resolver.evidence.contract` instead (CHANGELOG.md, Upgrading); every name here
warns once per importing line."""

from __future__ import annotations

from typing import Any

from resolver._deprecated import forward

_forward = forward(__name__, "resolver.evidence.receipt_server")


def __getattr__(name: str) -> Any:
    return _forward(name)
