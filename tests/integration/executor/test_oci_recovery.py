"""An image pushed to an OCI registry as evidence, end to end: a real executor (the Python SDK)
SIGKILLed at each point of its push to a real registry (Debian's docker-registry, token
authentication), settled by a real `resolver run --once` through `oci_artifact` with a login the
registry lets only pull; a tampered or mis-bound manifest goes to a person with its reason; a
push that never landed stays missing, then escalates; the registry's log shows the resolver only
ever read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from resolver.core.domain import DispatchIdentity
from resolver.evidence.receipts import KeyRing
from resolver.executor import oci_annotations
from resolver.executor.client import ExecutionClient
from tests.helpers.database import SQL, new_spec
from tests.helpers.registry import Registry, available, image, layer_digests, running_registry
from tests.helpers.stores import Storage

pytestmark = pytest.mark.skipif(not available(), reason="Debian's docker-registry is needed")

KEYS = KeyRing({"oci-e2e": bytes.fromhex("5e" * 32)}, signing_kid="oci-e2e")
RECEIPT_ENV = {
    "RESOLVER_RECEIPT_KEYS": f"oci-e2e={'5e' * 32}",
    "RESOLVER_RECEIPT_SIGNING_KID": "oci-e2e",
}
ACTION = "image.push"
REPOSITORY = "platform/images"
CRASHER = Path(__file__).with_name("oci_crash_executor.py")
CONFIG = json.dumps({"architecture": "amd64", "os": "linux"}).encode()
WAIT_SECONDS = 30.0


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    with running_registry() as running:
        yield running


def dispatch(store: Storage) -> str:
    spec = new_spec(ACTION, dispatch_id=f"or-{uuid.uuid4().hex[:12]}")
    ExecutionClient(store, owner="platform").create_dispatch(spec)
    return spec.dispatch_id


def identity_of(sql: SQL, dispatch_id: str) -> DispatchIdentity:
    row = sql.one(
        "SELECT d.schema_version, d.dispatch_id, d.approval_request_id, d.project_id,"
        " d.action_type, d.action_digest, e.attempt, e.started_at_ms, d.idempotency_key"
        " FROM approved_action_dispatches d JOIN approved_action_executions e USING (dispatch_id)"
        " WHERE d.dispatch_id = %s",
        dispatch_id,
    )
    return DispatchIdentity(**row)


def wait_until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def lease_expired(sql: SQL, dispatch_id: str) -> bool:
    row = sql.one(
        "SELECT lease_expires_at_ms <= resolver_now_ms(NULL) AS expired"
        " FROM approved_action_executions WHERE dispatch_id = %s",
        dispatch_id,
    )
    return bool(row["expired"])


def resolver_run_once(registry: Registry, database_url: str, tmp_path: Path, **more: Any) -> None:
    settings = {"provider": "oci_artifact", "repository": REPOSITORY, **registry.settings(**more)}
    config = tmp_path / "providers.yaml"
    config.write_text(yaml.safe_dump({"action_types": {ACTION: settings}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    env |= RECEIPT_ENV | {
        "REGISTRY_READER_PASSWORD": "reader-pw",
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_CONFIG": str(config),
        "RESOLVER_BACKOFF_BASE_SECONDS": "0.2",
        "RESOLVER_BACKOFF_MAX_SECONDS": "0.4",
    }
    done = subprocess.run(
        [sys.executable, "-m", "resolver", "run", "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def crash_executor(registry: Registry, database_url: str, dispatch_id: str, point: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")} | RECEIPT_ENV
    where = json.dumps({"url": registry.url, "realm": registry.realm})
    done = subprocess.run(
        [sys.executable, str(CRASHER), database_url, dispatch_id, point, where],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def recovered(
    registry: Registry, database_url: str, sql: SQL, tmp_path: Path, dispatch_id: str, **more: Any
) -> None:
    wait_until(lambda: lease_expired(sql, dispatch_id), "the crashed executor's lease to end")
    resolver_run_once(registry, database_url, tmp_path, **more)


CRASH_POINTS = {
    # point: (execution state after recovery, the control's last finding, resolved by)
    "before_push": ("executing", "missing", []),
    "blobs_pushed": ("executing", "missing", []),
    "after_push": ("succeeded", None, ["automatic"]),
    "after_complete": ("succeeded", None, []),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_crash_at_every_point_of_the_push_settles_from_the_registry(
    registry: Registry, store: Storage, database_url: str, sql: SQL, tmp_path: Path, point: str
) -> None:
    state, finding, sources = CRASH_POINTS[point]
    dispatch_id = dispatch(store)
    crash_executor(registry, database_url, dispatch_id, point)
    seen = len(registry.methods())
    if point != "after_complete":
        assert sql.execution(dispatch_id)["state"] == "executing"
        recovered(registry, database_url, sql, tmp_path, dispatch_id)
    execution = sql.execution(dispatch_id)
    assert execution["state"] == state
    assert [r["source"] for r in sql.resolutions(dispatch_id)] == sources
    if state != "succeeded":
        assert sql.control(dispatch_id)["last_finding"] == finding
    elif sources:
        assert execution["result_code"] == "pushed"
    # The resolver only read: every request it made of the registry was a GET.
    assert {method for method, _ in registry.methods()[seen:]} <= {"GET"}


@pytest.mark.parametrize(
    ("tamper", "reason"), [("altered", "bad_signature"), ("other", "identity_mismatch")]
)
def test_a_tampered_or_mis_bound_image_goes_to_a_person_with_its_reason(
    registry: Registry,
    store: Storage,
    database_url: str,
    sql: SQL,
    tmp_path: Path,
    tamper: str,
    reason: str,
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(registry, database_url, dispatch_id, "before_push")
    identity = identity_of(sql, dispatch_id)
    approved = b"the approved image"
    config_digest, layer_digest = layer_digests(CONFIG, approved)
    if tamper == "altered":
        # This dispatch's genuine annotation, on other layers than the ones it was signed for.
        annotations = oci_annotations(
            identity, KEYS, config_digest=config_digest, layer_digests=[layer_digest]
        )
        layer = b"something else"
    else:
        other = dispatch(store)
        crash_executor(registry, database_url, other, "before_push")
        annotations = oci_annotations(
            identity_of(sql, other), KEYS, config_digest=config_digest, layer_digests=[layer_digest]
        )
        layer = approved
    status, _ = registry.push_manifest(
        REPOSITORY, identity.idempotency_key, image(registry, REPOSITORY, annotations, layer)
    )
    assert status == 201
    recovered(registry, database_url, sql, tmp_path, dispatch_id)
    control = sql.control(dispatch_id)
    assert (control["status"], control["last_finding"], control["last_reason"]) == (
        "manual",
        "conflict",
        reason,
    )


def test_a_push_that_never_landed_is_missing_then_escalates(
    registry: Registry, store: Storage, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(registry, database_url, dispatch_id, "blobs_pushed")
    window = {"escalate_after_seconds": {"missing": 1}}
    recovered(registry, database_url, sql, tmp_path, dispatch_id, **window)
    first = sql.control(dispatch_id)
    assert (first["status"], first["last_finding"], first["last_reason"]) == (
        "armed",
        "missing",
        "no_tag",
    )

    def escalated() -> bool:
        resolver_run_once(registry, database_url, tmp_path, **window)
        return bool(sql.control(dispatch_id)["status"] == "manual")

    wait_until(escalated, "the missing image to outlast its window")
    assert sql.control(dispatch_id)["manual_reason"] == "evidence_window_elapsed"
