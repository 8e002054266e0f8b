"""The informed decision in the console, in a real Chromium against the real API, PostgreSQL
and OpenID Provider: what was approved, why the evidence says what it says, and the separate
acknowledgement a possibly forged success needs. Waits only for rendered state."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest

from resolver.core.domain import (
    Completion,
    Outcome,
)
from resolver.core.provider import build_registry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.db.retention import PostgresRetention
from resolver.executor import ExecutionClient
from resolver.retention import pruning as retention
from tests.helpers.console import (
    Site,
    apply_filter,
    rendered,
    serious_violations,
    shoot,
    sign_in,
    sign_in_at_provider,
)
from tests.helpers.console_cases import CHARGE, forged_case, lost_in, utc_text, waiting_cases
from tests.helpers.database import SQL, World, new_spec
from tests.helpers.providers import ScriptedProvider, reconciler, verified
from tests.helpers.stores import Storage

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect


def test_a_forged_receipt_conflict_names_its_reason_and_demands_a_separate_acknowledgement(
    site: Site,
    page: Any,
    store: Storage,
    sql: SQL,
    world: World,
    axe_source: str,
) -> None:
    target = forged_case(store, world)
    control = sql.one(
        "SELECT last_finding, last_reason, reason_counts FROM approved_action_recovery_controls"
        " WHERE dispatch_id = %s",
        target,
    )
    assert control == {
        "last_finding": "conflict",
        "last_reason": "unknown_kid",
        "reason_counts": {"unknown_kid": 1},
    }
    page.goto(site.url)
    sign_in(page, "alice")
    rendered(page)
    row = page.locator(f"#list tr[data-dispatch-id='{target}']")
    # What was approved and why the evidence conflicts, in the row itself.
    expect(row.locator("td[data-label='What was approved']")).to_contain_text(
        "Charge 2,490.00 EUR to customer 4471"
    )
    expect(row.locator("td[data-label='What was approved']")).to_contain_text("Order: ord-7781")
    expect(row.locator("td[data-label='Last finding']")).to_have_text(
        "conflict (unknown_kid), 1 inspection"
    )
    expect(row.locator("td[data-label='Why here']")).to_have_text("the evidence conflicts")
    shoot(page, "console-queue-informed.png")

    row.locator("a.mono").click()
    rendered(page)
    expect(page.locator("#case-state")).to_have_text("Outcome unknown: needs a person's decision")
    expect(page.locator("#headline")).to_have_text(
        "Evidence conflicts: the receipt is signed with a key this installation does not know."
    )
    expect(page.locator("#approved-title-text")).to_have_text(
        "Charge 2,490.00 EUR to customer 4471"
    )
    expect(page.locator("#approved dl")).to_have_text("Amount2,490.00 EUROrderord-7781")
    expect(page.locator("#timeline")).to_contain_text("because unknown_kid")
    assert serious_violations(page, axe_source) == []
    shoot(page, "console-case-forged.png")

    # Confirm succeeded with the usual attestation only: stopped in the page, nothing sent.
    warning = page.locator("#tamper-warning")
    expect(warning).to_contain_text("The evidence may be forged.")
    expect(warning).to_contain_text("unknown_kid")
    page.locator("#one-confirm_succeeded").check()
    page.fill("#one-reason", "checked_ledger")
    page.locator("#verified").check()
    page.locator("#decide-submit").click()
    expect(page.locator("#tamper-ack")).to_be_focused()
    assert page.locator("#tamper-ack").evaluate("node => node.validity.valueMissing")
    expect(page.locator("#answers li")).to_have_count(0)
    assert sql.execution(target)["state"] == "executing"
    # Another decision needs no acknowledgement of a success it does not claim.
    assert not page.locator("#tamper-ack").evaluate(
        "node => { document.getElementById('one-confirm_failed').click(); return node.required; }"
    )
    page.locator("#one-confirm_succeeded").check()
    # Acknowledged separately: the decision goes through.
    page.locator("#tamper-ack").check()
    page.locator("#decide-submit").click()
    expect(page.locator("#answers li").first).to_have_text(
        f"200 committed: {target} is now succeeded."
    )
    assert sql.execution(target)["state"] == "succeeded"


def test_the_queue_finds_cases_by_words_of_what_was_approved(
    site: Site,
    page: Any,
    store: Storage,
    sql: SQL,
    world: World,
) -> None:
    forged_case(store, world)
    page.goto(site.url + "#/queue?summary=2%2C490")
    sign_in(page, "alice")
    rendered(page)
    expect(page.locator("#list tbody tr")).to_have_count(1)
    expect(page.locator("#f-summary")).to_have_value("2,490")
    page.goto(site.url + "#/queue?summary=18.50")
    rendered(page)
    expect(page.locator("#empty")).to_have_text("Nothing matches this filter.")


def test_find_opens_an_automatically_settled_dispatch_by_its_idempotency_key_and_clears_the_last(
    site: Site,
    page: Any,
    store: Storage,
    world: World,
    axe_source: str,
) -> None:
    executor = ExecutionClient(store, owner="executor-1", lease_seconds=0.001)
    spec = executor.create_dispatch(new_spec())
    started_ms = int(time.time() * 1000) + 1
    executor.at(started_ms).start(executor.at(started_ms).lease(spec.dispatch_id))
    reconciler(store, ScriptedProvider(verified)).at(started_ms + 10).run_cycle()
    assert store.find_dispatches("mallory", spec.idempotency_key) == []  # no project, no answer
    (found,) = store.find_dispatches("alice", spec.idempotency_key)
    assert (found.matched_by, found.closed_by) == ("idempotency_key", "automatic")

    previous = site.dispatch_ids[0]
    page.goto(f"{site.url}#/dispatch/{previous}")
    sign_in(page, "alice")
    rendered(page)
    expect(page.locator("#decide-form")).to_be_visible()
    page.fill("#find-q", spec.idempotency_key)
    page.locator("#find button").click()
    main = page.locator("#main")
    expect(main).to_have_attribute("data-route", f"#/dispatch/{spec.dispatch_id}")
    expect(main).to_have_attribute("aria-busy", "false")
    expect(page.locator("#case-state")).to_have_text("Succeeded: settled from verified evidence")
    assert serious_violations(page, axe_source) == []
    # Nothing found: said in a view of its own, the case before it gone from the screen.
    page.fill("#find-q", "no-such-dispatch")
    page.locator("#find button").click()
    expect(main).to_have_attribute("data-route", "#/find?q=no-such-dispatch")
    expect(main).to_have_attribute("aria-busy", "false")
    expect(page.locator("#found-none")).to_contain_text("Nothing found for “no-such-dispatch”")
    expect(page.locator("#case-state")).to_have_count(0)
    expect(page.locator("#decide-form")).to_have_count(0)


def test_a_selection_hidden_by_a_new_filter_is_cleared_and_nothing_outside_the_view_is_decided(
    site: Site,
    page: Any,
    store: Storage,
    sql: SQL,
    world: World,
    axe_source: str,
) -> None:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-2', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-2', 'alice', 'approval.recover', 1)")
    other = lost_in(store, world, "proj-2", 2)
    page.goto(f"{site.url}#/queue?project_id=proj-1")
    sign_in(page, "alice")
    rendered(page)
    # Project 1: two rows ticked.
    for dispatch_id in site.dispatch_ids[:2]:
        page.locator(f"#list tr[data-dispatch-id='{dispatch_id}'] .pick").check()
    expect(page.locator("#bulk-count")).to_have_text("2 selected")
    # Another filter: the selection does not follow into a view that cannot show it.
    apply_filter(page, project_id="proj-2")
    expect(page.locator("#list tbody tr")).to_have_count(2)
    expect(page.locator("#bulk-count")).to_have_text("0 selected")
    expect(page.locator("#status")).to_contain_text("Selection cleared")
    expect(page.locator("#bulk-outside")).to_be_hidden()
    page.locator("#select-page").click()
    expect(page.locator("#bulk-count")).to_have_text("2 selected")
    page.locator("#bulk-confirm_failed").check()
    page.fill("#bulk-reason", "node_lost_not_run")
    page.locator("#bulk-verified").check()
    page.locator("#bulk-submit").click()
    # The review before anything is written: how many, where, what, and what it does.
    summary = page.locator("#bulk-summary")
    expect(summary.locator("h4")).to_have_text("Review: 2 cases, nothing written yet")
    expect(page.locator("#bulk-by-project")).to_have_text("proj-2: 2")
    expect(page.locator("#bulk-by-type")).to_have_text("test.action: 2")
    expect(page.locator("#bulk-by-finding")).to_have_text("unsupported: 2")
    expect(summary).to_contain_text("Marks it failed")
    assert [sql.execution(d)["state"] for d in other] == ["executing", "executing"]
    assert serious_violations(page, axe_source) == []
    page.locator("#bulk-commit").click()
    expect(page.locator("#bulk-done")).to_have_text("2 of 2 decided")
    assert [sql.execution(d)["state"] for d in other] == ["failed", "failed"]
    # Nothing of project 1, ticked before and hidden since, was decided.
    assert [sql.execution(d)["state"] for d in site.dispatch_ids] == ["executing"] * 3


def test_a_selection_on_another_page_of_the_same_filter_is_counted_and_shown(
    site: Site,
    page: Any,
) -> None:
    page.goto(f"{site.url}#/queue?limit=2")
    sign_in(page, "alice")
    rendered(page)
    first = page.locator("#list tbody tr").first.get_attribute("data-dispatch-id")
    page.locator("#list tbody tr .pick").first.check()
    page.locator("#next-page").click()
    rendered(page)
    expect(page.locator("#bulk-count")).to_have_text("1 selected")
    outside = page.locator("#bulk-outside")
    expect(outside.locator("summary")).to_have_text(
        "1 selected outside this page (same filter): show them"
    )
    outside.locator("summary").click()
    expect(outside.locator("a")).to_have_text(str(first))


def test_an_expired_token_signs_in_again_and_resends_the_same_decision(
    site: Site,
    page: Any,
    sql: SQL,
) -> None:
    target = site.dispatch_ids[1]
    sent: list[dict[str, Any]] = []
    page.on(
        "request",
        lambda r: (
            sent.append(json.loads(r.post_data or "{}"))
            if r.method == "POST" and r.url.endswith("/resolution")
            else None
        ),
    )
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "alice")
    rendered(page)
    expect(page.locator("#session")).to_contain_text("session until ")
    expect(page.locator("#session")).to_contain_text("decisions until ")
    page.locator("#one-confirm_failed").check()
    page.fill("#one-reason", "vendor_declined")
    page.locator("#verified").check()
    # The token goes bad while the form is filled (expired or revoked: the API answers both
    # with 401 invalid_token).
    page.evaluate(
        "sessionStorage.setItem('resolver.token',"
        " sessionStorage.getItem('resolver.token').slice(0, -6) + 'AAAAAA')"
    )
    page.locator("#decide-submit").click()
    # Sign in again (the provider may still know the browser and skip its form).
    answer = page.locator("#answers li").first
    expect(page.locator("#answers li, #login").first).to_be_visible()
    if page.locator("#login").is_visible():
        sign_in_at_provider(page, "alice", second_factor=True)
    expect(answer).to_have_text(f"After signing in again: 200 committed: {target} is now failed.")
    assert len(sent) == 2 and sent[0] == sent[1]  # the same decision, the same mutation id
    (resolution,) = sql.resolutions(target)
    assert resolution["mutation_id"] == sent[0]["mutation_id"]
    expect(page.locator("#who")).to_have_text("Signed in as alice (pwd, otp, mfa)")


def test_the_list_refreshes_on_its_own_and_keeps_the_selection(
    site: Site,
    page: Any,
    store: Storage,
    world: World,
) -> None:
    page.clock.install()  # the page's timers run when the test moves its clock
    page.goto(f"{site.url}#/queue")
    sign_in(page, "alice")
    rendered(page)
    rows = page.locator("#list tbody tr")
    expect(rows).to_have_count(3)
    first = rows.first.get_attribute("data-dispatch-id")
    rows.first.locator(".pick").check()
    (newcomer,) = lost_in(store, world, "proj-1", 1)  # a new case while the list is open
    page.clock.run_for(31_000)
    expect(rows).to_have_count(4)
    expect(page.locator(f"#list tr[data-dispatch-id='{newcomer}']")).to_be_visible()
    expect(page.locator(f"#list tr[data-dispatch-id='{first}'] .pick")).to_be_checked()
    expect(page.locator("#bulk-count")).to_have_text("1 selected")
    expect(page.locator("#main")).to_have_attribute("data-route", "#/queue")


def test_triage_counts_by_type_reason_and_executor_each_a_filter(
    site: Site,
    page: Any,
    store: Storage,
    world: World,
    axe_source: str,
) -> None:
    target = forged_case(store, world)
    page.goto(f"{site.url}#/queue")
    sign_in(page, "alice")
    rendered(page)
    expect(page.locator("#triage-action_type a")).to_have_text(["test.action: 3", "pay.charge: 1"])
    expect(page.locator("#triage-reason a")).to_have_text(["unsupported: 3", "unknown_kid: 1"])
    expect(page.locator("#triage-owner a")).to_have_text(["executor-1: 3", "pay-worker-3: 1"])
    row = page.locator(f"#list tr[data-dispatch-id='{target}']")
    expect(row.locator("td[data-label='Executor']")).to_have_text("pay-worker-3")
    # Known values are suggested in the filter fields.
    suggested = page.locator("#dl-owner option").evaluate_all("os => os.map(o => o.value)")
    assert sorted(suggested) == ["executor-1", "pay-worker-3"]
    assert serious_violations(page, axe_source) == []
    page.locator("#triage-reason a", has_text="unknown_kid").click()
    rendered(page)
    expect(page.locator("#list tbody tr")).to_have_count(1)
    expect(page.locator("#f-last_reason")).to_have_value("unknown_kid")
    page.locator("#triage-owner a", has_text="pay-worker-3").click()
    rendered(page)
    expect(page.locator("#list tbody tr")).to_have_count(1)
    expect(page.locator("#f-owner")).to_have_value("pay-worker-3")
    # The age filter offers the manual-queue alert's own threshold.
    options = page.locator("#f-min_age_seconds option").evaluate_all("os => os.map(o => o.value)")
    assert "14400" in options


def test_an_open_list_sorted_by_action_type_pages_without_repeating_a_row(
    site: Site,
    page: Any,
    store: Storage,
    world: World,
) -> None:
    target = forged_case(store, world)
    page.goto(f"{site.url}#/queue?sort=action_type&limit=2")
    sign_in(page, "alice")
    rendered(page)
    first = page.locator("#list tbody tr")
    expect(first).to_have_count(2)
    expect(first.first).to_have_attribute("data-dispatch-id", target)  # pay.charge < test.action
    expect(page.locator("#counts")).to_contain_text("by action type, oldest first within")
    expect(page.locator("#f-sort")).to_have_value("action_type")
    seen = first.evaluate_all("rows => rows.map(r => r.dataset.dispatchId)")
    page.locator("#next-page").click()
    rendered(page)
    rest = page.locator("#list tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.dispatchId)"
    )
    assert sorted(seen + rest) == sorted([target, *site.dispatch_ids])


def test_a_waiting_case_shows_its_next_look_and_when_it_escalates(
    site: Site,
    page: Any,
    store: Storage,
    sql: SQL,
    world: World,
    axe_source: str,
) -> None:
    ids = waiting_cases(store, world)
    install = sql.control(ids["pkg.install"])
    assert install["escalates_at_ms"] == install["first_inspected_at_ms"] + 3_600_000
    page.goto(f"{site.url}#/waiting")
    sign_in(page, "alice")
    rendered(page)
    row = page.locator(f"#list tr[data-dispatch-id='{ids['pkg.install']}']")
    times = row.locator("td[data-label='Next look']")
    expect(times.locator("time").first).to_contain_text(utc_text(install["next_scan_at_ms"]))
    # UTC, then the relative time ("in 60 min" on a quick machine).
    escalates = times.locator(".escalates")
    expect(escalates).to_contain_text(f"escalates {utc_text(install['escalates_at_ms'])} (in ")
    expect(escalates).to_contain_text("min) if still missing")
    never = page.locator(f"#list tr[data-dispatch-id='{ids['run.thing']}']")
    expect(never.locator("td[data-label='Next look'] .escalates")).to_have_text(
        "never escalates on this finding"
    )
    assert serious_violations(page, axe_source) == []
    shoot(page, "console-waiting-escalates.png")

    row.locator("a.mono").click()
    rendered(page)
    expect(page.locator("#case-state")).to_have_text("Outcome unknown: still looking for evidence")
    # Why (the finding and its reason) and how long it waits and when it escalates: apart.
    expect(page.locator("#headline")).to_have_text("No evidence found yet.")
    waited = page.locator("#waited")
    expect(waited).to_contain_text(f"Next look {utc_text(install['next_scan_at_ms'])}")
    expect(waited).to_contain_text(
        f"Goes to the manual queue {utc_text(install['escalates_at_ms'])} (in "
    )
    expect(waited).to_contain_text("min) if the evidence is still missing then")
    expect(page.locator("#timeline")).to_contain_text(
        "Escalates to the manual queue if still missing"
    )


def test_find_opens_a_pruned_dispatch_on_a_page_that_says_what_retention_kept(
    site: Site,
    page: Any,
    store: Storage,
    sql: SQL,
    database_url: str,
    axe_source: str,
) -> None:
    executor = ExecutionClient(store, owner="executor-1", lease_seconds=1)
    spec = executor.create_dispatch(new_spec())
    old = int(time.time() * 1000) - 40 * 86_400_000
    lease = executor.at(old).start(executor.at(old).lease(spec.dispatch_id))
    executor.at(old + 100).complete(lease, Completion(Outcome.SUCCEEDED, "done", "m-old"))
    with PostgresRetention(database_url) as retention_store:
        retention.prune(retention_store, retention.PruneOptions(older_than_ms=30 * 86_400_000))
    run = sql.one("SELECT run_id, export_digest FROM recovery_prune_runs")
    assert run["export_digest"] is None

    page.goto(f"{site.url}#/queue")
    sign_in(page, "alice")
    rendered(page)
    page.fill("#find-q", spec.idempotency_key)
    page.locator("#find button").click()
    main = page.locator("#main")
    expect(main).to_have_attribute("data-route", f"#/dispatch/{spec.dispatch_id}")
    expect(main).to_have_attribute("aria-busy", "false")
    expect(page.locator("#case-state")).to_have_text(
        "Pruned by retention: succeeded, settled by its executor"
    )
    pruned = page.locator("#pruned")
    expect(pruned).to_contain_text(f"by prune run {run['run_id']}.")
    expect(pruned).to_contain_text("The run wrote no export: what it removed is kept nowhere.")
    expect(pruned).to_contain_text("Kept: the dispatch id, its project and action type")
    expect(page.locator("#decide")).to_have_count(0)
    assert serious_violations(page, axe_source) == []


def test_a_third_party_provider_s_reason_reads_in_its_own_words_and_warns_of_tampering(
    site: Site, page: Any, store: Storage, sql: SQL, world: World, database_url: str
) -> None:
    # The test-support distribution's ledger provider, through its entry point: its entry for
    # this refund was altered after booking. The console knows nothing of it but what the API
    # serves from its declaration.
    from resolver_test_support.ledger import entry_digest

    executor = ExecutionClient(store, owner="ledger-worker-1", lease_seconds=0.001)
    spec = executor.create_dispatch(new_spec("ledger.refund", action_summary=CHARGE))
    world.specs[spec.dispatch_id] = spec
    started_ms = int(time.time() * 1000) + 1
    executor.at(started_ms).start(executor.at(started_ms).lease(spec.dispatch_id))
    entry = {
        "dispatch_id": spec.dispatch_id,
        "idempotency_key": spec.idempotency_key,
        "action_digest": spec.action_digest,
        "attempt": 1,
        "amount_cents": 249_000,
        "state": "booked",
    }
    digest = entry_digest({**entry, "amount_cents": 2490})  # booked for 24.90, now 2,490.00
    sql.all(
        "INSERT INTO ledger_entries (dispatch_id, idempotency_key, action_digest, attempt,"
        " amount_cents, state, entry_digest) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        *entry.values(),
        digest,
    )
    registry = build_registry(
        {"ledger.refund": {"provider": "ledger", "database_url": database_url}}
    )
    settings = ReconcilerSettings(owner="r", recovery_lease_ms=30_000, backoff_base_ms=60_000)
    try:
        Reconciler(store, registry, settings, Runtime(rng=random.Random(3))).at(
            started_ms + 10
        ).run_cycle()
    finally:
        registry.close()
    assert sql.control(spec.dispatch_id)["last_reason"] == "ledger_entry_altered"

    page.goto(f"{site.url}#/dispatch/{spec.dispatch_id}")
    sign_in(page, "alice")
    rendered(page)
    expect(page.locator("#headline")).to_have_text(
        "Evidence conflicts: the ledger entry no longer matches its digest: it was changed"
        " after booking."
    )
    warning = page.locator("#tamper-warning")
    expect(warning).to_contain_text("The evidence may be forged.")
    expect(warning).to_contain_text("ledger_entry_altered")
