"""Receipt publication to object storage by the Python SDK, against real PostgreSQL and a
real S3-compatible server (moto's, signatures and policies on, tests/helpers/s3.py).

The rule under test: a PUT leaves only while the lease surely outlasts it, never after, so
whatever point the executor dies at, what recovery reads is frozen once it may read. Each
crash point is a real SIGKILL, settled by a real `resolver run --once` through
`object_receipt`.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from resolver.core.domain import Outcome
from resolver.core.errors import FenceConflict, LeaseLost
from resolver.evidence.object_store import ObjectStoreSettings
from resolver.evidence.receipts import KeyRing
from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.executor.object_receipts import (
    PublicationFailed,
    PublicationUnknown,
    ReceiptAlreadyPublished,
    ReceiptPublisher,
)
from resolver.executor.side_effects import SideEffect, SideEffectRunner
from tests.helpers.crashes import lease_expired, wait_until
from tests.helpers.database import SQL, new_spec
from tests.helpers.s3 import BUCKET, S3Server, running_s3_server, session_of
from tests.helpers.stores import Storage

KEYS = KeyRing({"obj-k1": bytes.fromhex("5a" * 32)}, signing_kid="obj-k1")
RECEIPT_ENV = {
    "RESOLVER_RECEIPT_KEYS": f"obj-k1={'5a' * 32}",
    "RESOLVER_RECEIPT_SIGNING_KID": "obj-k1",
}
ACTION = "artifact.push"
CRASHER = Path(__file__).with_name("object_crash_executor.py")
WAIT_SECONDS = 30.0
LEASE_SECONDS = 6.0


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running_s3_server() as server:
        yield server


@pytest.fixture(autouse=True)
def _clean_faults(s3: S3Server) -> Iterator[None]:
    yield
    s3.recorder.slow_down = 0
    s3.recorder.hold = frozenset()
    s3.recorder.release.set()
    s3.recorder.delay = frozenset()
    s3.recorder.forward.set()


def publisher(s3: S3Server, **settings: object) -> ReceiptPublisher:
    merged = {**s3.settings(), "timeout_seconds": 1, **settings}
    return ReceiptPublisher(ObjectStoreSettings(**merged), session=session_of(s3.writer))


def dispatch(store: Storage) -> str:
    spec = new_spec(ACTION, dispatch_id=f"o-{uuid.uuid4().hex[:12]}")
    ExecutionClient(store, owner="platform").create_dispatch(spec)
    return spec.dispatch_id


# Each test's runners, closed (with their pools of mutation connections) when it ends.
_runners: list[SideEffectRunner] = []


@pytest.fixture(autouse=True)
def _close_runners() -> Iterator[None]:
    yield
    while _runners:
        _runners.pop().close()


def runner(store: Storage, url: str, lease_seconds: float = LEASE_SECONDS) -> SideEffectRunner:
    made = SideEffectRunner(
        store, database_url=url, owner="pusher", keys=KEYS, lease_seconds=lease_seconds
    )
    _runners.append(made)
    return made


def stored(s3: S3Server, dispatch_id: str) -> bytes | None:
    admin = s3.client(s3.admin)
    key = f"receipts/proj-1/{dispatch_id}.receipt.json"
    try:
        return bytes(admin.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    except admin.exceptions.NoSuchKey:
        return None


def resolver_run_once(
    s3: S3Server,
    database_url: str,
    tmp_path: Path,
    provider: dict[str, object] | None = None,
    settings: dict[str, str] | None = None,
) -> None:
    config = tmp_path / "providers.yaml"
    action = {"provider": "object_receipt", **s3.settings(), **(provider or {})}
    config.write_text(yaml.safe_dump({"action_types": {ACTION: action}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESOLVER_", "AWS_"))}
    env |= RECEIPT_ENV | s3.reader.env()
    env |= {"RESOLVER_DATABASE_URL": database_url, "RESOLVER_CONFIG": str(config)}
    env |= settings or {}
    done = subprocess.run(
        [sys.executable, "-m", "resolver", "run", "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def crash_executor(s3: S3Server, database_url: str, dispatch_id: str, point: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESOLVER_", "AWS_"))}
    env |= RECEIPT_ENV | s3.writer.env() | {"LEASE_SECONDS": str(LEASE_SECONDS)}
    settings = json.dumps({**s3.settings(), "timeout_seconds": 1})
    process = subprocess.Popen(
        [sys.executable, str(CRASHER), database_url, dispatch_id, point, settings],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if point == "put_in_flight":
        # The PUT reached the store and landed; the executor dies waiting for the reply.
        assert s3.recorder.held.wait(WAIT_SECONDS), "the PUT never reached the store"
        process.send_signal(signal.SIGKILL)
    _, err = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, err


# -- every crash point of the publication ------------------------------------------------------

CRASH_POINTS = {
    # point: (object published?, execution state after recovery, last finding)
    "before_publish": (False, "executing", "missing"),
    "put_in_flight": (True, "succeeded", None),
    "after_publish": (True, "succeeded", None),
    "after_complete": (True, "succeeded", None),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_crash_at_every_point_of_the_publication_settles_from_the_store(
    s3: S3Server, store: Storage, database_url: str, sql: SQL, tmp_path: Path, point: str
) -> None:
    published, state, finding = CRASH_POINTS[point]
    dispatch_id = dispatch(store)
    if point == "put_in_flight":
        s3.recorder.release.clear()
        s3.recorder.held.clear()
        s3.recorder.hold = frozenset({"PUT"})
    crash_executor(s3, database_url, dispatch_id, point)
    s3.recorder.hold = frozenset()
    s3.recorder.release.set()
    body = stored(s3, dispatch_id)
    assert (body is not None) is published
    if point != "after_complete":
        assert sql.execution(dispatch_id)["state"] == "executing"
        wait_until(lambda: lease_expired(sql, dispatch_id), "the crashed executor's lease to end")
        resolver_run_once(s3, database_url, tmp_path)
    execution = sql.execution(dispatch_id)
    assert execution["state"] == state
    if published:
        assert body is not None
        assert execution["evidence_digest"] == hashlib.sha256(body).hexdigest()
        sources = [r["source"] for r in sql.resolutions(dispatch_id)]
        assert sources == ([] if point == "after_complete" else ["automatic"])
    else:
        assert sql.control(dispatch_id)["last_finding"] == finding
        assert sql.resolutions(dispatch_id) == []
    # Frozen: nothing of the dead executor can still arrive.
    assert stored(s3, dispatch_id) == body


def test_a_put_the_store_applies_after_the_lease_ended_is_no_evidence(
    s3: S3Server, store: Storage, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    """A proxy holds the executor's PUTs past the lease; the client gives up and nothing it
    could still send leaves. The store applies one long after: recovery's verdict stands on
    what the store held when the lease ended, never on the late object."""
    dispatch_id = dispatch(store)
    s3.recorder.forward.clear()
    s3.recorder.delay = frozenset({"PUT"})
    with (
        pytest.raises((PublicationUnknown, LeaseLost)),
        runner(store, database_url).run(dispatch_id) as effect,
    ):
        effect.publish_receipt(publisher(s3), Outcome.SUCCEEDED, "pushed", receipt_id="late")
    assert s3.recorder.delayed >= 1 and stored(s3, dispatch_id) is None
    wait_until(lambda: lease_expired(sql, dispatch_id), "the executor's lease to end")
    # No clock allowance: the store and the database share this host's clock.
    strict = {"max_clock_skew_seconds": 0}
    quick = {"RESOLVER_BACKOFF_BASE_SECONDS": "0.2", "RESOLVER_BACKOFF_MAX_SECONDS": "0.5"}
    resolver_run_once(s3, database_url, tmp_path, strict, quick)
    assert sql.control(dispatch_id)["last_finding"] == "missing"
    # The store applies what the proxy held, in a later second than the lease's end (it
    # records whole seconds): one PUT lands, the rest are refused (412).
    wait_until(lambda: lease_expired(sql, dispatch_id, by_ms=1000), "a second past the lease")
    s3.recorder.forward.set()
    wait_until(lambda: s3.recorder.delayed == 0, "the held PUTs to reach the store")
    s3.recorder.delay = frozenset()
    assert stored(s3, dispatch_id) is not None
    wait_until(lambda: due(sql, dispatch_id), "the next look at the dispatch")
    resolver_run_once(s3, database_url, tmp_path, strict, quick)
    control = sql.control(dispatch_id)
    assert (control["last_finding"], control["last_reason"]) == ("conflict", "published_late")
    assert sql.execution(dispatch_id)["state"] == "executing"
    assert sql.resolutions(dispatch_id) == []


def due(sql: SQL, dispatch_id: str) -> bool:
    row = sql.one(
        "SELECT next_scan_at_ms <= resolver_now_ms(NULL) AS due"
        " FROM approved_action_recovery_controls WHERE dispatch_id = %s",
        dispatch_id,
    )
    return bool(row["due"])


# -- the fence ---------------------------------------------------------------------------------


def test_a_lost_lease_publishes_nothing(s3: S3Server, store: Storage, database_url: str) -> None:
    dispatch_id = dispatch(store)
    puts = s3.recorder.count("PUT")

    def taken_over(effect: SideEffect) -> None:
        # Another owner's renewal would fail the same way: the lease version moved on.
        store.renew_execution(effect.lease, 60_000)
        effect.publish_receipt(publisher(s3), Outcome.SUCCEEDED, "pushed", receipt_id="a")

    with pytest.raises(FenceConflict):
        runner(store, database_url).run_once(dispatch_id, taken_over)
    assert s3.recorder.count("PUT") == puts
    assert stored(s3, dispatch_id) is None


def test_no_put_leaves_when_the_lease_could_run_out_during_it(
    s3: S3Server, store: Storage, database_url: str
) -> None:
    dispatch_id = dispatch(store)
    puts = s3.recorder.count("PUT")
    # A 2.5 s lease cannot cover a request that may take 2 s (1 s to connect, 1 s to answer)
    # plus its margin (a quarter of the lease), however fresh it is.
    short = runner(store, database_url, lease_seconds=2.5)
    with (
        pytest.raises(LeaseLost, match="too little of the lease"),
        short.run(dispatch_id) as effect,
    ):
        effect.publish_receipt(publisher(s3), Outcome.SUCCEEDED, "pushed", receipt_id="a")
    assert s3.recorder.count("PUT") == puts


def test_the_deadline_holds_across_retries(s3: S3Server) -> None:
    # The store throttles every PUT: retries go on only while the lease covers one more.
    s3.recorder.slow_down = 1000
    puts = s3.recorder.count("PUT")
    left = iter([10.0, 10.0, 10.0, 2.0])
    with pytest.raises(LeaseLost, match="nothing was published"):
        publisher(s3).publish(
            "receipts/proj-1/never.receipt.json",
            b"{}",
            lease_left=lambda: next(left),
            lease_seconds=4.0,
        )
    assert s3.recorder.count("PUT") == puts + 3
    s3.recorder.slow_down = 0
    assert stored(s3, "never") is None


# -- the store's answers -----------------------------------------------------------------------


def test_publish_then_complete_with_the_receipts_digest(
    s3: S3Server, store: Storage, database_url: str, sql: SQL
) -> None:
    dispatch_id = dispatch(store)
    with runner(store, database_url).run(dispatch_id) as effect:
        published = effect.publish_receipt(
            publisher(s3), Outcome.FAILED, "rejected", receipt_id="r"
        )
    assert effect.result is not None
    assert effect.result.completion is CompletionResult.COMMITTED
    execution = sql.execution(dispatch_id)
    assert (execution["state"], execution["evidence_digest"]) == (
        "failed",
        published.evidence_digest,
    )
    body = stored(s3, dispatch_id)
    assert body is not None and json.loads(body)["outcome"] == "failed"


def test_a_second_publication_is_refused_and_typed(
    s3: S3Server, store: Storage, database_url: str
) -> None:
    dispatch_id = dispatch(store)
    with runner(store, database_url).run(dispatch_id) as effect:
        effect.publish_receipt(publisher(s3), Outcome.SUCCEEDED, "pushed", receipt_id="r")
    first = stored(s3, dispatch_id)
    key = f"receipts/proj-1/{dispatch_id}.receipt.json"
    with pytest.raises(ReceiptAlreadyPublished):
        publisher(s3).publish(key, b'{"other":1}', lease_left=lambda: 60.0, lease_seconds=30.0)
    assert stored(s3, dispatch_id) == first


def test_throttling_is_retried_within_the_lease(
    s3: S3Server, store: Storage, database_url: str, sql: SQL
) -> None:
    dispatch_id = dispatch(store)
    s3.recorder.slow_down = 2
    with runner(store, database_url, lease_seconds=10).run(dispatch_id) as effect:
        effect.publish_receipt(publisher(s3), Outcome.SUCCEEDED, "pushed", receipt_id="r")
    assert sql.execution(dispatch_id)["state"] == "succeeded"
    assert stored(s3, dispatch_id) is not None


def test_a_lost_reply_is_confirmed_by_the_stores_refusal_of_our_own_bytes(s3: S3Server) -> None:
    key = f"receipts/proj-1/lost-{uuid.uuid4().hex[:8]}.receipt.json"
    s3.recorder.release.clear()
    s3.recorder.held.clear()
    s3.recorder.hold = frozenset({"PUT"})

    def stop_holding() -> None:
        s3.recorder.held.wait(WAIT_SECONDS)
        s3.recorder.hold = frozenset()

    threading.Thread(target=stop_holding, daemon=True).start()
    # The first PUT lands, its reply times out; the retry is refused (412), the read-back
    # finds our own bytes: published, once.
    published = publisher(s3).publish(
        key, b'{"mine":1}', lease_left=lambda: 60.0, lease_seconds=30.0
    )
    s3.recorder.release.set()
    assert published.key == key
    admin = s3.client(s3.admin)
    assert admin.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b'{"mine":1}'


def test_a_lost_reply_with_no_time_left_is_unknown(s3: S3Server) -> None:
    key = f"receipts/proj-1/unknown-{uuid.uuid4().hex[:8]}.receipt.json"
    s3.recorder.release.clear()
    s3.recorder.hold = frozenset({"PUT"})
    left = iter([10.0, 0.5])
    with pytest.raises(PublicationUnknown):
        publisher(s3).publish(key, b"{}", lease_left=lambda: next(left), lease_seconds=4.0)


def test_credentials_that_may_not_write_are_a_typed_failure(s3: S3Server) -> None:
    reader = ReceiptPublisher(
        ObjectStoreSettings(**{**s3.settings(), "timeout_seconds": 1}),
        session=session_of(s3.reader),
    )
    with pytest.raises(PublicationFailed, match="403"):
        reader.publish(
            "receipts/proj-1/denied.receipt.json",
            b"{}",
            lease_left=lambda: 60.0,
            lease_seconds=30.0,
        )


def test_a_put_the_client_never_sent_is_a_failure_with_its_cause(
    s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No credentials anywhere: botocore refuses before anything leaves, so nothing can have
    landed: PublicationFailed from the client's own error, never 'unknown'."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "empty").write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "empty"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "empty"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    puts = s3.recorder.count("PUT")
    nobody = ReceiptPublisher(ObjectStoreSettings(**{**s3.settings(), "timeout_seconds": 1}))
    with pytest.raises(PublicationFailed, match="never sent") as refused:
        nobody.publish(
            "receipts/proj-1/nobody.receipt.json",
            b"{}",
            lease_left=lambda: 60.0,
            lease_seconds=30.0,
        )
    assert type(refused.value.__cause__).__name__ == "NoCredentialsError"
    assert s3.recorder.count("PUT") == puts
