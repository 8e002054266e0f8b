"""Sessions that never lose a decision, in a real Chromium against the real API, PostgreSQL and
OpenID Provider: one session across the console's tabs, a silent sign-in when the provider's
own session allows it, an expired or refused token mid-decision that keeps the decision, the
attestation and the forged-evidence acknowledgement, signs in again (showing the provider's
form when it must) and resends once with the same mutation id, and messages and a header that
say what actually happened. Waits only for what is rendered."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.console import (
    CHROMIUM,
    Site,
    post_bodies,
    rendered,
    sign_in,
    sign_in_at_provider,
)
from tests.helpers.console_cases import forged_case
from tests.helpers.database import SQL, World
from tests.helpers.stores import Storage

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")

# A token whose signature no longer verifies: what an early expiry or a revocation looks like
# to the API (401 invalid_token), while the page still reads a name in it.
REFUSED = (
    "sessionStorage.setItem('resolver.token',"
    " sessionStorage.getItem('resolver.token').slice(0, -6) + 'AAAAAA')"
)
# The same token with its expiry moved a minute into the past: expired, as the page reads it.
EXPIRED = """() => {
  const [head, body, sig] = sessionStorage.getItem('resolver.token').split('.');
  const claims = JSON.parse(atob(body.replace(/-/g, '+').replace(/_/g, '/')));
  claims.exp = Math.floor(Date.now() / 1000) - 60;
  const encoded = btoa(JSON.stringify(claims)).replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
  sessionStorage.setItem('resolver.token', [head, encoded, sig].join('.'));
}"""


def provider_pages(tab: Any) -> list[str]:
    """The identity provider's own pages (its sign-in form) the tab is shown, from now on."""
    shown: list[str] = []
    tab.on(
        "framenavigated",
        lambda frame: shown.append(frame.url) if "/interaction/" in frame.url else None,
    )
    return shown


def authorizations(tab: Any) -> list[str]:
    """Every authorization request the tab sends the provider, from now on."""
    sent: list[str] = []
    tab.on("request", lambda r: sent.append(r.url) if "/auth?" in r.url else None)
    return sent


def fill_forged_success(page: Any) -> None:
    """Everything a confirm-succeeded of a possibly forged success needs, not yet sent."""
    page.locator("#one-confirm_succeeded").check()
    page.locator("#tamper-ack").check()
    page.fill("#one-reason", "checked_ledger")
    page.locator("#verified").check()


def test_a_second_tab_shares_the_first_tab_s_session_and_a_sign_out_ends_both(
    site: Site, page: Any
) -> None:
    page.goto(site.url)
    sign_in(page, "alice")
    rendered(page)
    other = page.context.new_page()
    asked = authorizations(other)
    other.goto(f"{site.url}#/dispatch/{site.dispatch_ids[0]}")
    rendered(other)
    expect(other.locator("#who")).to_have_text("Signed in as alice (pwd, otp, mfa)")
    expect(other.locator("#decide-form")).to_be_visible()
    assert asked == []  # nothing went to the identity provider: the open tab answered
    # Signing out in one tab signs out the other, and no silent sign-in brings it back.
    other.locator("#sign-out").click()
    expect(page.locator("#signin-oidc")).to_be_visible()
    expect(page.locator("#who")).to_have_count(0)
    expect(other.locator("#signin-oidc")).to_be_visible()
    assert asked == []


def test_a_new_tab_with_no_console_tab_open_signs_in_silently_from_the_provider_s_session(
    site: Site, page: Any
) -> None:
    page.goto(site.url)
    sign_in(page, "alice")
    rendered(page)
    context = page.context
    alone = context.new_page()  # the only console tab once the first one closes
    page.close()
    asked = authorizations(alone)
    shown = provider_pages(alone)
    alone.goto(f"{site.url}#/dispatch/{site.dispatch_ids[1]}")
    rendered(alone)
    expect(alone.locator("h2")).to_contain_text(site.dispatch_ids[1])
    expect(alone.locator("#who")).to_have_text("Signed in as alice (pwd, otp, mfa)")
    # One silent authorization request, answered from the provider's session: no form.
    assert len(asked) == 1 and "prompt=none" in asked[0], asked
    assert shown == []


def test_without_a_provider_session_a_new_tab_asks_for_a_sign_in_after_one_silent_try(
    site: Site, page: Any
) -> None:
    asked = authorizations(page)
    page.goto(f"{site.url}#/dispatch/{site.dispatch_ids[0]}")
    page.locator("#signin-oidc").wait_for()
    expect(page.locator("#status")).to_have_text("Not signed in.")
    assert len(asked) == 1 and "prompt=none" in asked[0], asked
    # The sign-in brings the person back to the case the link named.
    sign_in(page, "bob")
    rendered(page)
    expect(page.locator("h2")).to_contain_text(site.dispatch_ids[0])


def test_a_refused_token_mid_decision_shows_the_provider_when_it_must_and_resends_once(
    site: Site, page: Any, store: Storage, sql: SQL, world: World
) -> None:
    """bob signed in without his second factor; his token is refused as he records a
    possibly forged success. Signing in again asks the provider for what a decision needs, so
    the provider shows its form (his session is password-only); the decision, his attestation
    and his acknowledgement survive it, and the same request goes once more."""
    target = forged_case(store, world)
    sent = post_bodies(page, "/resolution")
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "bob", second_factor=False)
    rendered(page)
    fill_forged_success(page)
    page.evaluate(REFUSED)
    page.locator("#decide-submit").click()
    page.locator("#step-up").wait_for()  # the provider's own form, asking for the second factor
    sign_in_at_provider(page, "bob", second_factor=True)
    expect(page.locator("#answers li").first).to_have_text(
        f"After signing in again: 200 committed: {target} is now succeeded."
    )
    assert len(sent) == 2 and sent[0] == sent[1], sent  # the same request, mutation id and all
    (resolution,) = sql.resolutions(target)
    assert (resolution["mutation_id"], resolution["actor_user_id"]) == (
        sent[0]["mutation_id"],
        "bob",
    )
    expect(page.locator("#who")).to_have_text("Signed in as bob (pwd, otp, mfa)")


def test_a_sign_in_that_cannot_decide_says_so_and_keeps_every_choice(
    site: Site, page: Any, store: Storage, sql: SQL, world: World
) -> None:
    """carol has no second factor. Her refused token is replaced by a new sign-in that is
    still password-only: the console says exactly that, records nothing, and her decision,
    attestation and acknowledgement are all still on the form."""
    target = forged_case(store, world)
    sent = post_bodies(page, "/resolution")
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "carol", second_factor=False)
    rendered(page)
    fill_forged_success(page)
    page.evaluate(REFUSED)
    page.locator("#decide-submit").click()
    page.locator("#step-up").wait_for()
    sign_in_at_provider(page, "carol", second_factor=False)
    answer = page.locator("#answers li").first
    expect(answer).to_contain_text("After signing in again: 401 step_up_required")
    expect(answer).to_contain_text(
        "The identity provider signed you in again (pwd) without a second factor, which a"
        " decision needs: nothing was recorded, and your choices are kept below."
    )
    expect(page.locator("#one-confirm_succeeded")).to_be_checked()
    expect(page.locator("#tamper-ack")).to_be_checked()
    expect(page.locator("#one-reason")).to_have_value("checked_ledger")
    expect(page.locator("#verified")).to_be_checked()
    expect(page.locator("#who")).to_have_text("Signed in as carol (pwd)")
    assert len(sent) == 2 and sent[0] == sent[1], sent  # resent once, never more
    assert sql.resolutions(target) == []
    assert sql.execution(target)["state"] == "executing"


def test_an_expired_token_reads_expired_and_a_decision_signs_in_before_it_is_sent(
    site: Site, page: Any, store: Storage, sql: SQL, world: World
) -> None:
    """alice's token runs out while the case is open: the header stops calling her signed
    in, and Record does not send the doomed request: it signs in again (silently: her session
    at the provider is recent and strong) and sends the decision once."""
    target = site.dispatch_ids[2]
    sent = post_bodies(page, "/resolution")
    page.goto(f"{site.url}#/dispatch/{target}")
    sign_in(page, "alice")
    rendered(page)
    page.evaluate(EXPIRED)
    expect(page.locator("#who")).to_have_text("Your sign-in as alice has expired")
    expect(page.locator("#sign-in")).to_have_text("Sign in again")
    shown = provider_pages(page)
    page.locator("#one-abandon_unknown").check()
    page.locator("#verified").check()
    page.locator("#decide-submit").click()
    expect(page.locator("#answers li").first).to_have_text(
        f"After signing in again: 200 committed: {target} is now blocked."
    )
    assert len(sent) == 1, sent  # nothing was sent with the expired token
    assert shown == []  # the provider's session sufficed: no form
    (resolution,) = sql.resolutions(target)
    assert (resolution["mutation_id"], resolution["reason_code"]) == (
        sent[0]["mutation_id"],
        "cannot_verify",
    )
    expect(page.locator("#who")).to_have_text("Signed in as alice (pwd, otp, mfa)")
