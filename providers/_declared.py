"""What the built-ins share in their declarations: the receipt reasons by code, one window."""

from __future__ import annotations

from resolver.evidence import RECEIPT_REASONS, FindingKind, Reason

# One hour: long enough for an install or a downstream receipt that is merely slow to land
# (the provider keeps looking, with backoff, all that time), short enough that an on-call
# person still finds the trail warm. For evidence written in the same transaction as the
# change (an internal mutation, a run's origin fact) there is no such wait: those providers
# declare no window, and their cases stay recovery-required until a person decides.
MISSING_FOR_AN_HOUR = {FindingKind.MISSING: 3600.0}

_RECEIPT_REASONS = {reason.code: reason for reason in RECEIPT_REASONS}


def receipt_reason(code: str) -> Reason:
    """A receipt reason by code, for a provider that gives the same code for the same fact
    without verifying a receipt (one code, one meaning)."""
    return _RECEIPT_REASONS[code]
