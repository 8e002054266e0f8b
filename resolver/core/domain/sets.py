"""The domain's sets: execution states, control statuses, finding kinds and their routing,
provider failures, outcomes, resolution sources and decisions.

Each is spelled once here and once in the database
(resolver/db/schema/functions/01_recovery_core.sql); tests/integration/schema/test_domain_sets.py
compares the two.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Literal, get_args


class ExecutionState(StrEnum):
    LEASED = "leased"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"


# The states an execution never leaves (the database's resolver_terminal_states()).
TerminalState = Literal["succeeded", "failed", "blocked"]
TERMINAL_STATES: frozenset[ExecutionState] = frozenset(map(ExecutionState, get_args(TerminalState)))


class ControlStatus(StrEnum):
    ARMED = "armed"
    MANUAL = "manual"
    RESOLVED = "resolved"


class FindingKind(StrEnum):
    VERIFIED_SUCCEEDED = "verified_succeeded"
    VERIFIED_FAILED = "verified_failed"
    STILL_RUNNING = "still_running"
    MISSING = "missing"
    CONFLICT = "conflict"
    UNSUPPORTED = "unsupported"
    UNAVAILABLE = "unavailable"

    @property
    def is_verified(self) -> bool:
        return self in VERIFIED_KINDS


# The status each finding sends its control to: the database's routing rule
# (resolver_finding_status), which the page commit applies; Python reads it from here only to
# validate configuration and to name what a commit did, never to route.
FINDING_ROUTE: Mapping[FindingKind, ControlStatus] = {
    FindingKind.VERIFIED_SUCCEEDED: ControlStatus.RESOLVED,
    FindingKind.VERIFIED_FAILED: ControlStatus.RESOLVED,
    FindingKind.STILL_RUNNING: ControlStatus.ARMED,
    FindingKind.MISSING: ControlStatus.ARMED,
    FindingKind.CONFLICT: ControlStatus.MANUAL,
    FindingKind.UNSUPPORTED: ControlStatus.MANUAL,
    FindingKind.UNAVAILABLE: ControlStatus.ARMED,
}
VERIFIED_KINDS = frozenset(
    k for k, route in FINDING_ROUTE.items() if route is ControlStatus.RESOLVED
)


# The manual reason of a control whose non-final finding outlasted its escalation window.
ESCALATION_REASON = "evidence_window_elapsed"
# The findings an escalation window may be configured for: those the routing re-arms (neither
# verified nor already waiting for a human). Read to validate configuration only: the commit
# itself decides and reports each escalation.
ESCALATABLE = frozenset(k for k, route in FINDING_ROUTE.items() if route is ControlStatus.ARMED)


class ProviderFailure(StrEnum):
    """Why an evidence provider could not answer (its finding is then `unavailable`).

    `outage` and `timeout` are transient: the source is down, slow or restarting, and the
    backoff retries. `configuration` will not heal by waiting: a missing GRANT, a broken
    query, an undefined table or column, a credential the source refuses (HTTP 401/403).
    `error` is a provider that raised: a bug, reported like a configuration error.
    """

    OUTAGE = "outage"
    TIMEOUT = "timeout"
    CONFIGURATION = "configuration"
    ERROR = "error"

    @property
    def needs_operator(self) -> bool:
        return self in (ProviderFailure.CONFIGURATION, ProviderFailure.ERROR)


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ResolutionSource(StrEnum):
    AUTOMATIC = "automatic"
    MANUAL = "manual"


class Decision(StrEnum):
    CONFIRM_SUCCEEDED = "confirm_succeeded"
    CONFIRM_FAILED = "confirm_failed"
    ABANDON_UNKNOWN = "abandon_unknown"

    @property
    def terminal_state(self) -> ExecutionState:
        return _TERMINAL_STATE[self]

    @classmethod
    def settling(cls, outcome: ExecutionState) -> Decision:
        """The decision whose terminal state is `outcome`."""
        return next(d for d, state in _TERMINAL_STATE.items() if state is outcome)


_TERMINAL_STATE = {
    Decision.CONFIRM_SUCCEEDED: ExecutionState.SUCCEEDED,
    Decision.CONFIRM_FAILED: ExecutionState.FAILED,
    Decision.ABANDON_UNKNOWN: ExecutionState.BLOCKED,
}
