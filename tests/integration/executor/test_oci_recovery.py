"""An image pushed to an OCI registry as evidence, end to end: a real executor (the Python SDK)
SIGKILLed at each point of its push to a real registry (Debian's docker-registry, token
authentication), settled by a real `resolver run --once` through `oci_artifact` with a login the
registry lets only pull; a tampered or mis-bound manifest goes to a person with its reason; a
push that never landed stays missing, then escalates; the registry's log shows the resolver only
ever read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from resolver.evidence.receipts import KeyRing
from resolver.executor import oci_annotations
from tests.helpers.crashes import (
    MISSING_WINDOW,
    crash,
    identity_of,
    lease_expired,
    missing_then_escalated,
    run_once,
    wait_until,
)
from tests.helpers.crashes import dispatch as new_dispatch
from tests.helpers.database import SQL
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


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    with running_registry() as running:
        yield running


def dispatch(store: Storage) -> str:
    return new_dispatch(store, ACTION, "or")


def resolver_run_once(registry: Registry, database_url: str, tmp_path: Path, **more: Any) -> None:
    settings = {"provider": "oci_artifact", "repository": REPOSITORY, **registry.settings(**more)}
    env = RECEIPT_ENV | {"REGISTRY_READER_PASSWORD": "reader-pw"}
    run_once(database_url, tmp_path, ACTION, settings, env)


def crash_executor(registry: Registry, database_url: str, dispatch_id: str, point: str) -> None:
    where = json.dumps({"url": registry.url, "realm": registry.realm})
    crash(CRASHER, RECEIPT_ENV, database_url, dispatch_id, point, where)


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
    run = partial(resolver_run_once, registry, database_url, tmp_path, **MISSING_WINDOW)
    missing_then_escalated(
        sql, dispatch_id, run, "no_tag", "the missing image to outlast its window"
    )
