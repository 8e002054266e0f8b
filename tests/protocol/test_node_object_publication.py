"""The Node.js SDK's receipt publication to object storage (sdk/node/test/object.test.mjs):
against a fresh migrated database, moto's S3 server on loopback (signatures and IAM policies
checked) and a real `resolver run` reading through `object_receipt`."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.s3 import BUCKET, running_s3_server
from tests.protocol.conftest import passes_node_suite


def test_the_node_sdk_publishes_receipts_fenced_by_its_lease(
    node_sdk: Path, database_url: str
) -> None:
    with running_s3_server() as s3:
        env = {
            "S3_ENDPOINT": f"http://127.0.0.1:{s3.upstream_port}",
            "S3_BUCKET": BUCKET,
            "S3_WRITER": f"{s3.writer.access_key}:{s3.writer.secret_key}",
            "S3_READER": f"{s3.reader.access_key}:{s3.reader.secret_key}",
        }
        passes_node_suite(node_sdk, ["test/object.test.mjs"], database_url, env, at_least=10)
