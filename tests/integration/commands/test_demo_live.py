"""`resolver demo --live` run headless: real replicas converge, a human decides in the console
(in Chromium when it is installed, else through the API the console calls) with the printed
link, and Ctrl-C stops everything cleanly."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from resolver.demo.executor import Story, story_of
from tests.helpers.console import CHROMIUM, CHROMIUM_ARGS
from tests.helpers.database import SQL
from tests.helpers.telemetry import free_port

try:
    import playwright.sync_api as _PLAYWRIGHT
except ImportError:  # the browser half is optional: the API half runs anyway
    _PLAYWRIGHT = None


def test_live_demo_converges_and_a_human_decides(
    database_url: str, sql: SQL, tmp_path: Path
) -> None:
    port = free_port()
    env = {**os.environ, "RESOLVER_DATABASE_URL": database_url}
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "resolver",
            "demo",
            "--live",
            "--simulate-seconds",
            "6",
            "--rate",
            "15",
            "--api-port",
            str(port),
            "--data-dir",
            str(tmp_path),
            "--seed",
            "7",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []
    threading.Thread(target=lambda: [lines.put(x) for x in demo.stdout or []], daemon=True).start()
    try:
        url = _wait_for_console(demo, lines, seen)
        token = re.sub(r"^.*#token=", "", url)
        if CHROMIUM is not None and _PLAYWRIGHT is not None:
            decided = _decide_in_the_console(url)
        else:  # no browser here: the same decision through the API the page calls
            decided = _decide_one_manual_item(port, token)
        _forged_token_is_refused(port, token)
    finally:
        demo.send_signal(signal.SIGINT)  # what Ctrl-C sends
        code = demo.wait(timeout=90)
    while not lines.empty():
        seen.append(lines.get())
    output = "".join(seen)
    assert code == 0, output
    assert "killed replica-2 (SIGKILL)" in output
    assert "Traceback" not in output
    _assert_converged(sql, decided)
    logs = tmp_path / "logs"
    assert {p.name for p in logs.iterdir()} >= {"replica-1.log", "replica-2.log", "replica-3.log"}


def _wait_for_console(demo: subprocess.Popen[str], lines: queue.Queue[str], seen: list[str]) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            assert demo.poll() is None, "".join(seen)
            continue
        seen.append(line)
        if line.startswith("console: "):
            return line.removeprefix("console: ").strip()
    raise AssertionError("the console never came up:\n" + "".join(seen))


def _decide_in_the_console(url: str) -> str:
    """What the printed link gives an operator: the console, signed in, the queue, a case."""
    assert _PLAYWRIGHT is not None
    with _PLAYWRIGHT.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(url)
            page.locator("#list tbody tr").first.wait_for(timeout=30_000)
            assert page.locator("#who").text_content().startswith("Signed in as ")
            assert page.evaluate("window.location.hash") == ""  # the token left the address bar
            ids = page.locator("#list tbody tr td a.mono").all_text_contents()
            target = next(i for i in ids if story_of(i) is Story.SHELL)
            page.locator(f"#list a:text-is('{target}')").click()
            page.locator("#decide-form").wait_for()
            page.locator("#one-confirm_failed").check()
            page.fill("#one-reason", "operator_checked_host")
            page.locator("#verified").check()
            page.locator("#decide-submit").click()
            answer = page.locator("#answers li").first
            answer.wait_for()
            assert answer.text_content() == f"200 committed: {target} is now failed."
        finally:
            browser.close()
    return target


def _forged_token_is_refused(port: int, token: str) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as api:
        forged = api.get("/v1/manual-queue", headers={"Authorization": f"Bearer {token}x"})
        assert forged.status_code == 401


def _decide_one_manual_item(port: int, token: str) -> str:
    """The operator's first decision, through the same API the console page calls."""
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as api:
        assert api.get("/console").status_code == 200
        page = api.get("/v1/manual-queue", headers=auth)
        assert page.status_code == 200, page.text
        item = next(i for i in page.json()["items"] if story_of(i["dispatch_id"]) is Story.SHELL)
        answer = api.post(
            f"/v1/dispatches/{item['dispatch_id']}/resolution",
            headers=auth,
            json={
                "decision": "confirm_failed",
                "mutation_id": "demo-op-1",
                "expected_execution_version": item["execution_version"],
                "reason_code": "operator_checked_host",
            },
        )
        assert answer.status_code == 200, answer.text
    return str(item["dispatch_id"])


def _assert_converged(sql: SQL, decided: str) -> None:
    rows = sql.all(
        "SELECT d.dispatch_id, e.state, c.status, c.closed_by, r.source, r.outcome,"
        "       a.receipt->>'outcome' AS receipt_outcome"
        "  FROM approved_action_dispatches d"
        "  JOIN approved_action_executions e USING (dispatch_id)"
        "  JOIN approved_action_recovery_controls c USING (dispatch_id)"
        "  LEFT JOIN approved_action_recovery_resolutions r USING (dispatch_id)"
        "  LEFT JOIN action_receipts a USING (dispatch_id)"
    )
    stories = Counter(story_of(r["dispatch_id"]) for r in rows)
    assert all(stories[s] > 0 for s in Story), stories
    for r in rows:
        story, state = story_of(r["dispatch_id"]), r["state"]
        if story is Story.COMPLETES:
            assert (state, r["closed_by"], r["source"]) == (
                r["receipt_outcome"],
                "completion",
                None,
            )
        elif story is Story.CRASH_RECEIPT:
            assert (state, r["closed_by"], r["source"]) == (
                r["receipt_outcome"],
                "automatic",
                "automatic",
            ), r
        elif story is Story.COMPLETES_LATE:
            # Exactly one winner: the completion closed it, or a resolution did and the late
            # completion only replayed it; either way the state is what the receipt proves.
            assert state == r["receipt_outcome"], r
            assert (r["closed_by"], r["source"]) in {
                ("completion", None),
                ("automatic", "automatic"),
            }, r
        elif story is Story.CRASH_BARE:
            assert (state, r["status"], r["source"]) == ("executing", "armed", None), r
        elif r["dispatch_id"] == decided:
            assert (state, r["closed_by"], r["source"], r["outcome"]) == (
                "failed",
                "manual",
                "manual",
                "failed",
            )
        else:
            assert (state, r["status"], r["source"]) == ("executing", "manual", None), r
