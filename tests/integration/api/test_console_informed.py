"""The informed decision in the console, in a real Chromium against the real API, PostgreSQL
and OpenID Provider: what was approved, why the evidence says what it says, and the separate
acknowledgement a possibly forged success needs. Waits only for rendered state."""

from __future__ import annotations

import time
from typing import Any

import pytest

from resolver.core.domain import ActionSummary, DispatchIdentity, Finding, Outcome
from resolver.db.repository import PostgresStore
from resolver.evidence.receipts import KeyRing, encode_receipt, receipt_finding, sign_receipt
from resolver.executor import ExecutionClient
from tests.helpers.database import SQL, World, new_spec
from tests.helpers.providers import ScriptedProvider, reconciler, verified
from tests.integration.api.test_console import (  # noqa: F401 - fixtures
    Site,
    browser,
    page,
    rendered,
    serious_violations,
    shoot,
    sign_in,
    site,
)

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

TRUSTED = KeyRing({"platform-1": b"p" * 32}, signing_kid="platform-1")
FORGER = KeyRing({"forger-9": b"f" * 32}, signing_kid="forger-9")
CHARGE = ActionSummary.of(
    "Charge 2,490.00 EUR to customer 4471", {"Amount": "2,490.00 EUR", "Order": "ord-7781"}
)


def forged_success(identity: DispatchIdentity) -> Finding:
    """What a receipt signed outside the ring proves: a conflict, with its reason."""
    receipt = sign_receipt(
        identity,
        outcome=Outcome.SUCCEEDED,
        result_code="charged",
        finished_at_ms=identity.started_at_ms + 5,
        receipt_id="forged-1",
        keys=FORGER,
    )
    return receipt_finding(encode_receipt(receipt), identity, TRUSTED, source="http_receipt")


def forged_case(store: PostgresStore, world: World) -> str:
    """A charge with its summary, its executor lost, its receipt forged: in the manual queue."""
    executor = ExecutionClient(store, owner="pay-worker-3", lease_seconds=0.001)
    spec = executor.create_dispatch(new_spec("pay.charge", action_summary=CHARGE))
    world.specs[spec.dispatch_id] = spec
    started_ms = int(time.time() * 1000) + 1
    executor.start(executor.lease(spec.dispatch_id, now_ms=started_ms), now_ms=started_ms)
    reconciler(store, ScriptedProvider(forged_success), action_type="pay.charge").run_cycle(
        now_ms=started_ms + 10
    )
    return spec.dispatch_id


def test_a_forged_receipt_conflict_names_its_reason_and_demands_a_separate_acknowledgement(
    site: Site,  # noqa: F811 - the fixtures of test_console
    page: Any,  # noqa: F811
    store: PostgresStore,
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
    shoot(page, "console-queue.png")

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
    site: Site,  # noqa: F811 - the fixtures of test_console
    page: Any,  # noqa: F811
    store: PostgresStore,
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
    site: Site,  # noqa: F811 - the fixtures of test_console
    page: Any,  # noqa: F811
    store: PostgresStore,
    world: World,
    axe_source: str,
) -> None:
    executor = ExecutionClient(store, owner="executor-1", lease_seconds=0.001)
    spec = executor.create_dispatch(new_spec())
    started_ms = int(time.time() * 1000) + 1
    executor.start(executor.lease(spec.dispatch_id, now_ms=started_ms), now_ms=started_ms)
    reconciler(store, ScriptedProvider(verified)).run_cycle(now_ms=started_ms + 10)
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
