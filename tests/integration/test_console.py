"""The operator console in a real headless Chromium against the real API and PostgreSQL."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.core.domain import FindingKind
from resolver.db.repository import PostgresStore
from resolver.human.api import create_app
from resolver.human.auth import TokenVerifier
from tests.conftest import SQL, World
from tests.integration.oidc import AUDIENCE, ISSUER, Server, token
from tests.integration.test_recovery import reconciler
from tests.providers_for_tests import ScriptedProvider, fixed

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def site(
    store: PostgresStore, jwks_file: Path, sql: SQL, world: World
) -> Iterator[tuple[httpx.Client, list[str]]]:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    leases = [world.started(now_ms=1_000_000) for _ in range(2)]
    reconciler(store, ScriptedProvider(fixed(FindingKind.UNSUPPORTED))).run_cycle()
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    with Server(create_app(store, verifier)) as client:
        yield client, [x.dispatch_id for x in leases]


@pytest.fixture
def page(tmp_path: Path) -> Iterator[object]:
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context()
        yield context.new_page()
        context.close()
        browser.close()


def test_operator_signs_in_sees_the_queue_and_decides(
    site, page, signing_key: rsa.RSAPrivateKey, sql: SQL, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    client, dispatch_ids = site
    errors: list[str] = []
    # Uncaught script errors; the first, unauthenticated queue load's 401 is expected.
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{client.base_url}/console")
    page.fill("#token", token(signing_key))
    page.click("#signin-form button")
    rows = page.locator("#queue tbody tr")
    rows.first.wait_for()
    assert sorted(rows.locator(".dispatch").all_text_contents()) == sorted(dispatch_ids)

    target = page.locator(f"tr[data-dispatch-id='{dispatch_ids[0]}']")
    target.locator("select").select_option("confirm_failed")
    target.locator("input[name=reason_code]").fill("vendor_declined")
    target.locator("input[name=verified]").check()
    target.locator("button").click()
    page.locator("#status.ok").wait_for()
    assert "is now failed (committed)" in page.locator("#status").text_content()
    assert page.locator("#queue tbody tr").count() == 1
    page.screenshot(path=str(tmp_path / "console.png"))

    assert sql.execution(dispatch_ids[0])["state"] == "failed"
    (res,) = sql.resolutions(dispatch_ids[0])
    assert (res["actor_user_id"], res["reason_code"]) == ("alice", "vendor_declined")
    assert errors == []


def test_stale_authentication_shows_the_step_up_message(
    site, page, signing_key: rsa.RSAPrivateKey, sql: SQL
) -> None:  # type: ignore[no-untyped-def]
    client, dispatch_ids = site
    page.goto(f"{client.base_url}/console")
    page.fill("#token", token(signing_key, amr=["pwd"]))
    page.click("#signin-form button")
    target = page.locator(f"tr[data-dispatch-id='{dispatch_ids[1]}']")
    target.wait_for()
    target.locator("select").select_option("abandon_unknown")
    target.locator("input[name=reason_code]").fill("operator_unsure")
    target.locator("input[name=verified]").check()
    target.locator("button").click()
    target.locator(".result.error").wait_for()
    assert "second factor" in target.locator(".result").text_content()
    assert sql.execution(dispatch_ids[1])["state"] == "executing"


def test_console_is_served_with_a_strict_content_security_policy(site) -> None:  # type: ignore[no-untyped-def]
    client, _ = site
    response = client.get("/console")
    assert response.status_code == 200
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert client.get("/console/../../etc/passwd").status_code == 404
    assert client.get("/console/secrets.txt").status_code == 404


def test_a_link_with_a_token_in_its_fragment_signs_in_and_forgets_the_fragment(
    site, page, signing_key: rsa.RSAPrivateKey
) -> None:  # type: ignore[no-untyped-def]
    """What `resolver demo --live` prints: the token never reaches the server (fragment) and
    leaves the address bar and history before the queue loads."""
    client, dispatch_ids = site
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{client.base_url}/console#token={token(signing_key)}")
    rows = page.locator("#queue tbody tr")
    rows.first.wait_for()
    assert sorted(rows.locator(".dispatch").all_text_contents()) == sorted(dispatch_ids)
    assert page.evaluate("window.location.hash") == ""
    assert page.locator("#signin").is_hidden()
    assert all("token" not in url for url in requested)
