"""The outcome feed's API: what a runtime imports to learn every settled outcome.

`from resolver.outcomes import OutcomeFeed`: the names in `__all__` (docs/outcomes.md lists
them) are public and follow the version policy (docs/versioning.md); the submodules behind
them are not.
"""

from resolver.core.domain import (
    OUTCOME_EVENT_SOURCE,
    DispatchState,
    DispatchStatus,
    HistoryEntry,
    OutcomeKind,
    OutcomeRecord,
    SettledBy,
)
from resolver.core.errors import NotFound, OutcomeTimeout, StorageUnavailable
from resolver.outcomes.feed import OutcomeFeed, Start, Wake

__all__ = [
    "OUTCOME_EVENT_SOURCE",
    "DispatchState",
    "DispatchStatus",
    "HistoryEntry",
    "NotFound",
    "OutcomeFeed",
    "OutcomeKind",
    "OutcomeRecord",
    "OutcomeTimeout",
    "SettledBy",
    "Start",
    "StorageUnavailable",
    "Wake",
]
