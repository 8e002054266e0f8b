"""The provider contract kit: one conformance suite every evidence provider must pass.

Use it as a pytest plugin. In your conftest.py: `pytest_plugins = ["resolver.evidence.contract"]`
(gives the `receipt_keys` and `receipt_server` fixtures), then:

    class TestMyProvider(ProviderContract):
        @pytest.fixture
        def provider_harness(self) -> Iterator[ProviderHarness]:
            yield MyHarness(...)          # plants evidence, builds the provider

The suite proves verified success and failure, missing, conflict on tamper / identity drift /
oversize / extra field, still_running where the evidence can say so, unavailable, that a
page answer equals the item answers, and that `inspect` writes nothing and can be repeated.
A harness may mark a scenario `NotApplicable`, except the REQUIRED ones of an automatic
provider: those fail. Install with the `contract` extra (it brings pytest).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Protocol

import pytest

from resolver.core.domain import (
    HEX64_PATTERN,
    RESULT_CODE_PATTERN,
    DispatchIdentity,
    FindingKind,
    ProviderFailure,
)
from resolver.core.provider import Capability, EvidenceProvider, PageEvidenceProvider
from resolver.evidence.receipt_server import ReceiptServer, running_receipt_server
from resolver.evidence.receipts import KeyRing

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


class Scenario(StrEnum):
    """Evidence a harness can plant for an identity."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STILL_RUNNING = "still_running"
    TAMPERED = "tampered"
    IDENTITY_DRIFT = "identity_drift"
    OVERSIZE = "oversize"
    EXTRA_FIELD = "extra_field"


EXPECTED: Mapping[Scenario, FindingKind] = {
    Scenario.SUCCEEDED: FindingKind.VERIFIED_SUCCEEDED,
    Scenario.FAILED: FindingKind.VERIFIED_FAILED,
    Scenario.STILL_RUNNING: FindingKind.STILL_RUNNING,
    Scenario.TAMPERED: FindingKind.CONFLICT,
    Scenario.IDENTITY_DRIFT: FindingKind.CONFLICT,
    Scenario.OVERSIZE: FindingKind.CONFLICT,
    Scenario.EXTRA_FIELD: FindingKind.CONFLICT,
}
REJECTIONS = (Scenario.TAMPERED, Scenario.IDENTITY_DRIFT, Scenario.OVERSIZE, Scenario.EXTRA_FIELD)
# What every automatic provider's evidence can express: a success, a tampered copy of it, and
# one bound to another identity. A harness that cannot plant them has proved nothing, so these
# fail instead of being skipped; the other scenarios may be `NotApplicable` with a reason.
REQUIRED = (Scenario.SUCCEEDED, Scenario.TAMPERED, Scenario.IDENTITY_DRIFT)


class NotApplicable(Exception):
    """Raised by `plant` when the evidence cannot represent a scenario; say why."""


class ProviderHarness(Protocol):
    """What a provider author supplies: a provider, and a way to plant its evidence."""

    def provider(self) -> EvidenceProvider:
        """The provider under test, reading the harness's evidence source."""
        ...

    def unavailable_provider(self) -> EvidenceProvider:
        """The same provider pointed at a source that is down (refused, dead database)."""
        ...

    def identity(self) -> DispatchIdentity:
        """A fresh identity nobody has planted anything for yet."""
        ...

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        """Write the scenario's evidence as an executor/service would; or NotApplicable."""
        ...

    def snapshot(self) -> object:
        """Everything the evidence source holds, comparable with `==` (rows with xmin for
        SQL; stored answers and non-GET requests for HTTP)."""
        ...


def expected_kind(provider: EvidenceProvider, scenario: Scenario | None) -> FindingKind:
    """What a provider must answer; a manual-only provider answers `unsupported` to all."""
    if provider.capability is Capability.MANUAL_ONLY:
        return FindingKind.UNSUPPORTED
    return FindingKind.MISSING if scenario is None else EXPECTED[scenario]


def planted(harness: ProviderHarness, scenario: Scenario) -> DispatchIdentity:
    identity = harness.identity()
    try:
        harness.plant(scenario, identity)
    except NotApplicable as exc:
        if scenario in REQUIRED and _is_automatic(harness):
            pytest.fail(
                f"{scenario.value} must apply to an automatic provider ({exc}): "
                f"plant {', '.join(s.value for s in REQUIRED)} or declare it manual_only"
            )
        pytest.skip(f"{scenario.value} not applicable: {exc}")
    return identity


def _is_automatic(harness: ProviderHarness) -> bool:
    return harness.provider().capability is Capability.AUTOMATIC


class ProviderContract:
    """Subclass with a `provider_harness` fixture; every test below must pass."""

    def test_required_scenarios_apply(self, provider_harness: ProviderHarness) -> None:
        """Skips are not a pass: an automatic provider plants every REQUIRED scenario."""
        if not _is_automatic(provider_harness):
            pytest.skip("a manual-only provider answers unsupported to every scenario")
        for scenario in REQUIRED:
            planted(provider_harness, scenario)

    def test_verified_success_carries_digest_and_result_code(
        self, provider_harness: ProviderHarness
    ) -> None:
        self._check_verified(provider_harness, Scenario.SUCCEEDED)

    def test_verified_failure_carries_digest_and_result_code(
        self, provider_harness: ProviderHarness
    ) -> None:
        self._check_verified(provider_harness, Scenario.FAILED)

    def test_no_evidence_is_missing(self, provider_harness: ProviderHarness) -> None:
        provider = provider_harness.provider()
        finding = provider.inspect(provider_harness.identity())
        assert finding.kind is expected_kind(provider, None)

    @pytest.mark.parametrize("scenario", REJECTIONS, ids=lambda s: s.value)
    def test_untrustworthy_evidence_is_conflict_never_success(
        self, provider_harness: ProviderHarness, scenario: Scenario
    ) -> None:
        identity = planted(provider_harness, scenario)
        provider = provider_harness.provider()
        finding = provider.inspect(identity)
        assert not finding.kind.is_verified
        assert finding.kind is expected_kind(provider, scenario)
        if finding.kind is FindingKind.CONFLICT:
            # A person decides a conflict: the finding says why (its cause, a reason code).
            assert finding.cause is not None, f"{scenario.value}: a conflict names its cause"

    def test_still_running(self, provider_harness: ProviderHarness) -> None:
        identity = planted(provider_harness, Scenario.STILL_RUNNING)
        provider = provider_harness.provider()
        assert provider.inspect(identity).kind is expected_kind(provider, Scenario.STILL_RUNNING)

    def test_source_down_is_unavailable(self, provider_harness: ProviderHarness) -> None:
        identity = planted(provider_harness, Scenario.SUCCEEDED)
        provider = provider_harness.unavailable_provider()
        want = (
            FindingKind.UNSUPPORTED
            if provider.capability is Capability.MANUAL_ONLY
            else FindingKind.UNAVAILABLE
        )
        finding = provider.inspect(identity)
        assert finding.kind is want
        # A source that is down is an outage (or left unclassified), never a configuration
        # error: that would page an operator for something that heals by itself.
        assert finding.failure in (None, ProviderFailure.OUTAGE)

    def test_evidence_for_one_dispatch_never_settles_another(
        self, provider_harness: ProviderHarness
    ) -> None:
        planted(provider_harness, Scenario.SUCCEEDED)
        provider = provider_harness.provider()
        assert not provider.inspect(provider_harness.identity()).kind.is_verified

    def test_inspect_writes_nothing_and_repeats_exactly(
        self, provider_harness: ProviderHarness
    ) -> None:
        identities = dict(self._plant_every_scenario(provider_harness))
        provider = provider_harness.provider()
        before = provider_harness.snapshot()
        first = {s: provider.inspect(i) for s, i in identities.items()}
        second = {s: provider.inspect(i) for s, i in identities.items()}
        assert first == second  # same kinds, same digests: safe to call twice
        assert provider_harness.snapshot() == before  # nothing written
        for scenario, finding in first.items():
            assert finding.kind is expected_kind(provider, scenario)

    def test_page_answer_equals_item_answers(self, provider_harness: ProviderHarness) -> None:
        provider = provider_harness.provider()
        if not isinstance(provider, PageEvidenceProvider):
            pytest.skip("the provider answers item by item (no inspect_page)")
        identities = [i for _, i in self._plant_every_scenario(provider_harness)]
        identities.append(provider_harness.identity())  # and one with nothing planted
        before = provider_harness.snapshot()
        page = provider.inspect_page(identities)
        assert set(page) == {i.dispatch_id for i in identities}
        assert page == {i.dispatch_id: provider.inspect(i) for i in identities}
        assert provider_harness.snapshot() == before

    def _check_verified(self, harness: ProviderHarness, scenario: Scenario) -> None:
        identity = planted(harness, scenario)
        provider = harness.provider()
        finding = provider.inspect(identity)
        assert finding.kind is expected_kind(provider, scenario)
        if finding.kind.is_verified:
            assert finding.evidence_digest and HEX64_PATTERN.match(finding.evidence_digest)
            assert finding.result_code and RESULT_CODE_PATTERN.match(finding.result_code)

    @staticmethod
    def _plant_every_scenario(
        harness: ProviderHarness,
    ) -> Iterator[tuple[Scenario | None, DispatchIdentity]]:
        yield None, harness.identity()
        for scenario in Scenario:
            identity = harness.identity()
            try:
                harness.plant(scenario, identity)
            except NotApplicable:
                continue
            yield scenario, identity


# -- plugin fixtures ------------------------------------------------------------------------


@pytest.fixture
def receipt_keys() -> KeyRing:
    """An ephemeral key ring (one random kid) for signing and verifying test receipts."""
    return KeyRing.ephemeral("contract-test")


@pytest.fixture
def receipt_server() -> Iterator[ReceiptServer]:
    """A real HTTP receipt service on 127.0.0.1 (port chosen by the OS)."""
    with running_receipt_server() as server:
        yield server
