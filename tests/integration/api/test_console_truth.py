"""True words, find and live refresh in the console, in a real Chromium against the real API,
PostgreSQL, OpenID Provider and the built-in providers' real findings: no forgery warning for
an honest absence, no "no evidence" above a contradiction, advice that matches what the
evidence says happened, relative times that tick, counts read again after a bulk decision,
find by words of what was approved, a malformed paste that clears the case on screen, a
pruned dispatch's page, live refresh with an indicator and a pause, and an open case that
notices its state changed. Waits only for what is rendered (the page's clock is moved by the
test where time must pass)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from providers.package_install import PackageInstallProvider
from resolver.core.domain import (
    ActionSummary,
    Completion,
    DispatchIdentity,
    FindingKind,
    Outcome,
)
from resolver.core.provider import ProviderRegistry
from resolver.db.evidence import ReadOnlyDatabase
from resolver.db.retention import PostgresRetention
from resolver.executor import ExecutionClient
from resolver.retention import pruning as retention
from tests.helpers.console import (
    CHROMIUM,
    Site,
    apply_filter,
    decide_directly,
    decide_here,
    inside_viewport,
    last_answer,
    no_sideways_scroll,
    rendered,
    serious_violations,
    shoot,
    sign_in,
)
from tests.helpers.console_cases import lost_in, settled_long_ago, waiting_cases
from tests.helpers.database import SQL, World, new_spec
from tests.helpers.harnesses import plant_install
from tests.helpers.providers import ScriptedProvider, fixed, reconciler
from tests.helpers.stores import Storage

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
late = pytest.importorskip(
    "resolver.core.late_evidence", reason="the late-evidence watcher is not in this build"
)


def api_client(site: Site) -> httpx.Client:
    return httpx.Client(base_url=site.url.removesuffix("/console"))


def test_a_package_whose_commit_marker_has_no_install_record_is_no_forgery(
    site: Site, page: Any, store: Storage, sql: SQL, world: World, database_url: str
) -> None:
    """The installer published (its commit marker names this very dispatch) and died before
    its install record: an honest absence, a half-finished install, not evidence naming
    another dispatch. The case says so, with no forgery warning beside Confirm succeeded."""
    executor = ExecutionClient(store, owner="node-3", lease_seconds=0.001)
    spec = executor.create_dispatch(new_spec("pkg.install"))
    started_ms = int(time.time() * 1000) + 1
    lease = executor.at(started_ms).lease(spec.dispatch_id)
    executor.at(started_ms).start(lease)
    identity = DispatchIdentity(
        schema_version=1,
        dispatch_id=spec.dispatch_id,
        approval_request_id=spec.approval_request_id,
        project_id=spec.project_id,
        action_type=spec.action_type,
        action_digest=spec.action_digest,
        attempt=1,
        started_at_ms=started_ms,
        idempotency_key=spec.idempotency_key,
    )
    plant_install(sql.conn, identity, record=False, target=False)  # the marker alone
    database = ReadOnlyDatabase(database_url, timeout_seconds=5.0)
    database.open()
    provider = PackageInstallProvider(database, 5.0)
    finding = provider.inspect_page([identity])[spec.dispatch_id]
    # What the provider really answers (never an outage standing in for a finding): a
    # conflict with a reason of its own, not the one that reads as forged evidence.
    assert finding.kind is FindingKind.CONFLICT, finding
    assert finding.cause not in {None, "identity_mismatch"}, finding
    reconciler(store, provider, action_type="pkg.install").at(started_ms + 10).run_cycle()
    provider.close()
    assert sql.control(spec.dispatch_id)["last_reason"] == finding.cause
    page.goto(f"{site.url}#/dispatch/{spec.dispatch_id}")
    sign_in(page, "alice")
    rendered(page)
    expect(page.locator("#decide-form")).to_be_visible()
    expect(page.locator("#tamper-warning")).to_have_count(0)
    expect(page.locator("#headline")).not_to_have_class("headline alarm")
    # The headline is the provider's own sentence for its code, as the API serves it.
    with api_client(site) as client:
        reasons = client.get("/console/config.json").json()["evidence_reasons"]
    assert reasons[finding.cause]["suggests_tampering"] is False
    expect(page.locator("#headline")).to_have_text(
        f"Evidence conflicts: {reasons[finding.cause]['sentence']}."
    )


@pytest.mark.parametrize(
    ("decided", "later", "advice", "never"),
    [
        (
            "confirm_failed",
            FindingKind.VERIFIED_SUCCEEDED,
            "Do not create a new dispatch to do it again",
            "create a new dispatch that supersedes",
        ),
        (
            "confirm_succeeded",
            FindingKind.VERIFIED_FAILED,
            "create a new dispatch that supersedes this one",
            "Do not create a new dispatch",
        ),
    ],
    ids=["did-happen-after-failed", "did-not-happen-after-succeeded"],
)
def test_late_evidence_against_a_decision_is_the_headline_with_advice_for_what_happened(
    site: Site,
    page: Any,
    store: Storage,
    sql: SQL,
    world: World,
    axe_source: str,
    decided: str,
    later: FindingKind,
    advice: str,
    never: str,
) -> None:
    """A refund whose evidence was still missing when alice decided, contradicted later."""
    executor = ExecutionClient(store, owner="pay-worker-3", lease_seconds=0.001)
    spec = executor.create_dispatch(new_spec("pay.refund"))
    started_ms = int(time.time() * 1000) + 1
    executor.at(started_ms).start(executor.at(started_ms).lease(spec.dispatch_id))
    target = spec.dispatch_id
    reconciler(store, ScriptedProvider(fixed(FindingKind.MISSING)), action_type="pay.refund").at(
        started_ms + 10
    ).run_cycle()
    assert sql.control(target)["last_finding"] == "missing"
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "alice")
    rendered(page)
    decide_here(page, decided, "checked_refund_ledger")
    last_answer(page, "200 committed")
    watcher = late.LateEvidenceWatcher(
        store,
        ProviderRegistry({"pay.refund": ScriptedProvider(fixed(later))}),
        late.LateEvidenceSettings(owner="r1"),
    )
    assert [r.contradicts for r in watcher.run_cycle().records] == [True]
    page.reload()
    rendered(page)
    headline = page.locator("#headline")
    expect(headline.locator("#contradiction")).to_contain_text(
        "Evidence observed after the decision contradicts it."
    )
    expect(page.locator("#contradiction-advice")).to_contain_text(advice)
    # One place per fact: the finding from before the decision is history, not a headline.
    glance = page.locator(".glance")
    expect(glance).not_to_contain_text("No evidence found yet")
    expect(page.locator("#main")).not_to_contain_text(never)
    expect(page.locator("#timeline")).to_contain_text("Last inspection: missing")
    assert inside_viewport(page, "#contradiction-advice")
    assert serious_violations(page, axe_source) == []


def test_relative_times_tick_while_the_page_stays_open(
    site: Site, page: Any, store: Storage, world: World
) -> None:
    ids = waiting_cases(store, world)
    page.clock.install()  # the page's timers run when the test moves its clock
    page.goto(f"{site.url}#/dispatch/{ids['pkg.install']}")
    sign_in(page, "alice")
    rendered(page)
    escalates = page.locator("#waited time").nth(2).locator(".age")
    expect(escalates).to_have_text("(in 60 min)")
    page.clock.run_for(125_000)
    expect(escalates).to_have_text("(in 58 min)")
    since = page.locator("#waited time").first.locator(".age")
    expect(since).to_have_text("(2 min ago)")


def test_a_bulk_decision_reads_the_counts_and_triage_again(
    site: Site, page: Any, store: Storage, world: World, sql: SQL
) -> None:
    other = lost_in(store, world, "proj-1", 2)
    page.goto(f"{site.url}#/queue")
    sign_in(page, "alice")
    rendered(page)
    apply_filter(page, owner="node-7")
    expect(page.locator("#counts")).to_have_text(
        "2 cases match the filter. Showing rows 1 to 2, oldest first."
    )
    expect(page.locator("#triage-owner a")).to_have_text(["node-7: 2"])
    page.locator("#select-page").click()
    page.locator("#bulk-confirm_failed").check()
    page.fill("#bulk-reason", "node_lost_not_run")
    page.locator("#bulk-verified").check()
    page.locator("#bulk-submit").click()
    page.locator("#bulk-commit").click()
    expect(page.locator("#bulk-done")).to_have_text("2 of 2 decided")
    expect(page.locator("#counts")).to_have_text(
        "0 cases match the filter now. The 2 rows below are as they were loaded, each"
        " written one marked with its result."
    )
    expect(page.locator("#triage")).to_have_text("Nothing to count.")
    assert [sql.execution(d)["state"] for d in other] == ["failed", "failed"]


def test_find_by_words_of_what_was_approved_across_states_and_only_in_one_s_projects(
    site: Site, page: Any, store: Storage, sql: SQL, world: World
) -> None:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-2', 1)")
    executor = ExecutionClient(store, owner="pay-worker-3", lease_seconds=0.001)

    def refund(order: str, project: str = "proj-1") -> str:
        summary = ActionSummary.of("Refund 18.50 EUR", {"Order": order})
        spec = executor.create_dispatch(
            new_spec("pay.refund", action_summary=summary, project_id=project)
        )
        return spec.dispatch_id

    one = refund("ord-7781")
    settled = refund("ord-7790")
    hidden = refund("ord-7795", project="proj-2")
    done = ExecutionClient(store, owner="pay-worker-3", lease_seconds=60)
    now = int(time.time() * 1000)
    done.at(now).complete(
        done.at(now).start(done.at(now).lease(settled)), Completion(Outcome.SUCCEEDED, "ok", "m-9")
    )
    page.goto(site.url)
    sign_in(page, "alice")
    rendered(page)
    # One match by part of an order number: its case opens, though it never started.
    page.fill("#find-q", "ORD-7781")
    page.locator("#find button").click()
    expect(page.locator("#main")).to_have_attribute("data-route", f"#/dispatch/{one}")
    expect(page.locator("#case-state")).to_have_text("Not started: no executor has taken it")
    # Several: a list, each saying what matched, the settled one with its state; the other
    # project's refund is not there.
    page.fill("#find-q", "ord-77")
    page.locator("#find button").click()
    expect(page.locator("#found-count")).to_have_text("2 dispatches match, newest first.")
    rows = page.locator("#found tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator(f"#found tr[data-dispatch-id='{settled}']")).to_contain_text(
        "succeeded, settled by its executor"
    )
    expect(
        page.locator(f"#found tr[data-dispatch-id='{one}'] td[data-label='Matched by']")
    ).to_have_text("what was approved")
    expect(page.locator(f"#found tr[data-dispatch-id='{hidden}']")).to_have_count(0)
    shoot(page, "console-find-words.png")


def test_a_malformed_paste_into_find_replaces_the_case_on_screen(
    site: Site, page: Any, world: World
) -> None:
    target = site.dispatch_ids[0]
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "alice")
    rendered(page)
    expect(page.locator("#decide-form")).to_be_visible()
    for pasted, said in (
        ("https://platform.example/", "It is a link with no id in it"),
        ("é!", "Words of what was approved need 3 characters or more."),
    ):
        page.fill("#find-q", pasted)
        page.locator("#find button").click()
        expect(page.locator("#found-none")).to_contain_text(said)
        expect(page.locator("#decide-form")).to_have_count(0)
        expect(page.locator("#case-state")).to_have_count(0)
        expect(page.locator("#status")).to_have_text("Nothing was looked up.")
        page.goto(f"{site.url}#/dispatch/{target}")
        rendered(page)
        expect(page.locator("#decide-form")).to_be_visible()
    # A link from the platform's approval page: the approval id in it is looked up.
    approval = world.specs[site.dispatch_ids[1]].approval_request_id
    page.fill("#find-q", f"https://platform.example/approvals/{approval}?tab=history")
    page.locator("#find button").click()
    expect(page.locator("#main")).to_have_attribute(
        "data-route", f"#/dispatch/{site.dispatch_ids[1]}"
    )
    expect(page.locator("h2")).to_contain_text(site.dispatch_ids[1])


def test_a_pruned_dispatch_s_page_says_what_retention_kept_without_a_script_error(
    site: Site,
    browser: Any,
    store: Storage,
    world: World,
    database_url: str,
    sql: SQL,
    tmp_path: Path,
) -> None:
    """Its execution pruned, its identity and decision kept (settled automatically), under
    a run that wrote an export: opened from its link at 800 px wide, nothing is cut off."""
    old = settled_long_ago(store, world)
    with (
        (tmp_path / "audit.jsonl").open("wb") as export,
        PostgresRetention(database_url) as pruning,
    ):
        retention.prune(
            pruning, retention.PruneOptions(older_than_ms=30 * 86_400_000, export=export)
        )
    run = sql.one("SELECT run_id, export_digest FROM recovery_prune_runs")
    assert run["export_digest"] is not None
    context = browser.new_context(viewport={"width": 800, "height": 800})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(f"{site.url}#/dispatch/{old['automatic']}")
    sign_in(tab, "alice")
    rendered(tab)
    expect(tab.locator("#case-state")).to_have_text(
        "Succeeded: settled from verified evidence, its execution record pruned by retention"
    )
    pruned = tab.locator("#pruned")
    expect(pruned).to_contain_text(f"by prune run {run['run_id']}.")
    expect(pruned).to_contain_text("Kept: its identity and its resolution (the audit facts).")
    expect(pruned.locator(".digest-text")).to_have_text(run["export_digest"])
    digest_fits = pruned.locator(".digest-text").evaluate(
        "n => n.getBoundingClientRect().right <= window.innerWidth"
    )
    assert digest_fits
    assert no_sideways_scroll(tab)
    expect(tab.locator("#decide")).to_have_count(0)
    expect(tab.locator("#timeline")).to_contain_text("Execution pruned by retention")
    shoot(tab, "console-pruned.png")
    assert errors == []
    context.close()


def test_the_list_refreshes_live_says_when_and_pauses(
    site: Site, page: Any, store: Storage, world: World
) -> None:
    page.clock.install()
    page.goto(f"{site.url}#/queue")
    sign_in(page, "alice")
    rendered(page)
    live = page.locator("#live")
    expect(live).to_have_attribute("data-mode", "live")
    expect(page.locator("#live-state")).to_contain_text("every 30 s.")
    rows = page.locator("#list tbody tr")
    expect(rows).to_have_count(3)
    page.locator("#live-pause").click()
    expect(live).to_have_attribute("data-mode", "paused")
    expect(page.locator("#live-state")).to_contain_text("Paused: read ")
    (newcomer,) = lost_in(store, world, "proj-1", 1)
    page.clock.run_for(125_000)
    expect(page.locator("#live-state")).to_contain_text("(2 min ago)")
    expect(rows).to_have_count(3)  # paused: the list is as it was read
    page.locator("#live-pause").click()  # resume: read at once
    page.clock.run_for(1_000)
    expect(page.locator(f"#list tr[data-dispatch-id='{newcomer}']")).to_be_visible()
    expect(rows).to_have_count(4)
    expect(live).to_have_attribute("data-mode", "live")
    # Held, and saying why, while a bulk decision is being filled in.
    page.locator("#bulk-abandon_unknown").check()
    page.clock.run_for(1_000)
    expect(page.locator("#live-state")).to_contain_text("Held while you fill in the bulk decision")


def test_an_open_case_notices_that_its_state_changed(site: Site, page: Any, sql: SQL) -> None:
    idle, busy = site.dispatch_ids[0], site.dispatch_ids[1]
    page.clock.install()
    page.goto(f"{site.url}#/dispatch/{idle}")
    sign_in(page, "alice")
    rendered(page)
    expect(page.locator("#decide-form")).to_be_visible()
    # Someone else decides it while nobody touches the form: the case is drawn as it is now.
    with api_client(site) as client:
        done = decide_directly(client, idle, sql.execution(idle)["version"], page)
    assert done.status_code == 200, done.text
    page.clock.run_for(16_000)
    expect(page.locator("#status")).to_contain_text("This case changed at ")
    expect(page.locator("#status")).to_contain_text("it is now “Succeeded: decided by alice”")
    expect(page.locator("#case-state")).to_have_text("Succeeded: decided by alice")
    expect(page.locator("#decide-form")).to_have_count(0)
    # While the operator is deciding, the form stays and a notice says what changed.
    page.goto(f"{site.url}#/dispatch/{busy}")
    rendered(page)
    page.locator("#one-confirm_failed").check()
    with api_client(site) as client:
        done = decide_directly(client, busy, sql.execution(busy)["version"], page)
    assert done.status_code == 200, done.text
    page.clock.run_for(16_000)
    notice = page.locator("#case-changed")
    expect(notice).to_contain_text("it is now “Succeeded: decided by alice”")
    expect(page.locator("#one-confirm_failed")).to_be_checked()
    notice.locator("#show-current").click()
    expect(page.locator("#case-state")).to_have_text("Succeeded: decided by alice")
