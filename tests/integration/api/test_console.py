"""The operator console in a real headless Chromium against the real API, real PostgreSQL and a
real OpenID Provider (node-oidc-provider, started by the tests): sign-in with authorization
code + PKCE, every view, the deep link, a decision, step-up, bulk, and an accessibility check."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.core.domain import Finding, FindingKind
from resolver.human.api import create_app
from resolver.human.auth import TokenVerifier
from resolver.human.console_config import console_config
from tests.helpers.api import body
from tests.helpers.console import (
    CHROMIUM,
    CLIENT_ID,
    Site,
    apply_filter,
    decide_here,
    last_answer,
    listed,
    open_case,
    press_tab_until,
    rendered,
    serious_violations,
    shoot,
    sign_in,
    sign_in_at_provider,
    signed_in_tab,
)
from tests.helpers.console import decide_directly as _decide_directly
from tests.helpers.console import grant as _grant
from tests.helpers.console import two_people_for as _two_people_for
from tests.helpers.database import SQL, World, new_spec
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.providers import ScriptedProvider, fixed, reconciler
from tests.helpers.signing import TEST_SIGNER
from tests.helpers.stores import Storage

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")


def test_sign_in_with_pkce_see_the_queue_open_a_case_and_decide(
    site: Site, page: Any, sql: SQL, axe_source: str
) -> None:
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(site.url)
    sign_in(page, "alice")
    assert page.locator("#who").text_content() == "Signed in as alice (pwd, otp, mfa)"
    authorize = next(u for u in requests if "/auth?" in u)
    assert "code_challenge_method=S256" in authorize and "nonce=" in authorize
    assert "state=" in authorize and f"client_id={CLIENT_ID}" in authorize
    assert page.evaluate("document.cookie") == ""  # the token lives in sessionStorage only
    rows = page.locator("#list tbody tr")
    rows.first.wait_for()
    listed = rows.locator("td a.mono").all_text_contents()
    assert sorted(listed) == sorted(site.dispatch_ids)
    assert page.locator("#counts").text_content() == (
        "3 cases in this list. Showing rows 1 to 3, oldest first."
    )
    assert serious_violations(page, axe_source) == []
    shoot(page, "console-queue.png")

    target = site.dispatch_ids[0]
    page.locator(f"#list a:text-is('{target}')").click()
    page.wait_for_url(re.compile(r"#/dispatch/"))
    rendered(page)
    page.locator("#decide-form").wait_for()
    assert page.locator("#one-confirm_failed-says").text_content().startswith("Marks it failed")
    assert serious_violations(page, axe_source) == []
    shoot(page, "console-case.png")
    decide_here(page, "confirm_failed", "vendor_declined")
    answer = page.locator("#answers li").first
    answer.wait_for()
    assert answer.text_content() == f"200 committed: {target} is now failed."
    assert sql.execution(target)["state"] == "failed"
    (res,) = sql.resolutions(target)
    assert (res["actor_user_id"], res["reason_code"]) == ("alice", "vendor_declined")


def test_a_decision_that_lost_its_fence_shows_the_409_as_it_came_back(
    site: Site, page: Any, sql: SQL
) -> None:
    target = site.dispatch_ids[1]
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "alice")
    page.locator("#decide-form").wait_for()
    # Another operator settles it while this page is open.
    with httpx.Client(base_url=site.url.removesuffix("/console")) as client:
        done = _decide_directly(client, target, sql.execution(target)["version"], page)
    assert done.status_code == 200, done.text
    decide_here(page, "confirm_failed", "vendor_declined")
    answer = page.locator("#answers li").first
    answer.wait_for()
    text = answer.text_content()
    assert text.startswith("409 conflict: "), text
    assert "already succeeded" in text  # the API's own words, not a generic error
    assert "Current state: succeeded, version " in text
    assert sql.execution(target)["state"] == "succeeded"


def test_the_case_view_copies_its_ids_states_consequences_and_takes_a_free_reason_code(
    site: Site, page: Any, sql: SQL, world: World, axe_source: str
) -> None:
    target = site.dispatch_ids[0]
    spec = world.specs[target]
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "alice")
    page.locator("#decide-form").wait_for()
    for label, value in (
        ("Idempotency key", spec.idempotency_key),
        ("Dispatch", target),
        ("Approval request", spec.approval_request_id),
    ):
        page.locator(f"button[aria-label='Copy {label}']").click()
        page.locator("#status").filter(has_text=f"{label} copied.").wait_for()
        assert page.evaluate("navigator.clipboard.readText()") == value
    events = page.locator("#timeline li").all_text_contents()
    assert any("Start barrier crossed (attempt 1)" in e for e in events), events
    assert any("Reached the manual queue: unsupported" in e for e in events), events
    assert all(" UTC (" in e and "ago)" in e for e in events), events  # UTC and relative age
    # Every consequence is on the page before any choice is made.
    for decision in ("confirm_succeeded", "confirm_failed", "abandon_unknown"):
        assert page.locator(f"#one-{decision}-says").is_visible()
    assert (
        page.locator("#one-abandon_unknown-says")
        .text_content()
        .startswith("Marks it blocked with the outcome unknown: nothing will run it again.")
    )
    offered = page.locator("#reason-codes option").evaluate_all("os => os.map(o => o.value)")
    assert "vendor_declined" in offered and "cannot_verify" in offered
    # A code that is not a reason code is stopped in the page; nothing reaches the API.
    page.locator("#one-confirm_failed").check()
    page.fill("#one-reason", "Not A Code!")
    page.locator("#verified").check()
    page.locator("#decide-submit").click()
    assert page.locator("#one-reason").evaluate("node => node.validity.patternMismatch")
    assert page.locator("#answers li").count() == 0
    # A code of the operator's own, not in the offered list, is allowed.
    page.fill("#one-reason", "phoned_the_vendor")
    page.locator("#decide-submit").click()
    page.locator("#answers li").first.wait_for()
    assert sql.execution(target)["state"] == "failed"
    (res,) = sql.resolutions(target)
    assert res["reason_code"] == "phoned_the_vendor"
    assert serious_violations(page, axe_source) == []


def test_a_pasted_deep_link_survives_sign_in_and_a_reload_keeps_the_page(
    site: Site, page: Any
) -> None:
    target = site.dispatch_ids[1]
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "bob")
    page.wait_for_url(re.compile(re.escape(f"#/dispatch/{target}") + "$"))
    rendered(page)
    page.locator("h2").filter(has_text=target).wait_for()
    page.reload()
    rendered(page)
    page.locator("h2").filter(has_text=target).wait_for()
    assert page.locator("#who").is_visible()  # the tab kept its session


def test_a_stale_sign_in_steps_up_and_the_decision_is_retried_once(
    site: Site, page: Any, sql: SQL
) -> None:
    target = site.dispatch_ids[2]
    page.goto(site.url)
    sign_in(page, "alice", second_factor=False)
    assert page.locator("#who").text_content() == "Signed in as alice (pwd)"
    page.goto(f"{site.url}#/dispatch/{target}")
    page.locator("#decide-form").wait_for()
    decide_here(page, "abandon_unknown", "node_lost_outcome_unknown")
    # The API answers step_up_required: the console goes back to the provider, which asks
    # for the second factor, and resends the same decision once.
    sign_in_at_provider(page, "alice", second_factor=True)
    answer = page.locator("#answers li").first
    answer.wait_for()
    assert (
        answer.text_content() == f"After signing in again: 200 committed: {target} is now blocked."
    )
    assert page.locator("#who").text_content() == "Signed in as alice (pwd, otp, mfa)"
    assert sql.execution(target)["state"] == "blocked"
    assert len(sql.resolutions(target)) == 1


def test_a_user_without_a_second_factor_is_told_and_nothing_is_written(
    site: Site, page: Any, sql: SQL
) -> None:
    target = site.dispatch_ids[0]
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "carol", second_factor=False)
    page.locator("#decide-form").wait_for()
    decide_here(page, "confirm_succeeded", "checked_downstream_succeeded")
    sign_in_at_provider(page, "carol", second_factor=False)
    answer = page.locator("#answers li").first
    answer.wait_for()
    text = answer.text_content()
    assert text.startswith("After signing in again: 401 step_up_required")
    # What happened, in words: she signed in again, without a second factor.
    assert "signed you in again (pwd) without a second factor" in text, text
    assert "nothing was recorded" in text
    assert sql.execution(target)["state"] == "executing"
    # Everything she chose is still there, to send once she has a second factor.
    expect(page.locator("#one-confirm_succeeded")).to_be_checked()
    expect(page.locator("#one-reason")).to_have_value("checked_downstream_succeeded")
    expect(page.locator("#verified")).to_be_checked()


def test_bulk_decision_shows_progress_and_a_mixed_per_item_result(
    site: Site, page: Any, sql: SQL, world: World, store: Storage
) -> None:
    # A shell crash in the same queue: the filter below leaves it out of the selection.
    shell = world.started("shell.exec", now_ms=int(time.time() * 1000) - 3_600_000)
    unsupported = ScriptedProvider(fixed(FindingKind.UNSUPPORTED))
    reconciler(store, unsupported, action_type="shell.exec").run_cycle()
    page.goto(f"{site.url}#/queue?action_type=test.action")
    sign_in(page, "alice")
    page.locator("#list tbody tr").first.wait_for()
    assert page.locator("#list tbody tr").count() == 3
    page.locator("#select-matching").click()
    page.locator("#bulk-count").filter(has_text="3 selected").wait_for()
    # Someone else decides one of them after this page loaded: its fence must hold.
    raced = site.dispatch_ids[1]
    version = sql.execution(raced)["version"]
    with httpx.Client(base_url=site.url.removesuffix("/console")) as client:
        done = _decide_directly(client, raced, version, page)
    assert done.status_code == 200, done.text
    page.locator("#bulk-confirm_failed").check()
    page.fill("#bulk-reason", "vendor_declined")
    page.locator("#bulk-verified").check()
    page.locator("#bulk-submit").click()
    page.locator("#bulk-commit").click()  # after the review of what it decides
    page.locator("#bulk-done").filter(has_text="3 of 3 decided").wait_for()
    rows = page.locator("#bulk-table tbody tr")
    results = {
        rows.nth(i).locator("td").nth(0).text_content(): rows.nth(i)
        .locator("td")
        .nth(1)
        .text_content()
        for i in range(rows.count())
    }
    assert results == {
        site.dispatch_ids[0]: "committed",
        raced: "conflict",
        site.dispatch_ids[2]: "committed",
    }
    assert "2 committed, 1 conflict" in page.locator("#status").text_content()
    # The list keeps every row, each marked; only the conflict can still be selected.
    for dispatch_id, result in results.items():
        row = page.locator(f"#list tr[data-dispatch-id='{dispatch_id}']")
        assert row.locator(".badge").text_content() == result
        assert row.locator(".pick").is_disabled() == (result == "committed")
    assert page.locator("#bulk-count").text_content() == "1 selected"
    assert [sql.execution(d)["state"] for d in site.dispatch_ids] == [
        "failed",
        "succeeded",
        "failed",
    ]
    assert sql.execution(shell.dispatch_id)["state"] == "executing"


def test_a_bulk_decision_on_a_stale_sign_in_steps_up_and_then_decides_every_item(
    site: Site, page: Any, sql: SQL
) -> None:
    page.goto(f"{site.url}#/queue")
    sign_in(page, "alice", second_factor=False)
    page.locator("#list tbody tr").first.wait_for()
    page.locator("#select-page").click()
    page.locator("#bulk-abandon_unknown").check()
    page.fill("#bulk-reason", "node_lost_outcome_unknown")
    page.locator("#bulk-verified").check()
    page.locator("#bulk-submit").click()
    page.locator("#bulk-commit").click()  # after the review of what it decides
    # Nothing was written before the step-up; afterwards the same items (same mutation ids)
    # are sent once more.
    sign_in_at_provider(page, "alice", second_factor=True)
    page.locator("#bulk-done").filter(has_text="3 of 3 decided").wait_for()
    assert "3 committed" in page.locator("#status").text_content()
    assert page.locator("#who").text_content() == "Signed in as alice (pwd, otp, mfa)"
    assert [sql.execution(d)["state"] for d in site.dispatch_ids] == ["blocked"] * 3
    assert all(len(sql.resolutions(d)) == 1 for d in site.dispatch_ids)


def test_the_waiting_view_filters_looks_up_counts_and_pages_oldest_first_across_a_reload(
    site: Site, page: Any, world: World, store: Storage, axe_source: str
) -> None:
    now = int(time.time() * 1000)
    # Four cases first inspected 3 h, 2 h, 90 min and 10 min ago (the reconciler's clock set
    # back): providers keep looking, so they wait for evidence rather than for a person.
    finding: dict[str, FindingKind] = {}
    provider = ScriptedProvider(lambda i: Finding(finding[i.dispatch_id]))
    waiting = []
    for ago_min, kind in (
        (180, "missing"),
        (120, "missing"),
        (90, "still_running"),
        (10, "missing"),
    ):
        lease = world.started(now_ms=now - 5 * 3_600_000)
        finding[lease.dispatch_id] = FindingKind(kind)
        reconciler(store, provider).at(now - ago_min * 60_000).run_cycle()
        waiting.append(lease.dispatch_id)
    spec = [world.specs[d] for d in waiting]

    page.goto(f"{site.url}#/waiting?limit=2")
    sign_in(page, "alice")
    page.locator("h2").filter(has_text="Waiting for evidence").wait_for()
    assert listed(page) == waiting[:2]
    assert page.locator("#counts").text_content() == (
        "4 cases in this list. Showing rows 1 to 2, oldest first."
    )
    first_row = page.locator("#list tbody tr").first
    # Two times per row: waiting since (the first inspection), then the next look.
    since, next_look = first_row.locator("time").all()
    assert "(3 h ago)" in since.text_content()
    assert " UTC" in since.text_content() and " UTC" in next_look.text_content()
    assert serious_violations(page, axe_source) == []
    shoot(page, "console-waiting.png")

    page.locator("#next-page").click()
    page.wait_for_url(re.compile(r"cursor="))
    rendered(page)
    assert listed(page) == waiting[2:]
    assert page.locator("#counts").text_content().endswith("Showing rows 3 to 4, oldest first.")
    page.reload()  # the page, not just the filter, survives a reload
    rendered(page)
    assert listed(page) == waiting[2:]
    assert page.locator("#counts").text_content().endswith("Showing rows 3 to 4, oldest first.")
    page.locator("#first-page").click()
    page.wait_for_url(re.compile(r"#/waiting\?limit=2$"))
    rendered(page)
    assert listed(page) == waiting[:2]

    apply_filter(page, last_finding="still_running")
    assert listed(page) == [waiting[2]]
    assert page.locator("#counts").text_content().startswith("1 case matches the filter.")
    apply_filter(page, last_finding="", min_age_seconds="3600", limit="25")
    assert listed(page) == waiting[:3]
    assert page.locator("#counts").text_content().startswith("3 cases match the filter.")
    page.locator("#clear-filters").click()
    page.wait_for_url(re.compile(r"#/waiting$"))
    rendered(page)
    for lookup, expected in (
        (spec[3].idempotency_key, waiting[3]),
        (spec[1].approval_request_id, waiting[1]),
        (spec[0].dispatch_id, waiting[0]),
    ):
        apply_filter(page, q=lookup)
        assert listed(page) == [expected], lookup
    apply_filter(page, q=site.dispatch_ids[0])  # in the manual queue, not waiting
    assert listed(page) == []
    assert page.locator("#empty").text_content() == "Nothing matches this filter."

    # The header's lookup opens the case of whatever id was pasted, from any view.
    manual = world.specs[site.dispatch_ids[0]]
    for pasted, opened in (
        (spec[1].idempotency_key, waiting[1]),
        (manual.approval_request_id, manual.dispatch_id),
        (waiting[3], waiting[3]),
    ):
        page.fill("#find-q", pasted)
        page.locator("#find button").click()
        page.wait_for_url(re.compile(re.escape(f"#/dispatch/{opened}") + "$"))
        rendered(page)
        page.locator("h2").filter(has_text=opened).wait_for()
    page.fill("#find-q", "no-such-dispatch")
    page.locator("#find button").click()
    page.locator("#status").filter(has_text="Nothing found for “no-such-dispatch”").wait_for()


def test_the_decided_view_shows_who_decided_newest_first_filters_and_pages(
    site: Site, page: Any, browser: Any, sql: SQL, axe_source: str
) -> None:
    page.goto(site.url)
    sign_in(page, "alice")
    bob = signed_in_tab(browser, site, "bob")
    first, second, third = site.dispatch_ids
    api = httpx.Client(base_url=site.url.removesuffix("/console"))
    for tab, target, decision, reason in (
        (page, first, "confirm_failed", "vendor_declined"),
        (page, second, "confirm_succeeded", "vendor_confirmed"),
        (bob, third, "abandon_unknown", "node_lost_outcome_unknown"),
    ):
        done = _decide_directly(
            api, target, sql.execution(target)["version"], tab, decision=decision, reason=reason
        )
        assert done.status_code == 200, done.text
    bob.context.close()

    page.goto(f"{site.url}#/decided?limit=2")
    page.locator("h2").filter(has_text="Decided").wait_for()
    assert listed(page) == [third, second]
    assert page.locator("#counts").text_content() == (
        "3 decisions in this list. Showing rows 1 to 2, newest first."
    )
    cells = page.locator("#list tbody tr").first.locator("td").all_text_contents()
    assert cells[3:7] == [
        "abandon_unknown → blocked",
        "bob",
        "node_lost_outcome_unknown",
        "pwd, otp, mfa",
    ]
    assert "UTC" in cells[7] and cells[8] == "—"  # no later evidence yet
    assert serious_violations(page, axe_source) == []
    shoot(page, "console-decided.png")

    page.locator("#next-page").click()
    page.wait_for_url(re.compile(r"cursor="))
    rendered(page)
    assert listed(page) == [first]
    page.reload()
    rendered(page)
    assert listed(page) == [first]
    assert page.locator("#counts").text_content() == (
        "3 decisions in this list. Showing rows 3 to 3, newest first."
    )

    page.goto(f"{site.url}#/decided")
    apply_filter(page, user_id="bob")
    assert listed(page) == [third]
    today = time.strftime("%Y-%m-%d", time.gmtime())
    tomorrow = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86_400))
    apply_filter(page, user_id="", since=today, until=today)
    assert listed(page) == [third, second, first]
    apply_filter(page, since=tomorrow, until="")
    assert listed(page) == []
    assert page.locator("#empty").text_content() == "Nothing matches this filter."
    page.reload()
    rendered(page)
    assert page.locator("#f-since").input_value() == tomorrow

    # The decided case opens from the list and shows who decided, with nothing left to decide.
    apply_filter(page, since="")
    page.locator(f"#list a:text-is('{third}')").click()
    page.wait_for_url(re.compile(re.escape(f"#/dispatch/{third}") + "$"))
    rendered(page)
    page.locator("#timeline").wait_for()
    assert page.locator("#case-state").text_content() == (
        "Blocked, outcome unknown: decided by bob"
    )
    events = page.locator("#timeline li").all_text_contents()
    assert any("by bob (node_lost_outcome_unknown)" in e for e in events), events
    assert page.locator("#decide-form").count() == 0


def test_the_decided_view_filters_by_action_type_and_finding_looks_up_and_counts(
    site: Site, page: Any, world: World, store: Storage, sql: SQL, axe_source: str
) -> None:
    # Beside the site's unsupported test.action cases: a shell.exec case (which the provider
    # does not support either) and a test.action conflict, all three then decided by alice.
    now = int(time.time() * 1000)
    shell = world.started("shell.exec", now_ms=now - 3_600_000).dispatch_id
    conflict = world.started(now_ms=now - 3_600_000).dispatch_id
    reconciler(store, ScriptedProvider(fixed(FindingKind.CONFLICT))).run_cycle()
    first, still_open, _ = site.dispatch_ids
    page.goto(site.url)
    sign_in(page, "alice")
    api = httpx.Client(base_url=site.url.removesuffix("/console"))
    for target in (first, shell, conflict):
        done = _decide_directly(api, target, sql.execution(target)["version"], page)
        assert done.status_code == 200, done.text

    page.goto(f"{site.url}#/decided")
    assert listed(page) == [conflict, shell, first]
    assert page.locator("#counts").text_content() == (
        "3 decisions in this list. Showing rows 1 to 3, newest first."
    )
    apply_filter(page, action_type="shell.exec")
    assert listed(page) == [shell]
    assert page.locator("#counts").text_content().startswith("1 decision matches the filter.")
    apply_filter(page, action_type="", overridden_finding="conflict")
    assert listed(page) == [conflict]
    apply_filter(page, overridden_finding="unsupported")
    assert listed(page) == [shell, first]
    assert page.locator("#counts").text_content().startswith("2 decisions match the filter.")
    page.reload()  # the filter lives in the link
    rendered(page)
    assert listed(page) == [shell, first]
    assert page.locator("#f-overridden_finding").input_value() == "unsupported"
    assert serious_violations(page, axe_source) == []

    page.locator("#clear-filters").click()
    page.wait_for_url(re.compile(r"#/decided$"))
    rendered(page)
    for lookup, expected in (
        (world.specs[shell].idempotency_key, shell),
        (world.specs[conflict].approval_request_id, conflict),
        (first, first),
    ):
        apply_filter(page, q=lookup)
        assert listed(page) == [expected], lookup
        assert page.locator("#counts").text_content().startswith("1 decision matches the filter.")
    apply_filter(page, q=world.specs[still_open].idempotency_key)  # open, not decided
    assert listed(page) == []
    assert page.locator("#empty").text_content() == "Nothing matches this filter."

    # The header's Find box now finds a decided case by its idempotency key or approval id.
    for pasted, opened in (
        (world.specs[shell].idempotency_key, shell),
        (world.specs[first].approval_request_id, first),
    ):
        page.fill("#find-q", pasted)
        page.locator("#find button").click()
        page.wait_for_url(re.compile(re.escape(f"#/dispatch/{opened}") + "$"))
        rendered(page)
        page.locator("h2").filter(has_text=opened).wait_for()
        assert page.locator("#decide-form").count() == 0  # decided: nothing left to decide


def test_a_filtered_queue_page_survives_a_reload(site: Site, page: Any) -> None:
    page.goto(site.url)
    sign_in(page, "alice")
    page.locator("#nav a[data-view=queue]").click()
    apply_filter(page, action_type="test.action")
    page.wait_for_url(re.compile(r"#/queue\?action_type=test.action$"))
    rendered(page)
    page.reload()
    rendered(page)
    assert page.locator("#f-action_type").input_value() == "test.action"
    assert sorted(listed(page)) == sorted(site.dispatch_ids)
    assert page.locator("#counts").text_content().startswith("3 cases match the filter.")


def test_two_signed_in_people_propose_and_confirm_a_decision(
    site: Site, page: Any, browser: Any, sql: SQL, axe_source: str
) -> None:
    _two_people_for(sql, "confirm_failed")
    target = site.dispatch_ids[0]
    page.goto(site.url)
    sign_in(page, "alice")
    # Before anyone decides, the row and the case say that this decision needs two people.
    rendered(page)
    expect(page.locator(f"#list tr[data-dispatch-id='{target}'] .two-people")).to_have_text(
        "needs two people: confirm failed"
    )
    open_case(page, site, target)
    expect(page.locator("#two-people")).to_contain_text("Needs two people for Confirm failed")
    decide_here(page, "confirm_failed", "vendor_declined")
    text = last_answer(page, "202 proposed")
    assert text.startswith("202 proposed: waiting for a second person until 20"), text
    assert text.endswith(" UTC (in 60 min)."), text
    assert sql.execution(target)["state"] == "executing"  # nothing settled by one person
    # The case, reloaded as it now is: the proposal, its expiry, and only a withdrawal for alice.
    page.locator("#proposal").wait_for()
    who = page.locator("#proposal-who").text_content()
    assert who.startswith("alice proposed Confirm failed (reason vendor_declined) 20"), who
    expires = page.locator("#proposal-expires").text_content()
    assert "UTC (in 60 min)" in expires, expires
    assert page.locator("#withdraw").is_visible()
    assert page.locator("#decide-form, #reject, #confirm-proposal").count() == 0
    # The link alice hands to the reviewer opens this case.
    assert page.locator("#reviewer-link").text_content() == f"{site.url}#/dispatch/{target}"
    assert serious_violations(page, axe_source) == []

    bob = signed_in_tab(browser, site, "bob")
    bob.locator("#list tbody tr").first.wait_for()
    row = bob.locator(f"#list tr[data-dispatch-id='{target}']")
    assert row.locator("td").last.text_content() == (
        "confirm_failed proposed by alice, expires in 60 min"
    )
    open_case(bob, site, target)
    assert bob.locator("#withdraw").count() == 0
    assert bob.locator("#confirm-proposal").text_content() == (
        "Confirm alice's proposal (Confirm failed)"
    )
    assert bob.locator("#reject").is_visible()
    # The second person's view leads with the proposal; deciding otherwise is folded away.
    expect(bob.locator("#decide-form")).to_be_hidden()
    assert serious_violations(bob, axe_source) == []
    shoot(bob, "console-proposal.png")
    bob.locator("#confirm-verified").check()  # the attestation, inline with the one step
    bob.locator("#confirm-proposal").click()
    assert last_answer(bob, "200") == f"200 committed: {target} is now failed."
    assert sql.execution(target)["state"] == "failed"
    facts = sql.all(
        "SELECT a.user_id FROM recovery_authorizations AS a"
        " JOIN approved_action_recovery_resolutions AS r USING (mutation_id)"
        " WHERE r.dispatch_id = %s ORDER BY a.user_id",
        target,
    )
    assert [f["user_id"] for f in facts] == ["alice", "bob"]
    shown = bob.locator("#authorizations li").all_text_contents()  # the settled case, reloaded
    assert len(shown) == 2 and all(("alice" in a) != ("bob" in a) for a in shown), shown
    bob.goto(f"{site.url}#/decided")
    assert listed(bob) == [target]
    decided = bob.locator(f"#list tr[data-dispatch-id='{target}'] td").all_text_contents()
    assert decided[4] == "alice, confirmed by bob"
    # The decided case names both people and keeps its whole history: queued and why, the
    # proposal (who, when) and its confirmation (who, when).
    bob.locator(f"#list a:text-is('{target}')").click()
    rendered(bob)
    expect(bob.locator("#case-state")).to_have_text("Failed: decided by alice, confirmed by bob")
    events = bob.locator("#timeline li").all_text_contents()
    assert any("Reached the manual queue: unsupported" in e for e in events), events
    assert any("alice proposed Confirm failed (vendor_declined)" in e for e in events), events
    assert any("bob confirmed alice's proposal (vendor_declined)" in e for e in events), events
    assert any("Decided: failed, by alice, confirmed by bob" in e for e in events), events
    bob.context.close()


def test_a_second_person_rejects_a_proposal_and_the_proposer_withdraws_another(
    site: Site, page: Any, browser: Any, sql: SQL
) -> None:
    _two_people_for(sql, "confirm_succeeded")
    first, second, _ = site.dispatch_ids
    page.goto(site.url)
    sign_in(page, "alice")
    bob = signed_in_tab(browser, site, "bob")
    for target in (first, second):
        open_case(page, site, target)
        decide_here(page, "confirm_succeeded", "vendor_confirmed")
        last_answer(page, "202 proposed")

    # bob rejects the first with a reason code of his own.
    open_case(bob, site, first)
    bob.fill("#close-reason", "vendor_log_disagrees")
    bob.locator("#reject").click()
    assert last_answer(bob, "200") == (
        f"200 rejected: the proposal on {first} is closed; nothing was decided."
    )
    bob.locator("#decide-form").wait_for()  # the case again, with no proposal open
    assert bob.locator("#proposal").count() == 0
    closed = sql.one("SELECT * FROM recovery_proposals WHERE dispatch_id = %s", first)
    assert (closed["closed_as"], closed["closed_by"]) == ("rejected", "bob")
    assert closed["close_reason_code"] == "vendor_log_disagrees"

    # alice withdraws her proposal on the second.
    open_case(page, site, second)
    page.fill("#close-reason", "proposed_in_error")
    page.locator("#withdraw").click()
    assert last_answer(page, "200") == (
        f"200 withdrawn: the proposal on {second} is closed; nothing was decided."
    )
    page.locator("#decide-form").wait_for()
    withdrawn = sql.one("SELECT * FROM recovery_proposals WHERE dispatch_id = %s", second)
    assert (withdrawn["closed_as"], withdrawn["closed_by"]) == ("withdrawn", "alice")

    # A different decision from the second person rejects a proposal: the 409 as it came back.
    decide_here(page, "confirm_succeeded", "vendor_confirmed")
    last_answer(page, "202 proposed")
    open_case(bob, site, second)
    bob.locator("#decide-other > summary").click()  # the proposal leads; the rest is folded
    decide_here(bob, "abandon_unknown", "node_lost_outcome_unknown")
    text = last_answer(bob, "409")
    assert text.startswith("409 proposal_rejected: a different decision rejected"), text
    assert "Current state: executing, version " in text
    assert [sql.execution(d)["state"] for d in (first, second)] == ["executing", "executing"]
    bob.context.close()


def test_a_bulk_decision_under_a_two_person_rule_confirms_one_and_proposes_the_rest(
    site: Site, page: Any, browser: Any, sql: SQL
) -> None:
    _two_people_for(sql, "confirm_failed")
    confirmed = site.dispatch_ids[0]
    bob = signed_in_tab(browser, site, "bob")
    open_case(bob, site, confirmed)
    decide_here(bob, "confirm_failed", "vendor_declined")
    last_answer(bob, "202 proposed")
    bob.context.close()

    page.goto(f"{site.url}#/queue")
    sign_in(page, "alice")
    page.locator("#list tbody tr").first.wait_for()
    page.locator("#select-page").click()
    page.locator("#bulk-count").filter(has_text="3 selected").wait_for()
    page.locator("#bulk-confirm_failed").check()
    page.fill("#bulk-reason", "vendor_declined")
    page.locator("#bulk-verified").check()
    page.locator("#bulk-submit").click()
    page.locator("#bulk-commit").click()  # after the review of what it decides
    page.locator("#bulk-done").filter(has_text="3 of 3 decided").wait_for()
    rows = page.locator("#bulk-table tbody tr")
    results = {
        rows.nth(i).locator("td").nth(0).text_content(): rows.nth(i)
        .locator("td")
        .nth(1)
        .text_content()
        for i in range(rows.count())
    }
    assert results == {
        confirmed: "committed",  # alice confirmed bob's proposal
        site.dispatch_ids[1]: "proposed",
        site.dispatch_ids[2]: "proposed",
    }
    assert "1 committed, 2 proposed" in page.locator("#status").text_content()
    assert [sql.execution(d)["state"] for d in site.dispatch_ids] == [
        "failed",
        "executing",
        "executing",
    ]
    open_proposals = sql.all(
        "SELECT dispatch_id, proposed_by FROM recovery_proposals WHERE closed_as IS NULL"
    )
    assert sorted((p["dispatch_id"], p["proposed_by"]) for p in open_proposals) == sorted(
        (d, "alice") for d in site.dispatch_ids[1:]
    )


def test_later_evidence_that_contradicts_a_decision_is_named_on_the_case_and_in_the_list(
    site: Site, page: Any, store: Storage, sql: SQL, world: World, axe_source: str
) -> None:
    late = pytest.importorskip(
        "resolver.core.late_evidence", reason="the late-evidence watcher is not in this build"
    )
    from resolver.core.provider import ProviderRegistry

    # Conflicting evidence sent it to the queue (an `unsupported` one would never be watched).
    target = world.started(now_ms=int(time.time() * 1000) - 60_000).dispatch_id
    reconciler(store, ScriptedProvider(fixed(FindingKind.CONFLICT))).run_cycle()
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "alice")
    page.locator("#decide-form").wait_for()
    decide_here(page, "confirm_failed", "vendor_declined")
    assert last_answer(page, "200") == f"200 committed: {target} is now failed."
    # The receipt turns up after the decision and says the action did happen.
    receipts = ScriptedProvider(fixed(FindingKind.VERIFIED_SUCCEEDED))
    watcher = late.LateEvidenceWatcher(
        store, ProviderRegistry({"test.action": receipts}), late.LateEvidenceSettings(owner="r1")
    )
    assert [r.contradicts for r in watcher.run_cycle().records] == [True]

    page.reload()
    rendered(page)
    notice = page.locator("#contradiction")
    notice.wait_for()
    text = notice.text_content()
    assert text.startswith("Evidence observed after the decision contradicts it."), text
    assert "the last, verified_succeeded," in text and "(failed) stays final" in text
    events = page.locator("#timeline li").all_text_contents()
    assert any("Later evidence: verified_succeeded, CONTRADICTS the decision" in e for e in events)
    assert sql.execution(target)["state"] == "failed"  # the decision stands
    assert serious_violations(page, axe_source) == []
    shoot(page, "console-contradicted.png")

    page.goto(f"{site.url}#/decided")
    assert listed(page) == [target]
    row = page.locator(f"#list tr[data-dispatch-id='{target}']")
    assert row.get_attribute("class") == "contradicted"
    assert row.locator("td").last.text_content() == "contradicted: check it"
    assert serious_violations(page, axe_source) == []


def test_link_outs_come_only_from_configured_templates_with_ids_url_encoded(
    site: Site, page: Any, world: World, store: Storage
) -> None:
    spec = world.executor.create_dispatch(new_spec(dispatch_id="run:42.a"))
    lease = world.executor.at(int(time.time() * 1000) - 3_600_000).lease(spec.dispatch_id)
    world.executor.at(int(time.time() * 1000) - 3_600_000).start(lease)
    reconciler(store, ScriptedProvider(fixed(FindingKind.UNSUPPORTED))).run_cycle()
    page.goto(f"{site.url}#/dispatch/run:42.a")
    sign_in(page, "alice")
    logs = page.locator("#links a", has_text="Logs")
    logs.wait_for()
    assert logs.get_attribute("href") == "https://logs.example/search?q=run%3A42.a&p=proj-1"
    assert logs.get_attribute("rel") == "noopener noreferrer"
    approval = page.locator("#links a", has_text="Approval")
    assert approval.get_attribute("href") == "https://platform.example/approvals/ar-run%3A42.a"
    assert page.locator("#links a").count() == 2  # nothing but the configured templates


def test_an_identity_proxy_forwarding_the_token_needs_no_sign_in(
    store: Storage,
    sql: SQL,
    world: World,
    jwks_file: Path,
    browser: Any,
    signing_key: rsa.RSAPrivateKey,
) -> None:
    _grant(sql, "alice")
    lease = world.started(now_ms=1_000_000)
    reconciler(store, ScriptedProvider(fixed(FindingKind.CONFLICT))).run_cycle()
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    with Server(create_app(store, verifier, signer=TEST_SIGNER)) as client:
        # What the proxy does: every request reaches the API with the user's token.
        context = browser.new_context(
            extra_http_headers={"Authorization": f"Bearer {token(signing_key)}"}
        )
        tab = context.new_page()
        tab.goto(f"{client.base_url}/console")
        tab.locator("#list tbody tr").first.wait_for()
        assert tab.locator("#list td a.mono").all_text_contents() == [lease.dispatch_id]
        assert tab.locator("#signin").count() == 0
        context.close()


def test_a_link_with_a_token_in_its_fragment_signs_in_and_forgets_the_fragment(
    store: Storage,
    sql: SQL,
    world: World,
    jwks_file: Path,
    page: Any,
    signing_key: rsa.RSAPrivateKey,
) -> None:
    """What `resolver demo --live` prints: the token never reaches the server (fragment) and
    leaves the address bar and history before the queue loads."""
    _grant(sql, "alice")
    lease = world.started(now_ms=1_000_000)
    reconciler(store, ScriptedProvider(fixed(FindingKind.CONFLICT))).run_cycle()
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    with Server(create_app(store, verifier, signer=TEST_SIGNER)) as client:
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(f"{client.base_url}/console#token={token(signing_key)}")
        page.locator("#list tbody tr").first.wait_for()
        assert page.locator("#list td a.mono").all_text_contents() == [lease.dispatch_id]
        assert page.evaluate("window.location.hash") == ""
        assert all("token" not in url for url in requested)


def test_data_from_the_server_is_placed_as_text_never_as_markup(
    store: Storage,
    sql: SQL,
    world: World,
    jwks_file: Path,
    browser: Any,
    signing_key: rsa.RSAPrivateKey,
) -> None:
    # A user id is the issuer's `sub`, free text to the API: the console must show it as such.
    hostile = '<img src=x onerror="window.pwned=1">'
    _grant(sql, hostile)
    lease = world.started(now_ms=1_000_000)
    reconciler(store, ScriptedProvider(fixed(FindingKind.CONFLICT))).run_cycle()
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    as_hostile = {"Authorization": f"Bearer {token(signing_key, sub=hostile)}"}
    with Server(create_app(store, verifier, signer=TEST_SIGNER)) as client:
        decided = client.post(
            f"/v1/dispatches/{lease.dispatch_id}/resolution",
            json=body(sql.execution(lease.dispatch_id)["version"]),
            headers=as_hostile,
        )
        assert decided.status_code == 200, decided.text
        context = browser.new_context(extra_http_headers=as_hostile)
        tab = context.new_page()
        tab.goto(f"{client.base_url}/console#/decided")
        assert listed(tab) == [lease.dispatch_id]
        assert tab.locator("#list tbody td").nth(4).text_content() == hostile
        tab.goto(f"{client.base_url}/console#/dispatch/{lease.dispatch_id}")
        tab.locator("#authorizations").wait_for()
        assert hostile in tab.locator("#authorizations").text_content()
        assert tab.evaluate("document.querySelectorAll('img').length") == 0
        assert tab.evaluate("window.pwned") is None
        context.close()


def test_console_is_served_with_a_strict_content_security_policy(
    store: Storage, jwks_file: Path
) -> None:
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    console = console_config(client_id=CLIENT_ID, issuer="https://idp.example/realm")
    with Server(create_app(store, verifier, console=console, signer=TEST_SIGNER)) as client:
        response = client.get("/console")
        assert response.status_code == 200
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self';" in policy
        assert "connect-src 'self' https://idp.example;" in policy
        assert client.get("/console/auth.js").headers["content-type"].startswith("text/javascript")
        document = client.get("/console/config.json").json()
        assert document["oidc"]["client_id"] == CLIENT_ID
        # What each evidence reason means, as the installed providers declare it.
        assert document["evidence_reasons"]["unknown_kid"]["suggests_tampering"] is True
        assert document["evidence_reasons"]["http_404"] == {
            "sentence": "the receipt service has no receipt for it",
            "suggests_tampering": False,
        }
        assert client.get("/console/../../etc/passwd").status_code == 404
        assert client.get("/console/secrets.txt").status_code == 404


def test_keyboard_only_opens_a_case_and_decides_at_200_percent_zoom_with_no_sideways_scroll(
    site: Site, browser: Any, sql: SQL, axe_source: str
) -> None:
    # 200 % zoom of a 1280x800 screen lays the page out in 640x400 CSS pixels.
    context = browser.new_context(viewport={"width": 640, "height": 400})
    tab = context.new_page()
    tab.goto(site.url)
    sign_in(tab, "alice")
    tab.locator("#list tbody tr").first.wait_for()
    assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    first = site.dispatch_ids[0]
    link = tab.locator(f"#list a:text-is('{first}')")
    for _ in range(40):  # Tab through the page until the first case link has the focus
        tab.keyboard.press("Tab")
        if link.evaluate("node => node === document.activeElement"):
            break
    else:
        pytest.fail("the case link is not reachable with Tab")
    # The focus ring a keyboard user follows is there (not only the browser's default).
    ring = link.evaluate(
        "node => getComputedStyle(node).outlineStyle + ' ' + getComputedStyle(node).outlineWidth"
    )
    assert ring == "solid 3px", ring
    tab.keyboard.press("Enter")
    tab.wait_for_url(re.compile(re.escape(f"#/dispatch/{first}") + "$"))
    rendered(tab)
    tab.locator("#decide-form").wait_for()
    assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert serious_violations(tab, axe_source) == []
    # The whole decision by keyboard: the radio group, the reason, the attestation, submit.
    press_tab_until(tab, "#one-confirm_succeeded")
    tab.keyboard.press("ArrowDown")  # moves to and checks "Confirm failed"
    assert tab.locator("#one-confirm_failed").is_checked()
    press_tab_until(tab, "#one-reason")
    tab.keyboard.type("vendor_declined")
    press_tab_until(tab, "#verified")
    tab.keyboard.press("Space")
    press_tab_until(tab, "#decide-submit")
    tab.keyboard.press("Enter")
    assert last_answer(tab, "200") == f"200 committed: {first} is now failed."
    assert sql.execution(first)["state"] == "failed"
    context.close()
