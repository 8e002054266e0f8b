"""The crash matrix's rig: the example agent's processes, a real `resolver run` replica, the
person who decides what evidence cannot, and the downstream's own account of what it saw."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import psycopg

from resolver.core.domain import Decision, ManualDecision, Principal
from resolver.human.manual import ManualResolutionService
from tests.helpers.database import SQL
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "langgraph"))
import orders  # noqa: E402

# The agent's processes fork from a server that imported LangGraph and the agent once (about
# 2.5 s of start-up a process, three processes a case). Each is still a process of its own:
# killed with SIGKILL at its crash step, and the next one continues from the checkpoint in
# PostgreSQL with nothing of the one before.
_AGENTS = multiprocessing.get_context("forkserver")
_AGENTS.set_forkserver_preload(["tests.langgraph.crash_agent"])
AGENT_SECONDS = 180.0

KEY_ENV = {"RESOLVER_RECEIPT_KEYS": f"lg-k1={'3c' * 32}", "RESOLVER_RECEIPT_SIGNING_KID": "lg-k1"}
WAIT_SECONDS = 90.0
PROVIDERS = "action_types:\n" + "".join(
    f"  {t}: {{provider: internal_mutation}}\n"
    for t in ("erp.order.create", "erp.order.cancel", "erp.stock.adjust", "erp.order.status")
)

# The seven crash windows, each the step of the agent's process it is killed at.
WINDOWS = {
    "after_approval_before_dispatch": "approved",
    "after_dispatch_before_barrier": "leased",
    "after_barrier_before_effect": "barrier_crossed",
    "after_effect_before_receipt": "effect_applied",
    "after_receipt_before_completion": "receipt_committed",
    "after_completion_before_checkpoint": "completed",
    "after_checkpoint_before_reply": "replying",
}
# Crashed before its receipt committed: nothing happened, no evidence can ever show up, and
# recovery waits for a person (internal mutations never escalate by themselves).
NOTHING_HAPPENED = {"barrier_crossed", "effect_applied"}

INITIAL = {"stock": {"gadget": 5, "widget": 7}, "orders": {"ord-7": "open"}}
APPLIED: dict[str, dict[str, Any]] = {
    "create_order": {
        "stock": {"gadget": 5, "widget": 5},
        "orders": {"ord-7": "open", "ord-9": "open"},
    },
    "cancel_order": {"stock": {"gadget": 5, "widget": 10}, "orders": {"ord-7": "cancelled"}},
    "adjust_stock": {"stock": {"gadget": 9, "widget": 7}, "orders": {"ord-7": "open"}},
    "set_status": {"stock": {"gadget": 5, "widget": 7}, "orders": {"ord-7": "shipped"}},
}


def prepare_downstream(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        orders.install(conn)
        orders.seed(conn)
        conn.execute("UPDATE erp.products SET stock = 7 WHERE sku = 'widget'")
        conn.execute("INSERT INTO erp.orders VALUES ('ord-7', 'zeta', 'widget', 3, 'open')")
        conn.execute(
            "INSERT INTO recovery_projects VALUES ('order-desk', 1) ON CONFLICT DO NOTHING"
        )
        conn.execute(
            "INSERT INTO recovery_role_bindings VALUES ('order-desk', 'alice',"
            " 'approval.recover', 1) ON CONFLICT DO NOTHING"
        )


def downstream(sql: SQL) -> dict[str, Any]:
    """What the order service holds now."""
    return {
        "stock": {r["sku"]: r["stock"] for r in sql.all("SELECT sku, stock FROM erp.products")},
        "orders": {
            r["order_id"]: r["status"] for r in sql.all("SELECT order_id, status FROM erp.orders")
        },
    }


def requests_seen(sql: SQL) -> dict[str, int]:
    """How often each idempotency key reached the order service and committed."""
    rows = sql.all("SELECT idempotency_key, count(*) AS n FROM erp.requests GROUP BY 1")
    return {r["idempotency_key"]: r["n"] for r in rows}


def agent(
    database_url: str, thread: str, tool: str, phase: str, argument: dict[str, Any]
) -> tuple[int, dict[str, Any] | None]:
    """One phase of the agent in a process of its own: its exit status (-SIGKILL where it was
    killed at its crash step) and what it answered."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")} | KEY_ENV
    args = (database_url, thread, tool, phase, json.dumps(argument))
    answers, answer = _AGENTS.Pipe(duplex=False)
    process = _AGENTS.Process(target=_agent_phase, args=(env, args, answer))
    process.start()
    answer.close()
    try:
        said = answers.recv() if answers.poll(AGENT_SECONDS) else None
    except EOFError:  # it died before it answered (the crash step's SIGKILL)
        said = None
    process.join(AGENT_SECONDS)
    if process.exitcode is None:
        process.kill()
        process.join()
        raise AssertionError(f"the agent's {phase} did not end within {AGENT_SECONDS} s")
    if process.exitcode == -signal.SIGKILL:
        return process.exitcode, None
    assert process.exitcode == 0 and said is not None and said[0] == "ok", said
    return 0, json.loads(said[1])


def _agent_phase(env: dict[str, str], args: tuple[str, ...], answer: Connection) -> None:
    """In the forked process: the agent's environment, the phase, its answer."""
    os.environ.clear()
    os.environ.update(env)
    try:
        from tests.langgraph import crash_agent

        answer.send(("ok", json.dumps(crash_agent.run(*args))))
    except BaseException:
        answer.send(("error", traceback.format_exc()[-3000:]))
        raise SystemExit(1) from None


def db_now_ms(sql: SQL) -> int:
    return int(sql.one("SELECT resolver_now_ms(NULL) AS ms")["ms"])


def approval(sql: SQL, name: str, seconds: float = 300.0) -> dict[str, Any]:
    return {
        "approved": True,
        "approval_request_id": name,
        "expires_at_ms": db_now_ms(sql) + int(seconds * 1000),
    }


@contextmanager
def replica(database_url: str, tmp_path: Path) -> Iterator[None]:
    """A real `resolver run` replica for the whole case, fast cadence, short backoff."""
    config = tmp_path / "providers.yaml"
    config.write_text(PROVIDERS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")} | KEY_ENV
    env |= {
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_CONFIG": str(config),
        "RESOLVER_CADENCE_SECONDS": "0.1",
        "RESOLVER_BACKOFF_BASE_SECONDS": "0.2",
        "RESOLVER_BACKOFF_MAX_SECONDS": "0.5",
    }
    log = tmp_path / "replica.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "resolver", "run"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        # Up before the case goes on: a SIGTERM before the replica handles it would end it
        # with that signal, not with its clean stop.
        wait_until(
            lambda: process.poll() is not None or b"resolver_started" in log.read_bytes(),
            "the replica to start",
        )
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        assert process.returncode == 0, log.read_text(errors="replace")[-2000:]


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def inspected_missing(sql: SQL, dispatch_id: str) -> bool:
    rows = sql.all(
        "SELECT last_finding FROM approved_action_recovery_controls WHERE dispatch_id = %s",
        dispatch_id,
    )
    return bool(rows) and rows[0]["last_finding"] == "missing"


def decide(store: Storage, sql: SQL, dispatch_id: str, decision: Decision) -> None:
    """A person decides, through the real manual commit (signed facts, fences), once the
    replica has looked and found no receipt."""
    wait_until(lambda: inspected_missing(sql, dispatch_id), "the replica to find no receipt")
    now = db_now_ms(sql)
    alice = Principal(
        "alice",
        auth_time_ms=now - 1000,
        amr=("pwd", "mfa"),
        issuer=TEST_ISSUER,
        token_kid="test-kid",
    )
    version = int(sql.execution(dispatch_id)["version"])
    ManualResolutionService(store, signer=TEST_SIGNER).decide(
        alice,
        ManualDecision(dispatch_id, decision, f"op-{dispatch_id}", version, "no_receipt_found"),
    )
