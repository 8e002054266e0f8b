"""The cycle-events seam: delivery in order to the handlers that exist; a reconciler that
knows nothing of how it is observed."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from resolver.app.composition import build_telemetry
from resolver.core.domain import ClaimedItem
from resolver.core.events import CycleEvents, CycleReport, Fanout, Stage
from resolver.core.runtime import Runtime

ROOT = Path(__file__).resolve().parents[2]


class Recorder(CycleEvents):
    def __init__(self, name: str, calls: list[tuple[str, str]]) -> None:
        self.name, self.calls = name, calls

    def claimed(self, items: Sequence[ClaimedItem], seconds: float) -> None:
        self.calls.append((self.name, "claimed"))

    def cycle_failed(self, stage: Stage, error: BaseException, seconds: float) -> None:
        self.calls.append((self.name, f"failed:{stage.value}:{type(error).__name__}"))


class Last(Recorder):
    order: ClassVar[int] = 100


def test_each_event_reaches_every_handler_in_order() -> None:
    calls: list[tuple[str, str]] = []
    fanout = Fanout([Last("last", calls), Recorder("a", calls), Recorder("b", calls)])
    fanout.claimed([], 0.0)
    fanout.cycle_failed(Stage.COMMIT, TimeoutError(), 0.0)
    fanout.cycle_completed(CycleReport(page_size=1), 0.0)  # nobody handles it: nothing happens
    assert calls == [
        ("a", "claimed"),
        ("b", "claimed"),
        ("last", "claimed"),
        ("a", "failed:commit:TimeoutError"),
        ("b", "failed:commit:TimeoutError"),
        ("last", "failed:commit:TimeoutError"),
    ]


def test_an_event_nobody_handles_has_no_handler_to_call() -> None:
    fanout = Fanout([Recorder("a", [])])
    assert fanout._completed == () and len(fanout._claimed) == 1


def test_the_algorithm_alone_builds_its_heartbeat_and_nothing_of_telemetry() -> None:
    names = [type(s).__name__ for s in Runtime().events.subscribers]
    assert names == ["Heartbeat"]


def test_the_composition_root_adds_telemetry_after_the_heartbeat() -> None:
    telemetry = build_telemetry()
    names = [
        type(s).__name__ for s in Runtime(subscribers=telemetry.subscribers).events.subscribers
    ]
    # No metrics given, no tracer: neither subscriber is built.
    assert names == ["Heartbeat", "ProviderHealth", "CycleLog"]


def test_the_reconciler_holds_the_algorithm_only() -> None:
    source = (ROOT / "resolver" / "core" / "reconciler.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    imported = {
        node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    } | {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert not {m for m in imported if m.startswith(("structlog", "opentelemetry", "logging"))}
    assert not {m for m in imported if "history" in m or "crash" in m or "telemetry" in m}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }
    for word in ("history", "crash", "tracer", "log", "logger", "span", "observer"):
        assert not {n for n in names if word in n.lower()}, word


def test_cycle_log_names_every_dispatch_once_per_page_and_keeps_a_line_for_what_needs_a_human() -> (
    None
):
    import structlog
    from structlog.testing import capture_logs

    from resolver.core.domain import (
        ClaimedItem,
        CommitReport,
        ControlStatus,
        DispatchIdentity,
        Finding,
        FindingKind,
        ItemOutcome,
        Outcome,
    )
    from resolver.core.events import CycleReport
    from resolver.telemetry.logs import CycleLog

    def outcome(dispatch_id: str, finding: Finding) -> ItemOutcome:
        identity = DispatchIdentity(
            schema_version=1,
            dispatch_id=dispatch_id,
            approval_request_id="ar",
            project_id="p",
            action_type="t",
            action_digest="0" * 64,
            attempt=1,
            started_at_ms=1,
            idempotency_key=f"k-{dispatch_id}",
        )
        return ItemOutcome(ClaimedItem(identity, "tok", 1, 2, 0), finding, 1000, f"m-{dispatch_id}")

    outcomes = [
        outcome("d-ok", Finding.verified(Outcome.SUCCEEDED, "a" * 64, "ok")),
        outcome("d-retry", Finding(FindingKind.MISSING)),
        outcome("d-manual", Finding(FindingKind.CONFLICT)),
        outcome("d-lost", Finding(FindingKind.MISSING)),
        outcome("d-late", Finding(FindingKind.MISSING)),
    ]
    # As the database routed them (resolver_finding_status): the replica only reports it.
    routed = {
        "d-ok": ControlStatus.RESOLVED,
        "d-retry": ControlStatus.ARMED,
        "d-manual": ControlStatus.MANUAL,
        "d-late": ControlStatus.MANUAL,
    }
    # d-late went to a person because its window elapsed: the database's answer says so.
    report = CommitReport(routed, frozenset({"d-lost"}), escalated=frozenset({"d-late"}))
    cycle = CycleReport(page_size=16, claimed=4, accepted=report.accepted, rejected=report.rejected)
    cycle.findings.update(o.finding.kind for o in outcomes)
    log = CycleLog(structlog.get_logger())
    with capture_logs() as lines:
        log.committed(outcomes, report, 0.01)
        log.cycle_completed(cycle, 0.02)
    per_item = {line["dispatch_id"]: line for line in lines if line["event"] == "recovery_outcome"}
    assert {d for d, line in per_item.items() if line["log_level"] == "info"} == {
        "d-manual",
        "d-late",
        "d-lost",
    }
    (page,) = [line for line in lines if line["event"] == "recovery_cycle"]
    assert page["dispatch_ids"] == {
        "resolved_succeeded": ["d-ok"],
        "retry": ["d-retry"],
        "manual": ["d-manual"],
        "escalated": ["d-late"],
        "fence_rejected": ["d-lost"],
    }
