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
provider: those fail. A harness that names its provider's `entry_point` also has the
provider's declaration checked: the entry point is installed and declares itself, and every
reason code the provider gave in any scenario is declared. Install with the `contract` extra
(it brings pytest).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from enum import StrEnum
from typing import Protocol

import msgspec
import pytest

from resolver.core.declarations import (
    CORE_REASONS,
    SOURCE_REFUSAL_PATTERN,
    DeclaredFactory,
    ProviderDeclaration,
    secret_shapes,
)
from resolver.core.domain import (
    HEX64_PATTERN,
    RESULT_CODE_PATTERN,
    DispatchIdentity,
    Finding,
    FindingKind,
    ProviderFailure,
)
from resolver.core.provider import (
    ENTRY_POINT_GROUP,
    Capability,
    EvidenceProvider,
    PageEvidenceProvider,
    installed_entry_points,
)
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
    "undeclared_reasons",
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
    """What a provider author supplies: a provider, and a way to plant its evidence.

    Give the class an `entry_point` attribute too, the provider's name in the
    `resolver.providers` group, and the kit checks what the provider declares (without it
    those checks are skipped, and the next minor release fails them instead)."""

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
                f"plant {', '.join(s.value for s in REQUIRED)} or give it the capability "
                f"{Capability.MANUAL_ONLY.value}"
            )
        pytest.skip(f"{scenario.value} not applicable: {exc}")
    return identity


def _is_automatic(harness: ProviderHarness) -> bool:
    return harness.provider().capability is Capability.AUTOMATIC


_CORE_CODES = frozenset(reason.code for reason in CORE_REASONS)


def undeclared_reasons(declaration: ProviderDeclaration, findings: Iterable[Finding]) -> set[str]:
    """The reason codes among `findings` that nobody declared: not the provider, not the
    resolver (the failure classes), and, on an unavailable finding, not of a source-refusal's
    bounded shape (`http_403`, `sqlstate_42501`), which a source's own code may take."""
    missing = set()
    for finding in findings:
        code = finding.cause
        if code is None or code in declaration.codes or code in _CORE_CODES:
            continue
        if finding.kind is FindingKind.UNAVAILABLE and SOURCE_REFUSAL_PATTERN.match(code):
            continue
        missing.add(code)
    return missing


def _declared_factory(harness: ProviderHarness) -> DeclaredFactory[object]:
    name = getattr(harness, "entry_point", None)
    if name is None:
        pytest.skip(
            "the harness names no entry_point: set it to the provider's name in the "
            f"{ENTRY_POINT_GROUP} group so the kit can check its declaration"
        )
    found = [ep for ep in installed_entry_points(ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        pytest.fail(f"no installed distribution registers {name!r} in {ENTRY_POINT_GROUP}")
    factory = found[0].load()
    if not isinstance(factory, DeclaredFactory):
        pytest.fail(
            f"{name} ({found[0].value}) declares nothing: decorate its factory with "
            "resolver.evidence.declare(reasons=..., escalate_after_seconds=...)"
        )
    return factory


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

    def test_declaration_is_registered_and_well_formed(
        self, provider_harness: ProviderHarness
    ) -> None:
        declaration = _declared_factory(provider_harness).declaration
        # Built again from plain data: every rule of a declaration holds (codes, bounded
        # one-line sentences, windows only for findings that escalate).
        rebuilt = msgspec.convert(msgspec.to_builtins(declaration), ProviderDeclaration)
        assert rebuilt == declaration
        for reason in declaration.reasons:
            assert secret_shapes(reason.sentence) == [], reason.code
        automatic = provider_harness.provider().capability is Capability.AUTOMATIC
        if not automatic:
            assert not declaration.escalate_after_seconds, "a manual-only case is manual at once"

    def test_every_reason_it_gives_is_declared(self, provider_harness: ProviderHarness) -> None:
        declaration = _declared_factory(provider_harness).declaration
        provider = provider_harness.provider()
        identities = [i for _, i in self._plant_every_scenario(provider_harness)]
        findings = [provider.inspect(i) for i in identities]
        findings.append(provider_harness.unavailable_provider().inspect(identities[0]))
        assert undeclared_reasons(declaration, findings) == set(), (
            "reason codes the provider gave but did not declare"
        )

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
