"""Escalation, when evidence is missing: how long a non-final finding may last.

Per action type, in the provider config (`escalate_after_seconds`), a window per non-final
finding kind, counted from the case's first inspection. When the window of the finding just
observed has elapsed, the page commit moves the control to the manual queue with the reason
`evidence_window_elapsed`, on the database clock and under the same fences as any outcome.
The defaults: a package install, an external API call and a side effect whose receipt object
is still `missing` after the window need a person to verify them; an internal mutation and a
run creation stay recovery-required (still decidable by a human at any time); no default
ceiling for `still_running` or `unavailable`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from resolver.core.domain import ESCALATABLE, FindingKind
from resolver.core.errors import ConfigError

CONFIG_KEY = "escalate_after_seconds"
# One hour: long enough for an install or a downstream receipt that is merely slow to land
# (the provider keeps looking, with backoff, all that time), short enough that an on-call
# person still finds the trail warm.
DEFAULT_MISSING_WINDOW_SECONDS = 3600
# By provider name: the built-ins whose missing evidence needs a human after the window.
DEFAULT_WINDOWS_SECONDS: Mapping[str, Mapping[FindingKind, float]] = {
    "package_install": {FindingKind.MISSING: DEFAULT_MISSING_WINDOW_SECONDS},
    "http_receipt": {FindingKind.MISSING: DEFAULT_MISSING_WINDOW_SECONDS},
    # A side effect outside PostgreSQL whose receipt object never came: like an external call.
    "object_receipt": {FindingKind.MISSING: DEFAULT_MISSING_WINDOW_SECONDS},
}
# A window longer than a year is a typo, not a policy.
MAX_WINDOW_SECONDS = 366 * 86_400


class EscalationPolicy(msgspec.Struct, frozen=True):
    """The window (ms) of each non-final finding kind that escalates; absent kinds never do."""

    windows_ms: Mapping[FindingKind, int] = msgspec.field(default_factory=dict)

    def after_ms(self, kind: FindingKind) -> int | None:
        return self.windows_ms.get(kind)


NEVER = EscalationPolicy()


def escalation_policy(provider: str, raw: Any) -> EscalationPolicy:
    """The policy of one action type: its provider's defaults, overridden by the config's
    `escalate_after_seconds` mapping (a kind set to null never escalates)."""
    windows: dict[FindingKind, float | None] = dict(DEFAULT_WINDOWS_SECONDS.get(provider, {}))
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
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{CONFIG_KEY}.{key}: must be a number of seconds or null")
    if not 0 < value <= MAX_WINDOW_SECONDS:
        raise ConfigError(
            f"{CONFIG_KEY}.{key}: must be more than 0 and at most {MAX_WINDOW_SECONDS} seconds"
        )
    return float(value)
