"""The operator console's test rig: a real OpenID Provider (node-oidc-provider), axe-core, and
Chromium driven by Playwright. npm installs both packages once, from the committed lock file,
into a cache directory; without node, npm or a reachable registry the tests skip and say why.

The one home of the console tests' fixtures (the site, the browser, a page) and of the page
helpers they share: signing in, waiting for a drawn view, reading a list, filtering, deciding."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from resolver.core.domain import FindingKind
from resolver.executor.client import ExecutionClient
from resolver.human.api import create_app
from resolver.human.auth import JwksUrl, TokenVerifier
from resolver.human.console_config import console_config
from tests.helpers.cache import locked_cache_dir
from tests.helpers.database import SQL, World, new_spec
from tests.helpers.oidc import AUDIENCE, Server
from tests.helpers.providers import ScriptedProvider, fixed, reconciler
from tests.helpers.signing import TEST_SIGNER
from tests.helpers.stores import Storage
from tests.helpers.telemetry import free_port

RIG = Path(__file__).resolve().parent / "console_op"
CLIENT_ID = "resolver-console"
PASSWORD = "correct horse"  # the rig's users, see console_op/op.mjs
OTP = "123456"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LINKS = json.dumps(
    [
        {
            "label": "Approval",
            "template": "https://platform.example/approvals/{approval_request_id}",
        },
        {"label": "Logs", "template": "https://logs.example/search?q={dispatch_id}&p={project_id}"},
    ]
)
# Set to a directory (e.g. docs/images) to keep the console's screenshots of a test run.
SCREENSHOTS = os.environ.get("RESOLVER_TEST_SCREENSHOTS")


@dataclass(frozen=True)
class Provider:
    issuer: str
    jwks_uri: str
    console_port: int

    @property
    def console_url(self) -> str:
        return f"http://127.0.0.1:{self.console_port}/console"


@pytest.fixture(scope="session")
def npm_rig() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the console's OpenID Provider and axe-core")
    with locked_cache_dir("console-rig") as workdir:
        lock = (RIG / "package-lock.json").read_bytes()
        installed = workdir / "node_modules" / ".package-lock.json"
        if not installed.is_file() or (workdir / "package-lock.json").read_bytes() != lock:
            for name in ("package.json", "package-lock.json"):
                shutil.copy(RIG / name, workdir / name)
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=workdir,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if done.returncode != 0:
                pytest.skip(
                    f"npm could not install the console rig (registry unreachable?): {done.stderr}"
                )
        shutil.copy(RIG / "op.mjs", workdir / "op.mjs")
    return workdir


@pytest.fixture(scope="module")
def provider(npm_rig: Path) -> Iterator[Provider]:
    """One OpenID Provider per module; the console's API listens on the port its client's
    redirect URI names (each test starts its own API there in turn)."""
    port = free_port()
    proc = subprocess.Popen(
        ["node", "op.mjs", f"http://127.0.0.1:{port}/console", AUDIENCE],
        cwd=npm_rig,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:  # the rig prints its issuer once it listens: no sleeping
            if line.startswith("{"):
                started = json.loads(line)
                break
        else:
            pytest.fail("the OpenID Provider exited before it listened")
        yield Provider(started["issuer"], started["jwks_uri"], port)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def axe_source(npm_rig: Path) -> str:
    return (npm_rig / "node_modules" / "axe-core" / "axe.min.js").read_text()


def sign_in_at_provider(page: Any, user: str, *, second_factor: bool) -> None:
    """Fill the provider's own sign-in page (a different origin) as the user would."""
    page.locator("#login").wait_for()
    page.fill("#login", user)
    page.fill("#password", PASSWORD)
    if second_factor:
        page.fill("#otp", OTP)
    page.click("button[type=submit]")


def serious_violations(page: Any, axe_source: str) -> list[dict[str, Any]]:
    """axe-core run in the page (injected through the debugging protocol, so the page's own
    strict CSP stays on): the rules with a serious or critical impact."""
    page.evaluate(axe_source)
    result = page.evaluate("async () => (await axe.run(document)).violations")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in result
        if v["impact"] in {"serious", "critical"}
    ]


@dataclass
class Site:
    url: str
    dispatch_ids: list[str]
    provider: Provider


def grant(sql: SQL, *users: str) -> None:
    """Project proj-1, each user allowed to recover in it."""
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    for user in users:
        sql.all(
            "INSERT INTO recovery_role_bindings VALUES ('proj-1', %s, 'approval.recover', 1)", user
        )


@pytest.fixture
def site(store: Storage, sql: SQL, world: World, provider: Provider) -> Iterator[Site]:
    """Three manual items; the API verifies the provider's tokens; sign-in is configured."""
    grant(sql, "alice", "bob", "carol")
    # Each dispatch created, started at once on the real clock (the database's) and its
    # executor lost: a 1 ms lease, so the timeline reads in order and no decision meets a
    # live lease; the reconciler inspects them straight after.
    executor = ExecutionClient(store, owner="executor-1", lease_seconds=0.001)
    leases = []
    for _ in range(3):
        spec = executor.create_dispatch(new_spec())
        world.specs[spec.dispatch_id] = spec
        started_ms = int(time.time() * 1000) + 1  # after the creation's own clock reading
        lease = executor.at(started_ms).lease(spec.dispatch_id)
        leases.append(executor.at(started_ms).start(lease))
    inspected_ms = started_ms + 10
    reconciler(store, ScriptedProvider(fixed(FindingKind.UNSUPPORTED))).at(inspected_ms).run_cycle()
    verifier = TokenVerifier.from_jwks_url(
        JwksUrl(provider.jwks_uri), issuer=provider.issuer, audience=AUDIENCE
    )
    console = console_config(client_id=CLIENT_ID, issuer=provider.issuer, links=LINKS)
    with Server(
        create_app(store, verifier, console=console, signer=TEST_SIGNER), port=provider.console_port
    ):
        yield Site(provider.console_url, [x.dispatch_id for x in leases], provider)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium per module: starting Playwright's driver and the browser costs
    seconds, a fresh context (cookies, storage, the provider's session) costs milliseconds.
    Module, not session, scope: a second Playwright in the same process (the live demo's
    test) cannot start while this one runs."""
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """The module's Chromium with no context left open by an earlier test: every test starts
    from nothing signed in, and a failed test's contexts are closed after it."""
    yield chromium
    for context in chromium.contexts:
        context.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    context.close()
    assert errors == [], errors  # no uncaught script error in any test


def sign_in(page: Any, user: str, *, second_factor: bool = True) -> None:
    page.locator("#signin-oidc").click()
    sign_in_at_provider(page, user, second_factor=second_factor)
    page.locator("#who").wait_for()


def signed_in_tab(browser: Any, site: Site, user: str) -> Any:
    """Another person at another desk: their own browser context, signed in at the provider."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    tab.goto(site.url)
    sign_in(tab, user)
    return tab


def shoot(page: Any, name: str, *, first_screen: bool = False) -> None:
    """Keep a screenshot when RESOLVER_TEST_SCREENSHOTS names a directory: the whole page, or
    only its first screen (what is seen without scrolling)."""
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / name), full_page=not first_screen)


def rendered(page: Any) -> None:
    """Waits until the console has drawn the view its address names.

    The console marks `#main` busy while it redraws and names the drawn route when done: a
    changed URL alone says nothing about what is on screen, and a loaded machine draws late.
    """
    page.wait_for_function(
        "() => { const main = document.getElementById('main');"
        " return main.getAttribute('aria-busy') === 'false'"
        " && main.dataset.route === window.location.hash; }"
    )


def listed(page: Any) -> list[str]:
    """The dispatch ids of the list as shown, top to bottom, once the list has been drawn."""
    rendered(page)
    return page.locator("#list tbody tr td a.mono").all_text_contents()


def open_filters(page: Any) -> None:
    """Unfold the list's filters (folded away so the rows come first), as a person would."""
    rendered(page)
    panel = page.locator("#filter-panel")
    if panel.get_attribute("open") is None:
        panel.locator("summary").click()
    page.locator("#filters button[type=submit]").wait_for()


def apply_filter(page: Any, **fields: str) -> None:
    before = page.url
    open_filters(page)
    for name, value in fields.items():
        control = page.locator(f"#f-{name}")
        if control.evaluate("node => node.tagName") == "SELECT":
            control.select_option(value)
        else:
            control.fill(value)
    page.locator("#filters button[type=submit]").click()
    page.wait_for_function("before => window.location.href !== before", arg=before)
    rendered(page)


def open_case(tab: Any, site: Site, dispatch_id: str) -> None:
    tab.goto(f"{site.url}#/dispatch/{dispatch_id}")
    tab.locator("h2").filter(has_text=dispatch_id).wait_for()
    tab.locator("#decide").wait_for()


def decide_here(page: Any, decision: str, reason: str) -> None:
    page.locator(f"#one-{decision}").check()
    page.fill("#one-reason", reason)
    page.locator("#verified").check()
    page.locator("#decide-submit").click()


def last_answer(tab: Any, starts: str) -> str:
    answer = tab.locator("#answers li").first
    answer.filter(has_text=starts).wait_for()
    return str(answer.text_content())


def decide_directly(
    client: httpx.Client,
    dispatch_id: str,
    version: int,
    page: Any,
    *,
    decision: str = "confirm_succeeded",
    reason: str = "vendor_confirmed",
) -> httpx.Response:
    """Another tab of the user signed in on `page`, deciding through the API with its token."""
    access = page.evaluate("sessionStorage.getItem('resolver.token')")
    return client.post(
        f"/v1/dispatches/{dispatch_id}/resolution",
        json={
            "decision": decision,
            "mutation_id": f"other-tab-{dispatch_id}",
            "expected_execution_version": version,
            "reason_code": reason,
        },
        headers={"Authorization": f"Bearer {access}"},
    )


def two_people_for(sql: SQL, decision: str) -> None:
    """The platform's rule: this decision on a test.action needs a second person."""
    sql.all("INSERT INTO recovery_two_person_rules VALUES ('test.action', %s)", decision)


def press_tab_until(tab: Any, selector: str, limit: int = 60) -> None:
    target = tab.locator(selector)
    for _ in range(limit):
        tab.keyboard.press("Tab")
        if target.evaluate("node => node === document.activeElement"):
            return
    pytest.fail(f"{selector} is not reachable with Tab")


# The three ways an operator reads the console: a laptop, a narrow window (or a split screen)
# and 200 % zoom of the laptop's screen (which lays the page out in 640x400 CSS pixels).
SIZES = {"1280x800": (1280, 800), "800px-wide": (800, 800), "200pct-zoom": (640, 400)}


def inside_viewport(page: Any, selector: str) -> bool:
    """Whether the element is drawn and wholly inside the screen as it is scrolled now."""
    return bool(
        page.locator(selector).first.evaluate(
            "n => { const r = n.getBoundingClientRect();"
            " return r.height > 0 && r.top >= 0 && r.left >= 0"
            " && r.bottom <= window.innerHeight && r.right <= window.innerWidth; }"
        )
    )


def scrolled(page: Any) -> bool:
    return bool(page.evaluate("window.scrollX !== 0 || window.scrollY !== 0"))


def no_sideways_scroll(page: Any) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def post_bodies(page: Any, path_end: str) -> list[dict[str, Any]]:
    """Every JSON body the page POSTs to a path ending in `path_end`, in order, from now on."""
    sent: list[dict[str, Any]] = []
    page.on(
        "request",
        lambda r: (
            sent.append(json.loads(r.post_data or "{}"))
            if r.method == "POST" and r.url.endswith(path_end)
            else None
        ),
    )
    return sent


def unobstructed(page: Any, selector: str) -> bool:
    """Inside the screen and on top there (no sticky bar or notice drawn over its middle)."""
    return inside_viewport(page, selector) and bool(
        page.locator(selector).first.evaluate(
            "n => { const r = n.getBoundingClientRect();"
            " const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);"
            " return top === n || n.contains(top); }"
        )
    )
