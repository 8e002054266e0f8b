"""A crashed executor settled by a real `resolver run --once`, for the providers' end-to-end
tests: the dispatch, the executor process that SIGKILLs itself at a crash point, the wait for
its lease to lapse on the database clock, and one pass of the resolver with one action type's
provider configuration."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from resolver.core.domain import DispatchIdentity
from resolver.executor.client import ExecutionClient
from tests.helpers.database import SQL, new_spec
from tests.helpers.stores import Storage

WAIT_SECONDS = 30.0
PROCESS_SECONDS = 120


def dispatch(store: Storage, action_type: str, prefix: str) -> str:
    """A new dispatch of `action_type`, recorded as the platform records it."""
    spec = new_spec(action_type, dispatch_id=f"{prefix}-{uuid.uuid4().hex[:12]}")
    ExecutionClient(store, owner="platform").create_dispatch(spec)
    return spec.dispatch_id


def identity_of(sql: SQL, dispatch_id: str) -> DispatchIdentity:
    """The identity recovery inspects: the dispatch with its execution's attempt and start."""
    row = sql.one(
        "SELECT d.schema_version, d.dispatch_id, d.approval_request_id, d.project_id,"
        " d.action_type, d.action_digest, e.attempt, e.started_at_ms, d.idempotency_key"
        " FROM approved_action_dispatches d JOIN approved_action_executions e USING (dispatch_id)"
        " WHERE d.dispatch_id = %s",
        dispatch_id,
    )
    return DispatchIdentity(**row)


def wait_until(condition: Callable[[], object], what: str, seconds: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)  # the poll interval: the condition decides


def lease_expired(sql: SQL, dispatch_id: str, by_ms: int = 0) -> bool:
    """The execution's lease ran out on the database clock, at least `by_ms` ago."""
    row = sql.one(
        "SELECT lease_expires_at_ms + %s <= resolver_now_ms(NULL) AS expired"
        " FROM approved_action_executions WHERE dispatch_id = %s",
        by_ms,
        dispatch_id,
    )
    return bool(row["expired"])


def environment(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without the resolver's settings, and `extra`."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")} | dict(extra)


def crash(crasher: Path, env: Mapping[str, str], *args: str) -> None:
    """Run an executor script that must end SIGKILLed by its own hand."""
    done = subprocess.run(
        [sys.executable, str(crasher), *args],
        env=environment(env),
        capture_output=True,
        text=True,
        timeout=PROCESS_SECONDS,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def run_once(
    database_url: str,
    tmp_path: Path,
    action_type: str,
    settings: Mapping[str, Any],
    env: Mapping[str, str],
) -> None:
    """One `resolver run --once` with `settings` as the action type's provider."""
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump({"action_types": {action_type: dict(settings)}}))
    full = environment(env) | {
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_CONFIG": str(config),
        "RESOLVER_BACKOFF_BASE_SECONDS": "0.2",
        "RESOLVER_BACKOFF_MAX_SECONDS": "0.4",
    }
    done = subprocess.run(
        [sys.executable, "-m", "resolver", "run", "--once"],
        env=full,
        capture_output=True,
        text=True,
        timeout=PROCESS_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr


# A window that ends at once: a missing finding reaches a person on a later pass.
MISSING_WINDOW: dict[str, Any] = {"escalate_after_seconds": {"missing": 1}}


def missing_then_escalated(
    sql: SQL, dispatch_id: str, run: Callable[[], None], reason: str, what: str
) -> dict[str, Any]:
    """Once the crashed executor's lease lapsed, `run` (a resolver pass with MISSING_WINDOW)
    finds nothing the first time: the control stays armed, missing with `reason`. Passes go on
    until the window has run out and the case reached a person; returns its control."""
    wait_until(lambda: lease_expired(sql, dispatch_id), "the crashed executor's lease to end")
    run()
    first = sql.control(dispatch_id)
    assert (first["status"], first["last_finding"], first["last_reason"]) == (
        "armed",
        "missing",
        reason,
    )

    def escalated() -> bool:
        run()
        return bool(sql.control(dispatch_id)["status"] == "manual")

    wait_until(escalated, what)
    control = sql.control(dispatch_id)
    assert control["manual_reason"] == "evidence_window_elapsed"
    return dict(control)
