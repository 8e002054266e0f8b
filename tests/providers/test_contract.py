"""Every built-in provider passes the provider contract kit (resolver.evidence.contract)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from resolver.evidence.contract import ProviderContract, ProviderHarness
from resolver.evidence.receipt_server import ReceiptServer
from resolver.evidence.receipts import KeyRing
from tests.helpers.harnesses import (
    HttpReceiptHarness,
    InternalMutationHarness,
    ManualOnlyHarness,
    PackageInstallHarness,
    RunCreateHarness,
    SqlHarness,
)

BUILT_INS = ["internal_mutation", "run_create", "package_install", "http_receipt", "manual_only"]


class TestBuiltInProviders(ProviderContract):
    @pytest.fixture(params=BUILT_INS)
    def provider_harness(
        self,
        request: pytest.FixtureRequest,
        receipt_keys: KeyRing,
        receipt_server: ReceiptServer,
    ) -> Iterator[ProviderHarness]:
        name = request.param
        if name == "http_receipt":
            yield HttpReceiptHarness(receipt_server, receipt_keys)
            return
        if name == "manual_only":
            yield ManualOnlyHarness()
            return
        url = request.getfixturevalue("database_url")
        harness: SqlHarness = {
            "internal_mutation": lambda: InternalMutationHarness(url, receipt_keys),
            "run_create": lambda: RunCreateHarness(url),
            "package_install": lambda: PackageInstallHarness(url),
        }[name]()
        try:
            yield harness  # type: ignore[misc]
        finally:
            harness.close()
