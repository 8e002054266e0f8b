"""An executor on the Python SDK that pushes an image bound to its dispatch to an OCI registry,
and SIGKILLs itself at one point of the push.

    python oci_crash_executor.py <database_url> <dispatch_id> <point> <registry json>

The manifest carries the binding annotation (`oci_annotations`, signed over its config and
layer digests) and is pushed, as the registry's `writer`, at the dispatch's idempotency key as
tag. Points: `before_push`, `blobs_pushed` (the layers are in, no manifest names them),
`after_push` (before the completion), `after_complete`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from resolver.core.domain import Outcome
from resolver.evidence.receipts import KeyRing
from resolver.executor import (
    PostgresExecutionStore,
    PostgresHandle,
    oci_annotations,
    oci_manifest_evidence_digest,
)
from resolver.executor.side_effects import SideEffectRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.helpers.registry import OCI_CONFIG, OCI_LAYER, OCI_MANIFEST, Registry

REPOSITORY = "platform/images"


def crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(database_url: str, dispatch_id: str, point: str, spec: str) -> None:
    where = json.loads(spec)
    registry = Registry(where["url"], where["realm"], Path(os.devnull), None)  # type: ignore[arg-type]
    keys = KeyRing.from_environment()
    with PostgresExecutionStore(PostgresHandle(database_url)) as store:
        runner = SideEffectRunner(
            store, database_url=database_url, owner="oci-crasher", keys=keys, lease_seconds=6
        )
        with runner.run(dispatch_id) as effect:
            identity = effect.identity()
            if point == "before_push":
                crash()
            config = json.dumps({"architecture": "amd64", "os": "linux"}).encode()
            layer = f"image of {identity.dispatch_id}".encode()
            config_digest = registry.push_blob(REPOSITORY, config)
            layer_digest = registry.push_blob(REPOSITORY, layer)
            if point == "blobs_pushed":
                crash()
            annotations = oci_annotations(
                identity, keys, config_digest=config_digest, layer_digests=[layer_digest]
            )
            manifest = {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
                "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": len(layer)}],
                "annotations": annotations,
            }
            status, digest = registry.push_manifest(REPOSITORY, identity.idempotency_key, manifest)
            assert status == 201, status
            if point == "after_push":
                crash()
            effect.record(
                Outcome.SUCCEEDED,
                "pushed",
                evidence_digest=oci_manifest_evidence_digest(digest, annotations),
            )
    if point == "after_complete":
        crash()


if __name__ == "__main__":
    main(*sys.argv[1:5])
