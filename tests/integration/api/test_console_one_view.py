"""The decision in one view, in a real Chromium against the real API, PostgreSQL and OpenID
Provider: everything a decision depends on is in the first screen when the button is pressed
(at 1280x800 and at 800 px wide), the alert's link reaches a correct decision in four
interactions from a new tab, the second person's confirm in three, the queue shows rows first
with its filters folded and its selection's actions in view, going back keeps the view and the
selection, and axe-core finds nothing serious on any view at any of the three sizes. Waits
only for what is rendered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from resolver.db.retention import PostgresRetention
from resolver.retention import pruning as retention
from tests.helpers.console import (
    CHROMIUM,
    SIZES,
    Site,
    decide_here,
    inside_viewport,
    last_answer,
    no_sideways_scroll,
    open_filters,
    rendered,
    scrolled,
    serious_violations,
    shoot,
    sign_in,
    two_people_for,
    unobstructed,
)
from tests.helpers.console_cases import (
    forged_case,
    lost_in,
    oldest_payment,
    settled_long_ago,
    waiting_cases,
)
from tests.helpers.database import SQL, World
from tests.helpers.stores import Storage

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")

# The manual-queue alert's console_url (alerts.consoleUrl + the rule's view).
ALERT_VIEW = "#/oldest?min_age_seconds=14400"
FIRST_SCREEN_SIZES = ["1280x800", "800px-wide"]


def signed_in_browser(browser: Any, site: Site, user: str, size: str) -> Any:
    """A person's browser at `size`, signed in in one tab that stays open on the queue."""
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height})
    first = context.new_page()
    first.goto(f"{site.url}#/queue")
    sign_in(first, user)
    rendered(first)
    return context


def new_tab(context: Any, errors: list[str]) -> Any:
    tab = context.new_page()
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    return tab


class Counter:
    """Every click, typed field, key and navigation the person makes, counted."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, step: Callable[[], Any]) -> None:
        self.count += 1
        step()


@pytest.mark.parametrize("size", FIRST_SCREEN_SIZES)
def test_the_alert_link_in_a_new_tab_reaches_a_correct_decision_in_four_interactions(
    site: Site, browser: Any, store: Storage, sql: SQL, world: World, size: str
) -> None:
    target = oldest_payment(store, world)
    context = signed_in_browser(browser, site, "alice", size)
    errors: list[str] = []
    act = Counter()
    tab = new_tab(context, errors)
    act(lambda: tab.goto(site.url + ALERT_VIEW))  # 1. the alert's link, in a new tab
    expect(tab.locator("#main")).to_have_attribute("data-route", f"#/dispatch/{target}")
    expect(tab.locator("#main")).to_have_attribute("aria-busy", "false")
    # The new tab shares the open tab's session: no sign-in, no identity provider.
    expect(tab.locator("#who")).to_have_text("Signed in as alice (pwd, otp, mfa)")
    expect(tab.locator("#approved-title-text")).to_have_text("Charge 18.50 EUR")
    # The operator checks the payment system (outside the console): the charge never happened.
    act(lambda: tab.locator("#one-confirm_failed").check())  # 2. the decision
    expect(tab.locator("#one-reason")).to_have_value("checked_downstream_not_done")
    act(lambda: tab.locator("#verified").check())  # 3. the attestation
    # When the button is pressed, what the decision rests on is on the screen, unscrolled.
    assert not scrolled(tab)
    for shown in (
        "#case-state",  # the state in words
        "#headline",  # why the evidence says what it says
        "#approved-title-text",  # what was approved: its title
        "#approved dl",  # and its facts
        "#waited",  # how long it waited
        "#one-confirm_failed-says",  # the consequence of the chosen decision
        "#one-reason",
        "#verified",
        "#decide-submit",
    ):
        assert inside_viewport(tab, shown), (size, shown)
    expect(tab.locator("#case-state")).to_have_text("Outcome unknown: needs a person's decision")
    expect(tab.locator("#one-confirm_failed-says")).to_contain_text("Marks it failed")
    if size == "1280x800":
        shoot(tab, "console-alert-case.png", first_screen=True)
    act(lambda: tab.locator("#decide-submit").click())  # 4. record it
    expect(tab.locator("#answers li").first).to_have_text(f"200 committed: {target} is now failed.")
    assert act.count <= 4, act.count
    (resolution,) = sql.resolutions(target)
    assert (resolution["outcome"], resolution["reason_code"], resolution["actor_user_id"]) == (
        "failed",
        "checked_downstream_not_done",
        "alice",
    )
    assert errors == []
    context.close()


@pytest.mark.parametrize("size", FIRST_SCREEN_SIZES)
def test_the_second_person_confirms_from_the_reviewer_link_in_three_interactions(
    site: Site, browser: Any, page: Any, sql: SQL, size: str
) -> None:
    two_people_for(sql, "confirm_failed")
    target = site.dispatch_ids[0]
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "alice")
    rendered(page)
    decide_here(page, "confirm_failed", "vendor_declined")
    last_answer(page, "202 proposed")
    link = str(page.locator("#reviewer-link").text_content())

    context = signed_in_browser(browser, site, "bob", size)
    errors: list[str] = []
    act = Counter()
    tab = new_tab(context, errors)
    act(lambda: tab.goto(link))  # 1. the link alice handed over, in a new tab
    expect(tab.locator("#proposal-who")).to_contain_text("alice proposed Confirm failed")
    act(lambda: tab.locator("#confirm-verified").check())  # 2. the attestation
    assert not scrolled(tab)
    for shown in (
        "#case-state",
        "#headline",
        "#approved",
        "#proposal-who",  # who proposed what
        "#proposal-expires",  # until when
        "#proposal-consequence",  # what confirming does
        "#confirm-verified",
        "#confirm-proposal",
    ):
        assert inside_viewport(tab, shown), (size, shown)
    expect(tab.locator("#case-state")).to_have_text("Outcome unknown: waits for a second person")
    act(lambda: tab.locator("#confirm-proposal").click())  # 3. confirm
    expect(tab.locator("#answers li").first).to_have_text(f"200 committed: {target} is now failed.")
    assert act.count <= 3, act.count
    assert sql.execution(target)["state"] == "failed"
    assert errors == []
    context.close()


@pytest.mark.parametrize("size", FIRST_SCREEN_SIZES)
def test_a_forged_success_s_case_holds_its_warning_and_every_consequence_in_the_first_screen(
    site: Site, browser: Any, store: Storage, world: World, size: str
) -> None:
    target = forged_case(store, world)
    context = signed_in_browser(browser, site, "alice", size)
    tab = context.pages[0]
    tab.goto(f"{site.url}#/dispatch/{target}")
    rendered(tab)
    expect(tab.locator("#decide-form")).to_be_visible()
    assert not scrolled(tab)
    for shown in (
        "#case-state",
        "#headline",
        "#approved-title-text",
        "#approved dl",
        "#waited",
        "#one-confirm_succeeded-says",
        "#tamper-warning",
        "#tamper-ack",
        "#one-confirm_failed-says",
        "#one-abandon_unknown-says",
        "#one-reason",
        "#verified",
        "#decide-submit",
    ):
        assert inside_viewport(tab, shown), (size, shown)
    # Identity, execution, links and the timeline come after the decision, not before it.
    below = tab.evaluate(
        "() => document.querySelector('.details').getBoundingClientRect().top"
        " >= document.getElementById('decide').getBoundingClientRect().bottom"
    )
    assert below
    if size == "800px-wide":
        shoot(tab, "console-case-800px-wide.png", first_screen=True)
    context.close()


@pytest.mark.parametrize("size", FIRST_SCREEN_SIZES)
def test_the_queue_shows_rows_first_folds_its_filters_and_keeps_the_selection_bar_in_view(
    site: Site, browser: Any, store: Storage, world: World, size: str
) -> None:
    for _ in range(3):  # 30 cases in all (one reconciler page each): longer than any screen
        lost_in(store, world, "proj-1", 9)
    context = signed_in_browser(browser, site, "alice", size)
    tab = context.pages[0]
    tab.goto(f"{site.url}#/queue?project_id=proj-1&last_finding=unsupported")
    rendered(tab)
    rows = tab.locator("#list tbody tr")
    expect(rows).to_have_count(30)
    assert inside_viewport(tab, "#list tbody tr"), size  # the first row, without scrolling
    # Filters are folded away and say which are active.
    expect(tab.locator("#filter-panel")).not_to_have_attribute("open", "")
    expect(tab.locator("#filter-summary")).to_have_text(
        "Filters: 2 active (Project: proj-1; Finding: unsupported)"
    )
    expect(tab.locator("#f-project_id")).to_be_hidden()
    if size == "800px-wide":
        shoot(tab, "console-queue-800px-wide.png", first_screen=True)
    # The selection's actions are on the first screen, and still there in the middle of the list.
    assert inside_viewport(tab, "#select-page"), size
    rows.nth(20).scroll_into_view_if_needed()
    assert scrolled(tab)
    assert inside_viewport(tab, "#select-page"), size
    tab.locator("#select-page").click()
    expect(tab.locator("#bulk-count")).to_have_text("30 selected")
    assert inside_viewport(tab, "#bulk-count"), size
    # Its way to decide leads to the form, below the list.
    tab.locator("#bulk-jump").click()
    expect(tab.locator("#bulk-title")).to_be_focused()
    assert inside_viewport(tab, "#bulk-title")
    context.close()


def test_at_200_percent_zoom_the_queue_s_first_row_is_in_the_first_screen(
    site: Site, browser: Any
) -> None:
    context = signed_in_browser(browser, site, "alice", "200pct-zoom")
    tab = context.pages[0]
    first = tab.locator("#list tbody tr a.mono").first
    expect(first).to_be_visible()
    assert not scrolled(tab)
    # The filters and the counts are folded; the first row's link is on screen, uncovered.
    expect(tab.locator("#filter-panel")).not_to_have_attribute("open", "")
    expect(tab.locator("#triage-panel")).not_to_have_attribute("open", "")
    assert unobstructed(tab, "#list tbody tr a.mono")
    assert inside_viewport(tab, "#select-page")
    context.close()


def test_going_back_from_a_case_keeps_the_list_its_filter_its_page_and_the_selection(
    site: Site, page: Any, store: Storage, world: World
) -> None:
    lost_in(store, world, "proj-1", 2)
    listing = "#/queue?project_id=proj-1&limit=2"
    page.goto(site.url + listing)
    sign_in(page, "alice")
    rendered(page)
    page.locator("#next-page").click()
    rendered(page)
    second_page = page.evaluate("window.location.hash")
    ticked = page.locator("#list tbody tr").first.get_attribute("data-dispatch-id")
    page.locator("#list tbody tr .pick").first.check()
    expect(page.locator("#bulk-count")).to_have_text("1 selected")
    opened = page.locator("#list tbody tr").nth(1).get_attribute("data-dispatch-id")
    page.locator(f"#list a:text-is('{opened}')").click()
    expect(page.locator("#main")).to_have_attribute("data-route", f"#/dispatch/{opened}")
    expect(page.locator("#back")).to_have_text("← Manual queue (as you left it)")
    page.locator("#back").click()
    expect(page.locator("#main")).to_have_attribute("data-route", second_page)
    expect(page.locator("#main")).to_have_attribute("aria-busy", "false")
    expect(page.locator("#bulk-count")).to_have_text("1 selected")
    expect(page.locator(f"#list tr[data-dispatch-id='{ticked}'] .pick")).to_be_checked()
    expect(page.locator("#status")).not_to_contain_text("Selection cleared")
    # A reload keeps them too.
    page.reload()
    rendered(page)
    expect(page.locator("#bulk-count")).to_have_text("1 selected")
    expect(page.locator(f"#list tr[data-dispatch-id='{ticked}'] .pick")).to_be_checked()


@pytest.mark.parametrize("size", list(SIZES))
def test_every_view_has_no_serious_accessibility_violation_at_every_size(
    site: Site,
    browser: Any,
    store: Storage,
    sql: SQL,
    world: World,
    database_url: str,
    axe_source: str,
    size: str,
) -> None:
    target = forged_case(store, world)
    waiting_cases(store, world)
    old = settled_long_ago(store, world)
    with PostgresRetention(database_url) as pruning:
        retention.prune(pruning, retention.PruneOptions(older_than_ms=30 * 86_400_000))
    two_people_for(sql, "confirm_failed")
    width, height = SIZES[size]
    context = browser.new_context(viewport={"width": width, "height": height})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(f"{site.url}#/queue")
    tab.locator("#signin-oidc").wait_for()  # no session anywhere: the sign-in view
    assert serious_violations(tab, axe_source) == [], "sign-in"
    sign_in(tab, "alice")
    rendered(tab)
    # alice's own proposal: the proposer's view of a two-person case.
    tab.goto(f"{site.url}#/dispatch/{site.dispatch_ids[0]}")
    rendered(tab)
    decide_here(tab, "confirm_failed", "vendor_declined")
    last_answer(tab, "202 proposed")
    views = [
        "#/queue",
        "#/waiting",
        "#/proposals",
        "#/decided",
        f"#/dispatch/{target}",  # open, a forged receipt's warning
        f"#/dispatch/{site.dispatch_ids[0]}",  # the proposer's view
        f"#/dispatch/{old['automatic']}",  # settled, its execution pruned
        f"#/dispatch/{old['completion']}",  # pruned whole: what retention kept
        "#/find?q=no-such-dispatch",
        "#/find?q=EUR%20to",  # words that match several: a list
        "#/find?q=https%3A%2F%2Fplatform.example%2F",  # a link with no id in it
    ]
    for view in views:
        tab.goto(f"{site.url}{view}")
        rendered(tab)
        assert no_sideways_scroll(tab), (size, view)
        assert serious_violations(tab, axe_source) == [], (size, view)
    # The filters unfolded, and the live line paused (it stays paused: nothing redraws the
    # list under the bulk review below).
    tab.goto(f"{site.url}#/queue")
    open_filters(tab)
    tab.locator("#live-pause").click()
    expect(tab.locator("#live")).to_have_attribute("data-mode", "paused")
    assert serious_violations(tab, axe_source) == [], (size, "filters and pause")
    # The bulk review.
    tab.locator("#select-page").click()
    tab.locator("#bulk-abandon_unknown").check()
    tab.fill("#bulk-reason", "cannot_verify")
    tab.locator("#bulk-verified").check()
    tab.locator("#bulk-submit").click()
    expect(tab.locator("#bulk-summary")).to_be_visible()
    assert no_sideways_scroll(tab), (size, "bulk review")
    assert serious_violations(tab, axe_source) == [], (size, "bulk review")
    assert errors == []
    context.close()
