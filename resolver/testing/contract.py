"""Deprecated: the previous release's contract kit plugin, kept for one release.

`pytest_plugins = ["resolver.testing.contract"]` still works: pytest finds the fixtures
(`receipt_keys`, `receipt_server`) among this module's names, so they are imported here, not
resolved on use. Use `pytest_plugins = ["resolver.evidence.contract"]` and import the kit from
there (CHANGELOG.md, Upgrading).
"""

from __future__ import annotations

import warnings

from resolver.evidence.contract import (
    EXPECTED,
    REJECTIONS,
    REQUIRED,
    NotApplicable,
    ProviderContract,
    ProviderHarness,
    ReceiptServer,
    Scenario,
    expected_kind,
    planted,
    receipt_keys,
    receipt_server,
)

warnings.warn(
    "resolver.testing.contract is deprecated and will be removed in the next release: "
    "use the pytest plugin resolver.evidence.contract and import the kit from it "
    "(see CHANGELOG.md, Upgrading)",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "EXPECTED",
    "REJECTIONS",
    "REQUIRED",
    "NotApplicable",
    "ProviderContract",
    "ProviderHarness",
    "ReceiptServer",
    "Scenario",
    "expected_kind",
    "planted",
    "receipt_keys",
    "receipt_server",
]
