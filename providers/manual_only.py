"""`manual_only`: for shell commands and anything without a side-effect-free query."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from resolver.evidence import (
    Capability,
    ConfigError,
    DispatchIdentity,
    Finding,
    FindingKind,
    Reason,
    declare,
)


class ManualOnlyProvider:
    """Always `unsupported`: the dispatch waits for a human in the manual queue."""

    capability = Capability.MANUAL_ONLY
    timeout_seconds = 0.0

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        if settings:
            raise ConfigError(
                f"{sorted(settings)[0]}: provider manual_only takes no settings; remove it"
            )

    def inspect(self, identity: DispatchIdentity) -> Finding:  # noqa: ARG002 - by design
        return Finding(FindingKind.UNSUPPORTED, cause="manual_only")


@declare(reasons=(Reason("manual_only", "no provider can check this action type: a person must"),))
def create(settings: Mapping[str, Any]) -> ManualOnlyProvider:
    """The `resolver.providers` entry point: no settings, always `unsupported`."""
    return ManualOnlyProvider(settings)
