"""The operator console's test rig: a real OpenID Provider (node-oidc-provider), axe-core, and
Chromium driven by Playwright. npm installs both packages once, from the committed lock file,
into a cache directory; without node, npm or a reachable registry the tests skip and say why."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cache import locked_cache_dir
from tests.helpers.oidc import AUDIENCE
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
