"""Canonical JSON and the digests over it: the action digest and sha256 in hex."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from resolver.core.errors import InvalidDispatch


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
