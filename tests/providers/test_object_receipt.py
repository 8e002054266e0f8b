"""`object_receipt` against a real S3-compatible server (moto's server mode on loopback, with
signature checking and the docs' IAM policies on): every finding, the contract kit, an
overwritten object, throttling and the read-only guard."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import botocore.exceptions
import msgspec
import pytest

from providers.object_receipt import ObjectReceiptProvider, ObjectReceiptSettings, create
from resolver.core.domain import (
    DispatchIdentity,
    FindingKind,
    Outcome,
    ProviderFailure,
    canonical_json,
)
from resolver.core.provider import build_registry
from resolver.evidence.contract import NotApplicable, ProviderContract, Scenario
from resolver.evidence.object_store import make_client, receipt_key
from resolver.evidence.receipts import KeyRing, sign_receipt
from tests.helpers.harnesses import closed_port, new_identity, signed
from tests.helpers.s3 import (
    BUCKET,
    PREFIX,
    VERSIONED_BUCKET,
    Credentials,
    S3Server,
    running_s3_server,
    session_of,
)


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


def key_of(identity: DispatchIdentity) -> str:
    return receipt_key(PREFIX, identity.project_id, identity.dispatch_id)


def provider(s3: S3Server, who: Credentials | None = None, **extra: Any) -> ObjectReceiptProvider:
    settings = ObjectReceiptSettings(**{**s3.settings(), **extra})
    client = make_client(settings, max_pool=4, read_only=True, session=session_of(who or s3.reader))
    return ObjectReceiptProvider(client, settings, KEYS)


KEYS = KeyRing.ephemeral("object-test")


def publish(s3: S3Server, identity: DispatchIdentity, body: bytes, bucket: str = BUCKET) -> None:
    """What the SDK sends: one conditional PUT as the writer."""
    s3.client(s3.writer).put_object(Bucket=bucket, Key=key_of(identity), Body=body, IfNoneMatch="*")


def receipt(identity: DispatchIdentity, outcome: Outcome = Outcome.SUCCEEDED) -> bytes:
    return canonical_json(
        sign_receipt(
            identity,
            outcome=outcome,
            result_code="ok",
            finished_at_ms=identity.started_at_ms + 9,
            receipt_id=f"r-{identity.dispatch_id}",
            keys=KEYS,
        )
    )


class ObjectReceiptHarness:
    entry_point = "object_receipt"

    def __init__(self, s3: S3Server) -> None:
        self.s3 = s3

    def provider(self) -> ObjectReceiptProvider:
        return provider(self.s3)

    def unavailable_provider(self) -> ObjectReceiptProvider:
        return provider(self.s3, endpoint_url=f"http://127.0.0.1:{closed_port()}")

    def identity(self) -> DispatchIdentity:
        return new_identity(None)

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        if scenario is Scenario.STILL_RUNNING:
            raise NotApplicable("a receipt object is published once the outcome is known")
        publish(self.s3, identity, canonical_json(signed(identity, KEYS, scenario)))

    def snapshot(self) -> object:
        # Every object with its ETag, and how many requests but reads ever reached the store.
        admin = self.s3.client(self.s3.admin)
        listed = admin.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        writes = sum(1 for method, _ in self.s3.recorder.requests if method not in ("GET", "HEAD"))
        return sorted((o["Key"], o["ETag"]) for o in listed), writes


class TestObjectReceiptContract(ProviderContract):
    @pytest.fixture
    def provider_harness(self, s3: S3Server) -> ObjectReceiptHarness:
        return ObjectReceiptHarness(s3)


@pytest.mark.parametrize("outcome", list(Outcome))
def test_a_published_receipt_is_verified(s3: S3Server, outcome: Outcome) -> None:
    identity = new_identity(None)
    publish(s3, identity, receipt(identity, outcome))
    finding = provider(s3).inspect(identity)
    assert finding.kind is FindingKind(f"verified_{outcome.value}")
    assert finding.result_code == "ok"


def test_no_object_is_missing(s3: S3Server) -> None:
    assert provider(s3).inspect(new_identity(None)).kind is FindingKind.MISSING


def _conflicting_bodies(identity: DispatchIdentity) -> dict[str, bytes]:
    good = msgspec.json.decode(receipt(identity))
    other_attempt = msgspec.structs.replace(identity, attempt=identity.attempt + 1)
    foreign = KeyRing.ephemeral("foreign")
    unknown_kid = sign_receipt(
        identity,
        outcome=Outcome.SUCCEEDED,
        result_code="ok",
        finished_at_ms=identity.started_at_ms + 1,
        receipt_id="r",
        keys=foreign,
    )
    return {
        "another identity": receipt(other_attempt),
        "bad signature": canonical_json({**good, "result_code": "forged"}),
        "unknown key": canonical_json(unknown_kid),
        "over 4 KiB": b" " * 8193 + receipt(identity),
        "not exact shape": canonical_json({**good, "note": "x"}),
        "not json": b"\x00\x01not json",
        "pretty printed duplicate": receipt(identity)[:-1] + b',"v":1}',
    }


@pytest.mark.parametrize(
    "case", list(_conflicting_bodies(new_identity(None))), ids=lambda c: c.replace(" ", "_")
)
def test_untrustworthy_objects_are_conflict(s3: S3Server, case: str) -> None:
    identity = new_identity(None)
    publish(s3, identity, _conflicting_bodies(identity)[case])
    assert provider(s3).inspect(identity).kind is FindingKind.CONFLICT


def test_a_receipt_under_another_dispatchs_key_is_conflict(s3: S3Server) -> None:
    mine, theirs = new_identity(None), new_identity(None)
    publish(s3, mine, receipt(theirs))
    assert provider(s3).inspect(mine).kind is FindingKind.CONFLICT


def test_an_overwritten_object_is_conflict_in_a_versioned_bucket(s3: S3Server) -> None:
    identity = new_identity(None)
    body = receipt(identity)
    publish(s3, identity, body, VERSIONED_BUCKET)
    versioned = provider(s3, bucket=VERSIONED_BUCKET, versioned=True)
    assert versioned.inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
    # Someone with more rights than a publisher rewrites it, even with the same bytes.
    s3.client(s3.admin).put_object(Bucket=VERSIONED_BUCKET, Key=key_of(identity), Body=body)
    assert versioned.inspect(identity).kind is FindingKind.CONFLICT
    # Without the listing a GET sees only the newest version, which verifies.
    assert provider(s3, bucket=VERSIONED_BUCKET).inspect(identity).kind.is_verified


def test_a_deleted_receipt_is_conflict_in_a_versioned_bucket(s3: S3Server) -> None:
    identity = new_identity(None)
    publish(s3, identity, receipt(identity), VERSIONED_BUCKET)
    s3.client(s3.admin).delete_object(Bucket=VERSIONED_BUCKET, Key=key_of(identity))
    versioned = provider(s3, bucket=VERSIONED_BUCKET, versioned=True)
    assert versioned.inspect(identity).kind is FindingKind.CONFLICT
    assert versioned.inspect(new_identity(None)).kind is FindingKind.MISSING


def test_a_second_publication_is_refused_by_the_store(s3: S3Server) -> None:
    identity = new_identity(None)
    publish(s3, identity, receipt(identity))
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        publish(s3, identity, receipt(identity, Outcome.FAILED))
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert provider(s3).inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED


def test_throttling_is_an_outage_with_a_cause(s3: S3Server) -> None:
    identity = new_identity(None)
    publish(s3, identity, receipt(identity))
    s3.recorder.slow_down = 1
    finding = provider(s3).inspect(identity)
    assert (finding.kind, finding.failure, finding.cause) == (
        FindingKind.UNAVAILABLE,
        ProviderFailure.OUTAGE,
        "slow_down",
    )
    assert provider(s3).inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED


def test_a_store_that_does_not_answer_in_time_is_a_timeout(s3: S3Server) -> None:
    identity = new_identity(None)
    s3.recorder.release.clear()
    s3.recorder.hold = frozenset({"GET"})
    finding = provider(s3, timeout_seconds=0.5).inspect(identity)
    assert (finding.kind, finding.failure) == (FindingKind.UNAVAILABLE, ProviderFailure.TIMEOUT)


def test_refused_connection_and_dns_are_outages(s3: S3Server) -> None:
    identity = new_identity(None)
    for endpoint in (f"http://127.0.0.1:{closed_port()}", "http://receipts.invalid"):
        finding = provider(s3, endpoint_url=endpoint).inspect(identity)
        assert (finding.kind, finding.failure, finding.cause) == (
            FindingKind.UNAVAILABLE,
            ProviderFailure.OUTAGE,
            "connect",
        )


def test_refused_credentials_and_a_wrong_bucket_are_configuration(s3: S3Server) -> None:
    identity = new_identity(None)
    forged = Credentials(s3.reader.access_key, "x" * 40)
    finding = provider(s3, forged).inspect(identity)
    assert (finding.failure, finding.cause) == (ProviderFailure.CONFIGURATION, "http_403")
    # The reader's policy does not reach beyond its prefix.
    finding = provider(s3, prefix="elsewhere/").inspect(identity)
    assert (finding.failure, finding.cause) == (ProviderFailure.CONFIGURATION, "http_403")
    finding = provider(s3, s3.admin, bucket="no-such-bucket").inspect(identity)
    assert (finding.failure, finding.cause) == (ProviderFailure.CONFIGURATION, "no_such_bucket")


def test_the_reader_client_refuses_to_write_before_sending(s3: S3Server) -> None:
    client = s3.reader_client()
    before = s3.recorder.count("PUT")
    with pytest.raises(PermissionError):
        client.put_object(Bucket=BUCKET, Key=f"{PREFIX}p/x.receipt.json", Body=b"{}")
    with pytest.raises(PermissionError):
        client.delete_object(Bucket=BUCKET, Key=f"{PREFIX}p/x.receipt.json")
    assert s3.recorder.count("PUT") == before
    # And the store's policy would refuse it anyway: the reader's credentials cannot write.
    with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
        s3.client(s3.reader).put_object(Bucket=BUCKET, Key=f"{PREFIX}p/x.json", Body=b"{}")


def test_a_page_mixes_findings_and_equals_its_items(s3: S3Server) -> None:
    ok, failed, absent = new_identity(None), new_identity(None), new_identity(None)
    publish(s3, ok, receipt(ok))
    publish(s3, failed, receipt(failed, Outcome.FAILED))
    reader = provider(s3)
    page = reader.inspect_page([ok, failed, absent])
    assert [page[i.dispatch_id].kind for i in (ok, failed, absent)] == [
        FindingKind.VERIFIED_SUCCEEDED,
        FindingKind.VERIFIED_FAILED,
        FindingKind.MISSING,
    ]


def test_configured_through_the_registry_with_the_standard_credential_chain(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3.reader.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RESOLVER_RECEIPT_KEYS", f"object-test={KEYS.keys['object-test'].hex()}")
    registry = build_registry({"artifact.push": {"provider": "object_receipt", **s3.settings()}})
    try:
        identity = msgspec.structs.replace(new_identity(None), action_type="artifact.push")
        publish(s3, identity, receipt(identity))
        found = registry.for_action("artifact.push")
        assert found is not None and found.inspect(identity).kind.is_verified
    finally:
        registry.close()


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("bucket", "Bad_Bucket"),
        ("prefix", "/abs/"),
        ("prefix", "no-slash"),
        ("endpoint_url", "minio:9000"),
        ("timeout_seconds", 0),
        ("secret_access_key", "x"),
    ],
)
def test_bad_settings_are_a_clear_start_up_error(setting: str, value: object) -> None:
    from resolver.core.errors import ConfigError

    with pytest.raises(ConfigError, match=setting):
        create({"bucket": "receipts", setting: value})


def test_missing_escalates_after_an_hour_by_default() -> None:
    from resolver.core.declarations import declaration_of
    from resolver.core.escalation import escalation_policy

    policy = escalation_policy(declaration_of(create).escalate_after_seconds, None)
    assert policy.windows_ms == {FindingKind.MISSING: 3_600_000}
