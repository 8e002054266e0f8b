"""Escalation, when evidence is missing: how long a non-final finding may last.

Per action type, a window per non-final finding kind, counted from the case's first
inspection: the provider's declared defaults (resolver.core.declarations), overridden by the
provider config (`escalate_after_seconds`). When the window of the finding just observed has
elapsed, the page commit moves the control to the manual queue with the reason
`evidence_window_elapsed`, on the database clock and under the same fences as any outcome.
A provider that declares no window for a kind never escalates it unless the config says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from resolver.core.declarations import MAX_WINDOW_SECONDS, check_window
from resolver.core.domain import ESCALATABLE, FindingKind
from resolver.core.errors import ConfigError

CONFIG_KEY = "escalate_after_seconds"


class EscalationPolicy(msgspec.Struct, frozen=True):
    """The window (ms) of each non-final finding kind that escalates; absent kinds never do."""

    windows_ms: Mapping[FindingKind, int] = msgspec.field(default_factory=dict)

    def after_ms(self, kind: FindingKind) -> int | None:
        return self.windows_ms.get(kind)


NEVER = EscalationPolicy()


def escalation_policy(defaults: Mapping[FindingKind, float], raw: Any) -> EscalationPolicy:
    """The policy of one action type: its provider's declared defaults, overridden by the
    config's `escalate_after_seconds` mapping (a kind set to null never escalates)."""
    windows: dict[FindingKind, float | None] = dict(defaults)
    if raw is not None:
        if not isinstance(raw, Mapping):
            raise ConfigError(
                f"{CONFIG_KEY} must be a mapping of finding kind to seconds, e.g. {{missing: 3600}}"
            )
        for key, value in raw.items():
            windows[_kind(key)] = _seconds(key, value)
    return EscalationPolicy(
        {kind: int(seconds * 1000) for kind, seconds in windows.items() if seconds is not None}
    )


def _kind(key: object) -> FindingKind:
    allowed = sorted(k.value for k in ESCALATABLE)
    try:
        kind = FindingKind(str(key))
    except ValueError:
        kind = None
    if kind is None or kind not in ESCALATABLE:
        raise ConfigError(f"{CONFIG_KEY}.{key}: not a finding that can escalate; use {allowed}")
    return kind


def _seconds(key: object, value: object) -> float | None:
    if value is None:
        return None
    try:
        check_window(_kind(key), value)
    except ValueError:
        raise ConfigError(
            f"{CONFIG_KEY}.{key}: must be a number of seconds, more than 0 and at most "
            f"{MAX_WINDOW_SECONDS}, or null"
        ) from None
    assert isinstance(value, int | float)
    return float(value)
