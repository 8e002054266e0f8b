"""The contract kit has teeth: providers that trust, guess or write are caught by it."""

from __future__ import annotations

import psycopg
import pytest

from resolver.core.domain import DispatchIdentity, Finding, FindingKind, Outcome, sha256_hex
from resolver.core.provider import Capability, EvidenceProvider
from resolver.evidence.contract import NotApplicable, ProviderContract, Scenario
from resolver.evidence.receipt_server import ReceiptServer
from resolver.evidence.receipts import KeyRing
from tests.helpers.harnesses import HttpReceiptHarness, InternalMutationHarness

KIT = ProviderContract()


class TrustsAnyReceipt:
    """Believes a 200 without checking signature or identity."""

    capability = Capability.AUTOMATIC
    timeout_seconds = 1.0

    def __init__(self, inner: EvidenceProvider) -> None:
        self._inner = inner

    def inspect(self, identity: DispatchIdentity) -> Finding:
        finding = self._inner.inspect(identity)
        if finding.kind is FindingKind.CONFLICT:
            return Finding.verified(Outcome.SUCCEEDED, sha256_hex("trusted"), "ok")
        return finding


class MissingMeansFailed(TrustsAnyReceipt):
    """Guesses: no evidence, so it must not have happened."""

    def inspect(self, identity: DispatchIdentity) -> Finding:
        finding = self._inner.inspect(identity)
        if finding.kind is FindingKind.MISSING:
            return Finding.verified(Outcome.FAILED, sha256_hex("guess"), "not_found")
        return finding


class AuditsItsReads(TrustsAnyReceipt):
    """Writes an audit row on every inspect: a side effect, however harmless it looks."""

    def __init__(self, inner: EvidenceProvider, database_url: str) -> None:
        super().__init__(inner)
        self._url = database_url

    def inspect(self, identity: DispatchIdentity) -> Finding:
        with psycopg.connect(self._url, autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS inspect_audit (dispatch_id text)")
            conn.execute("INSERT INTO inspect_audit VALUES (%s)", (identity.dispatch_id,))
        return self._inner.inspect(identity)


class Wrapped(HttpReceiptHarness):
    def __init__(self, server: ReceiptServer, keys: KeyRing, wrap: type[TrustsAnyReceipt]) -> None:
        super().__init__(server, keys)
        self._wrap = wrap

    def provider(self) -> EvidenceProvider:
        return self._wrap(super().provider())


def test_kit_catches_a_provider_that_trusts_tampered_receipts(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    harness = Wrapped(receipt_server, receipt_keys, TrustsAnyReceipt)
    with pytest.raises(AssertionError):
        KIT.test_untrustworthy_evidence_is_conflict_never_success(harness, Scenario.TAMPERED)


def test_kit_catches_a_provider_that_reads_missing_as_failed(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    harness = Wrapped(receipt_server, receipt_keys, MissingMeansFailed)
    with pytest.raises(AssertionError):
        KIT.test_no_evidence_is_missing(harness)


def test_kit_catches_a_provider_that_writes(database_url: str, receipt_keys: KeyRing) -> None:
    harness = InternalMutationHarness(database_url, receipt_keys)
    try:
        inner = harness.provider
        harness.provider = lambda: AuditsItsReads(inner(), database_url)  # type: ignore[method-assign]
        with pytest.raises(AssertionError):
            KIT.test_inspect_writes_nothing_and_repeats_exactly(harness)
    finally:
        harness.close()


class NothingApplies(HttpReceiptHarness):
    """Marks every scenario not applicable: every check would skip, and skips are not a pass."""

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        raise NotApplicable("this harness plants nothing")


def test_kit_fails_a_harness_that_marks_every_scenario_not_applicable(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    harness = NothingApplies(receipt_server, receipt_keys)
    with pytest.raises(pytest.fail.Exception, match="must apply to an automatic provider"):
        KIT.test_required_scenarios_apply(harness)
    with pytest.raises(pytest.fail.Exception, match="succeeded must apply"):
        KIT.test_verified_success_carries_digest_and_result_code(harness)
    with pytest.raises(pytest.fail.Exception, match="tampered must apply"):
        KIT.test_untrustworthy_evidence_is_conflict_never_success(harness, Scenario.TAMPERED)
    # Optional scenarios still skip with their reason.
    with pytest.raises(pytest.skip.Exception, match="still_running not applicable"):
        KIT.test_still_running(harness)


def test_the_unwrapped_providers_pass_the_same_checks(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    harness = HttpReceiptHarness(receipt_server, receipt_keys)
    KIT.test_untrustworthy_evidence_is_conflict_never_success(harness, Scenario.TAMPERED)
    KIT.test_no_evidence_is_missing(harness)
    KIT.test_inspect_writes_nothing_and_repeats_exactly(harness)


class GivesAnUndeclaredReason(TrustsAnyReceipt):
    """Says why a receipt is missing with a code nobody declared: the console could only show
    it raw, and no one knows whether it suggests tampering."""

    def inspect(self, identity: DispatchIdentity) -> Finding:
        finding = self._inner.inspect(identity)
        if finding.kind is FindingKind.MISSING:
            return Finding(FindingKind.MISSING, cause="receipt_lost_in_transit")
        return finding


def test_kit_catches_a_reason_the_provider_gives_but_never_declared(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    harness = Wrapped(receipt_server, receipt_keys, GivesAnUndeclaredReason)
    with pytest.raises(AssertionError, match="receipt_lost_in_transit"):
        KIT.test_every_reason_it_gives_is_declared(harness)
    KIT.test_every_reason_it_gives_is_declared(HttpReceiptHarness(receipt_server, receipt_keys))


class NamesAnUndeclaredEntryPoint(HttpReceiptHarness):
    # Installed by the test-support distribution, with a plain factory that declares nothing.
    entry_point = "scripted"


class NamesNoEntryPoint(HttpReceiptHarness):
    entry_point = None  # type: ignore[assignment]


def test_kit_fails_an_entry_point_that_declares_nothing_and_skips_a_harness_naming_none(
    receipt_server: ReceiptServer, receipt_keys: KeyRing
) -> None:
    with pytest.raises(pytest.fail.Exception, match="declares nothing"):
        KIT.test_declaration_is_registered_and_well_formed(
            NamesAnUndeclaredEntryPoint(receipt_server, receipt_keys)
        )
    with pytest.raises(pytest.skip.Exception, match="names no entry_point"):
        KIT.test_every_reason_it_gives_is_declared(NamesNoEntryPoint(receipt_server, receipt_keys))
