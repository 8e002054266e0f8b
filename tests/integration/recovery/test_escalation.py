"""Escalation of missing evidence after its window, and the bounded finding statistics, in the real page commit."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from resolver.core.domain import (
    ESCALATION_REASON,
    CaseList,
    CommitReport,
    ControlStatus,
    DispatchIdentity,
    Finding,
    FindingKind,
    ItemOutcome,
    ProviderFailure,
)
from resolver.core.errors import ConfigError
from resolver.core.events import CycleEvents
from resolver.core.provider import EvidenceProvider, build_registry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.providers import ScriptedProvider, fixed, scripted_as
from tests.helpers.stores import Storage

AFTER = T0 + EXEC_LEASE_MS
# The window package_install, http_receipt and object_receipt declare for missing evidence.
WINDOW_MS = 3_600_000


def _factory(
    answer: Callable[[DispatchIdentity], Finding],
) -> Callable[[Mapping[str, Any]], EvidenceProvider]:
    return lambda _settings: ScriptedProvider(answer)


class Reports(CycleEvents):
    """Every commit report, as the database answered it."""

    def __init__(self) -> None:
        self.reports: list[CommitReport] = []

    def committed(
        self, outcomes: Sequence[ItemOutcome], report: CommitReport, seconds: float
    ) -> None:
        self.reports.append(report)


def _reconciler(
    store: Storage,
    config: Mapping[str, Mapping[str, Any]],
    answer: Callable[[DispatchIdentity], Finding],
    *subscribers: CycleEvents,
) -> Reconciler:
    names = {entry["provider"] for entry in config.values()}
    # Scripted findings under each provider's own declaration: its windows are what escalate.
    registry = build_registry(config, {name: scripted_as(name, answer) for name in names})
    settings = ReconcilerSettings(
        owner="r", recovery_lease_ms=30_000, backoff_base_ms=1_000, backoff_max_ms=8_000
    )
    return Reconciler(
        store, registry, settings, Runtime(rng=random.Random(3), subscribers=subscribers)
    )


def test_missing_package_install_reaches_the_queue_after_its_window_and_not_before(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1, action_type="pkg.install")
    rec = _reconciler(
        store, {"pkg.install": {"provider": "package_install"}}, fixed(FindingKind.MISSING)
    )
    assert rec.at(AFTER).run_cycle().accepted == {lease.dispatch_id}
    first = sql.control(lease.dispatch_id)
    assert (first["status"], first["first_inspected_at_ms"]) == ("armed", AFTER)

    # One millisecond before the window, on the database clock: still waiting for evidence.
    before = rec.at(AFTER + WINDOW_MS - 1).run_cycle()
    assert before.accepted == {lease.dispatch_id}
    control = sql.control(lease.dispatch_id)
    assert (control["status"], control["manual_reason"], control["manual_at_ms"]) == (
        "armed",
        None,
        None,
    )

    at = AFTER + WINDOW_MS + 8_000  # due again after the last backoff (at most 8 s)
    assert rec.at(at).run_cycle().accepted == {lease.dispatch_id}
    control = sql.control(lease.dispatch_id)
    assert (control["status"], control["manual_reason"], control["manual_at_ms"]) == (
        "manual",
        ESCALATION_REASON,
        at,
    )
    assert control["finding_counts"] == {"missing": 3}
    assert (control["first_inspected_at_ms"], control["last_inspected_at_ms"]) == (AFTER, at)
    # The execution is untouched: still recovery_required, decidable by a human.
    assert sql.execution(lease.dispatch_id)["state"] == "executing"
    assert sql.resolutions(lease.dispatch_id) == []
    assert store.list_cases("nobody", CaseList.MANUAL, 10) == []  # permission-scoped


def test_internal_mutation_stays_recovery_required_however_long_evidence_is_missing(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1, action_type="db.mutation")
    rec = _reconciler(
        store, {"db.mutation": {"provider": "internal_mutation"}}, fixed(FindingKind.MISSING)
    )
    rec.at(AFTER).run_cycle()
    rec.at(AFTER + 30 * WINDOW_MS).run_cycle()
    assert sql.control(lease.dispatch_id)["status"] == "armed"


def test_a_configured_ceiling_escalates_unavailable_and_null_disables_a_default(
    world: World, store: Storage, sql: SQL
) -> None:
    (flaky,) = world.crashed(1, action_type="pay.charge")
    (missing,) = world.crashed(1, action_type="pkg.quiet")
    config = {
        "pay.charge": {"provider": "http_receipt", "escalate_after_seconds": {"unavailable": 60}},
        "pkg.quiet": {"provider": "package_install", "escalate_after_seconds": {"missing": None}},
    }

    def answer(identity: DispatchIdentity) -> Finding:
        if identity.action_type == "pay.charge":
            return Finding(FindingKind.UNAVAILABLE)
        return Finding(FindingKind.MISSING)

    commits = Reports()
    rec = _reconciler(store, config, answer, commits)
    rec.at(AFTER).run_cycle()
    report = rec.at(AFTER + 60_000).run_cycle()
    assert report.accepted == {flaky.dispatch_id, missing.dispatch_id}
    assert sql.control(flaky.dispatch_id)["manual_reason"] == ESCALATION_REASON
    # The commit's answer names the escalation; the replica derives nothing.
    first, second = commits.reports
    assert first.escalated == frozenset()
    assert second.escalated == {flaky.dispatch_id}
    assert second.routed == {
        flaky.dispatch_id: ControlStatus.MANUAL,
        missing.dispatch_id: ControlStatus.ARMED,
    }
    rec.at(AFTER + 2 * WINDOW_MS).run_cycle()
    assert sql.control(missing.dispatch_id)["status"] == "armed"


def test_statistics_count_each_kind_and_keep_the_last_failure_class(
    world: World, store: Storage, sql: SQL
) -> None:
    (lease,) = world.crashed(1)
    script = iter(
        [
            Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.TIMEOUT),
            Finding(FindingKind.MISSING),
            Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.OUTAGE),
            Finding(FindingKind.CONFLICT),
        ]
    )

    def answer(_identity: DispatchIdentity) -> Finding:
        return next(script)

    rec = _reconciler(store, {"test.action": {"provider": "scripted"}}, answer)
    for step in range(4):
        rec.at(AFTER + step * 10_000).run_cycle()
    control = sql.control(lease.dispatch_id)
    assert control["finding_counts"] == {"unavailable": 2, "missing": 1, "conflict": 1}
    assert control["finding_count"] == 4
    assert control["last_failure_class"] == "outage"
    assert (control["status"], control["manual_reason"]) == ("manual", "conflict")
    assert control["last_inspected_at_ms"] == AFTER + 30_000


@pytest.mark.parametrize(
    ("windows", "message"),
    [
        ({"conflict": 60}, "not a finding that can escalate"),
        ({"verified_succeeded": 60}, "not a finding that can escalate"),
        ({"missing": 0}, "more than 0"),
        ({"missing": True}, "number of seconds"),
        ({"missing": "1h"}, "number of seconds"),
        ([60], "must be a mapping"),
    ],
)
def test_bad_escalation_config_is_a_clear_start_up_error(windows: object, message: str) -> None:
    config = {"pkg.install": {"provider": "package_install", "escalate_after_seconds": windows}}
    with pytest.raises(ConfigError, match=message) as caught:
        build_registry(config, {"package_install": _factory(fixed(FindingKind.MISSING))})
    assert "action_types.pkg.install.escalate_after_seconds" in str(caught.value)


def test_the_documented_escalation_example_means_what_the_docs_say() -> None:
    import re
    from pathlib import Path

    import yaml

    doc = (Path(__file__).parents[3] / "docs" / "manual-resolution.md").read_text()
    section = doc[doc.index("## Escalation") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    config = yaml.safe_load(block.group(1))["action_types"]
    names = {entry["provider"] for entry in config.values()}
    registry = build_registry(
        config, {n: scripted_as(n, fixed(FindingKind.MISSING)) for n in names}
    )
    hour = WINDOW_MS
    assert registry.escalation_for("pkg.install").after_ms(FindingKind.MISSING) == hour
    pay = registry.escalation_for("pay.charge")
    assert (pay.after_ms(FindingKind.MISSING), pay.after_ms(FindingKind.UNAVAILABLE)) == (
        1_800_000,
        21_600_000,
    )
    assert registry.escalation_for("db.mutation").after_ms(FindingKind.MISSING) is None
    assert registry.escalation_for("legacy.call").after_ms(FindingKind.MISSING) is None
