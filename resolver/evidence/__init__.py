"""The provider API: everything an evidence provider imports, from this one module.

`from resolver.evidence import Capability, Finding, FindingKind, parse_provider_settings, ...`:
the names in `__all__` (docs/providers.md lists them) are public and follow the version
policy (docs/versioning.md); the submodules behind them are not. The contract kit is the
pytest plugin `resolver.evidence.contract`. Names load on first use, so the product's own
imports of one submodule (the demo's receipts) do not pay for the whole surface.

Nothing here can settle a dispatch; the test rig of this repository (fabricated-evidence
providers, test databases) lives in tests/support.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from resolver.core.declarations import (
        DeclaredFactory,
        ProviderDeclaration,
        ProviderSchema,
        Reason,
        RetainedTable,
        declare,
    )
    from resolver.core.domain import (
        DispatchIdentity,
        Finding,
        FindingKind,
        Outcome,
        ProviderFailure,
        action_digest,
        canonical_json,
        sha256_hex,
    )
    from resolver.core.errors import (
        ConfigError,
        ReceiptRejected,
        ResolverError,
        SourceMisconfigured,
        StorageUnavailable,
    )
    from resolver.core.provider import (
        Capability,
        EvidenceProvider,
        PageEvidenceProvider,
        ProviderFactory,
        parse_provider_settings,
    )
    from resolver.db.connect import Pooler
    from resolver.db.evidence import SQL_SOURCE_REASONS, ReadOnlyDatabase, Row
    from resolver.evidence.readonly_http import (
        HTTP_SOURCE_REASONS,
        HttpReply,
        HttpUnavailable,
        MethodNotAllowed,
        ReadOnlyHttpClient,
        TlsSettings,
    )
    from resolver.evidence.receipts import (
        MAX_RAW_RECEIPT_BYTES,
        MAX_RECEIPT_BYTES,
        RECEIPT_REASONS,
        KeyRing,
        RejectReason,
        VerifiedReceipt,
        receipt_finding,
        verify_receipt,
    )

# Each public name and the module that defines it (tests/unit/test_public_imports.py checks
# this table against the imports above, so a type checker and the runtime see one surface).
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "DeclaredFactory",
            "ProviderDeclaration",
            "ProviderSchema",
            "Reason",
            "RetainedTable",
            "declare",
        ),
        "resolver.core.declarations",
    ),
    **dict.fromkeys(
        (
            "DispatchIdentity",
            "Finding",
            "FindingKind",
            "Outcome",
            "ProviderFailure",
            "action_digest",
            "canonical_json",
            "sha256_hex",
        ),
        "resolver.core.domain",
    ),
    **dict.fromkeys(
        (
            "ConfigError",
            "ReceiptRejected",
            "ResolverError",
            "SourceMisconfigured",
            "StorageUnavailable",
        ),
        "resolver.core.errors",
    ),
    **dict.fromkeys(
        (
            "Capability",
            "EvidenceProvider",
            "PageEvidenceProvider",
            "ProviderFactory",
            "parse_provider_settings",
        ),
        "resolver.core.provider",
    ),
    **dict.fromkeys(("Pooler",), "resolver.db.connect"),
    **dict.fromkeys(("SQL_SOURCE_REASONS", "ReadOnlyDatabase", "Row"), "resolver.db.evidence"),
    **dict.fromkeys(
        (
            "HTTP_SOURCE_REASONS",
            "HttpReply",
            "HttpUnavailable",
            "MethodNotAllowed",
            "ReadOnlyHttpClient",
            "TlsSettings",
        ),
        "resolver.evidence.readonly_http",
    ),
    **dict.fromkeys(
        (
            "MAX_RAW_RECEIPT_BYTES",
            "MAX_RECEIPT_BYTES",
            "RECEIPT_REASONS",
            "KeyRing",
            "RejectReason",
            "VerifiedReceipt",
            "receipt_finding",
            "verify_receipt",
        ),
        "resolver.evidence.receipts",
    ),
}

__all__ = [
    "HTTP_SOURCE_REASONS",
    "MAX_RAW_RECEIPT_BYTES",
    "MAX_RECEIPT_BYTES",
    "RECEIPT_REASONS",
    "SQL_SOURCE_REASONS",
    "Capability",
    "ConfigError",
    "DeclaredFactory",
    "DispatchIdentity",
    "EvidenceProvider",
    "Finding",
    "FindingKind",
    "HttpReply",
    "HttpUnavailable",
    "KeyRing",
    "MethodNotAllowed",
    "Outcome",
    "PageEvidenceProvider",
    "Pooler",
    "ProviderDeclaration",
    "ProviderFactory",
    "ProviderFailure",
    "ProviderSchema",
    "ReadOnlyDatabase",
    "ReadOnlyHttpClient",
    "Reason",
    "ReceiptRejected",
    "RejectReason",
    "ResolverError",
    "RetainedTable",
    "Row",
    "SourceMisconfigured",
    "StorageUnavailable",
    "TlsSettings",
    "VerifiedReceipt",
    "action_digest",
    "canonical_json",
    "declare",
    "parse_provider_settings",
    "receipt_finding",
    "sha256_hex",
    "verify_receipt",
]

# Hidden from type checkers: a module `__getattr__` would make every name, a misspelt one
# too, importable as `Any`. They see the imports above, and an unknown name is an error.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
