"""docs/object-storage.md's store sections, as written, against the stores themselves: Ceph's
radosgw from Debian (tests/helpers/radosgw.py) with the page's bucket policy. What it does
differently from S3 (a second PUT on a versioned bucket lands, an absent key under the prefix
condition answers 403) is checked here, and so is what the provider makes of it. The Amazon S3
section's policies are the ones moto enforces in tests/providers/test_object_receipt.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from providers.object_receipt import ObjectReceiptProvider, create
from resolver.core.domain import DispatchIdentity, FindingKind, Outcome, ProviderFailure
from resolver.core.errors import ConfigError
from resolver.evidence.object_store import ObjectStoreSettings, make_client, receipt_key
from resolver.evidence.receipts import KeyRing, encode_receipt, sign_receipt
from resolver.executor.object_receipts import ReceiptAlreadyPublished, ReceiptPublisher
from tests.helpers.harnesses import new_identity
from tests.helpers.radosgw import Radosgw, running_radosgw
from tests.helpers.s3 import REGION, Credentials, session_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "object-storage.md"
BUCKET, PREFIX = "receipts", "receipts/"
KEYS = KeyRing.ephemeral("stores-test")


def documented_policy() -> dict[str, Any]:
    (block,) = re.findall(r"```json radosgw\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    policy: dict[str, Any] = json.loads(block)
    return policy


class Gateway:
    """The gateway with the page's users, a versioned bucket under the page's policy, and
    an unversioned one under the same policy."""

    def __init__(self, rgw: Radosgw) -> None:
        self.rgw = rgw
        self.reader = rgw.user("resolver-reader")
        self.writer = rgw.user("receipts-writer")
        admin = self.client(rgw.admin)
        policy = json.dumps(documented_policy())
        admin.create_bucket(Bucket=BUCKET)
        admin.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        admin.put_bucket_policy(Bucket=BUCKET, Policy=policy)
        self.unversioned = "receipts-plain"
        admin.create_bucket(Bucket=self.unversioned)
        same = policy.replace(f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{self.unversioned}")
        admin.put_bucket_policy(Bucket=self.unversioned, Policy=same)

    def client(self, who: Credentials) -> Any:
        settings = self.settings(BUCKET)
        return make_client(settings, max_pool=2, read_only=False, session=session_of(who))

    def settings(self, bucket: str, **extra: Any) -> ObjectStoreSettings:
        return ObjectStoreSettings(**self.yaml(bucket, **extra))

    def yaml(self, bucket: str = BUCKET, **extra: Any) -> dict[str, Any]:
        return {
            "bucket": bucket,
            "prefix": PREFIX,
            "endpoint_url": self.rgw.endpoint,
            "region": REGION,
            "addressing_style": "path",
            "timeout_seconds": 5,
            **extra,
        }

    def publisher(self, bucket: str = BUCKET) -> ReceiptPublisher:
        return ReceiptPublisher(self.settings(bucket), session=session_of(self.writer))


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    with running_radosgw() as rgw:
        yield Gateway(rgw)


@pytest.fixture
def reader_env(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in gateway.reader.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RESOLVER_RECEIPT_KEYS", f"stores-test={KEYS.keys['stores-test'].hex()}")


def receipt(identity: DispatchIdentity, outcome: Outcome = Outcome.SUCCEEDED) -> bytes:
    signed = sign_receipt(
        identity,
        outcome=outcome,
        result_code="pushed",
        finished_at_ms=identity.started_at_ms + 5,
        receipt_id=f"r-{identity.dispatch_id}",
        keys=KEYS,
    )
    return encode_receipt(signed)


def key_of(identity: DispatchIdentity) -> str:
    return receipt_key(PREFIX, identity.project_id, identity.dispatch_id)


def publish(publisher: ReceiptPublisher, identity: DispatchIdentity, body: bytes) -> None:
    """What the SDK sends, with a lease that surely outlasts the request."""
    publisher.publish(key_of(identity), body, lease_left=lambda: 60.0, lease_seconds=60.0)


@pytest.fixture
def provider(gateway: Gateway, reader_env: None) -> Iterator[ObjectReceiptProvider]:
    built = create(gateway.yaml())
    yield built
    built.close()


def test_the_documented_policy_reads_writes_and_refuses_as_the_page_says(
    gateway: Gateway, provider: ObjectReceiptProvider
) -> None:
    identity = new_identity(None)
    # On a versioned bucket the listing answers an absent receipt: missing, not 403.
    assert provider.inspect(identity).kind is FindingKind.MISSING
    publish(gateway.publisher(), identity, receipt(identity))
    assert provider.inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
    # Neither identity reaches beyond what the policy gives it.
    with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
        gateway.client(gateway.reader).put_object(Bucket=BUCKET, Key=key_of(identity), Body=b"{}")
    with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
        gateway.client(gateway.writer).put_object(Bucket=BUCKET, Key="elsewhere/x", Body=b"{}")
    with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
        gateway.client(gateway.writer).delete_object(Bucket=BUCKET, Key=key_of(identity))


def test_a_second_put_lands_on_a_versioned_bucket_and_reads_as_overwritten(
    gateway: Gateway, provider: ObjectReceiptProvider
) -> None:
    identity = new_identity(None)
    publisher = gateway.publisher()
    publish(publisher, identity, receipt(identity))
    # radosgw ignores If-None-Match here: the publisher is not refused, a version is added.
    publish(publisher, identity, receipt(identity, Outcome.FAILED))
    listed = gateway.client(gateway.rgw.admin).list_object_versions(
        Bucket=BUCKET, Prefix=key_of(identity)
    )
    assert len(listed["Versions"]) == 2
    finding = provider.inspect(identity)
    assert (finding.kind, finding.cause) == (FindingKind.CONFLICT, "overwritten")


def test_a_planted_first_version_stays_the_evidence(
    gateway: Gateway, provider: ObjectReceiptProvider
) -> None:
    identity, other = new_identity(None), new_identity(None)
    admin = gateway.client(gateway.rgw.admin)
    admin.put_object(Bucket=BUCKET, Key=key_of(identity), Body=receipt(other))
    publish(gateway.publisher(), identity, receipt(identity))  # lands on top, unrefused
    finding = provider.inspect(identity)
    assert (finding.kind, finding.cause) == (FindingKind.CONFLICT, "identity_mismatch")


def test_a_bucket_without_versions_is_refused_and_honours_if_none_match(
    gateway: Gateway, reader_env: None
) -> None:
    with pytest.raises(ConfigError, match="keeps no versions"):
        create(gateway.yaml(gateway.unversioned))
    identity = new_identity(None)
    publisher = gateway.publisher(gateway.unversioned)
    publish(publisher, identity, receipt(identity))
    with pytest.raises(ReceiptAlreadyPublished):
        publish(publisher, identity, receipt(identity, Outcome.FAILED))
    # Accepted anyway: one GET, and under the page's prefix condition an absent key is 403.
    accepted = create(gateway.yaml(gateway.unversioned, accept_overwritable_store=True))
    try:
        assert accepted.inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
        absent = accepted.inspect(new_identity(None))
        assert (absent.kind, absent.failure, absent.cause) == (
            FindingKind.UNAVAILABLE,
            ProviderFailure.CONFIGURATION,
            "http_403",
        )
    finally:
        accepted.close()
