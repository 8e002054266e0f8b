"""Binding v1 from the Node SDK is byte for byte the Python SDK's, for every helper: a token a
Node executor leaves verifies in the resolver, and its evidence digest replays."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from resolver.core.domain import DispatchIdentity
from resolver.evidence.bindings import GIT_COMMIT, git_subject, verify_binding
from resolver.evidence.receipts import KeyRing
from resolver.executor import (
    git_commit_evidence_digest,
    git_commit_trailer,
    idempotency_binding,
    oci_annotations,
    oci_manifest_evidence_digest,
)

SECRET = "5c" * 32
KEYS = KeyRing({"node-k": bytes.fromhex(SECRET)}, signing_kid="node-k")
IDENTITIES = [
    DispatchIdentity(1, "d-1", "ar-1", "p-1", "refunds.create", "a" * 64, 1, 1, "idem-1"),
    DispatchIdentity(
        1, "D.x:9-_", "ar:x-free", "proj.7", "git.push", "0" * 64, 12, 2**53 + 1, "k:z"
    ),
]
NODE = """
import { readFileSync } from "node:fs";
import { idempotencyBinding, gitCommitTrailer, gitCommitEvidenceDigest, ociAnnotations,
  ociManifestEvidenceDigest } from "./index.js";
const { identities, key } = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = identities.map((raw) => {
  const identity = { ...raw, started_at_ms: BigInt(raw.started_at_ms) };
  const trailer = gitCommitTrailer(identity, key, { tree: "t".repeat(40), parents: ["p".repeat(40), "q".repeat(40)] });
  const annotations = ociAnnotations(identity, key, { configDigest: "sha256:" + "c".repeat(64), layerDigests: ["sha256:" + "d".repeat(64)] });
  return {
    record: idempotencyBinding(identity, key),
    trailer,
    commitDigest: gitCommitEvidenceDigest("e".repeat(40), trailer),
    annotations,
    manifestDigest: ociManifestEvidenceDigest("sha256:" + "f".repeat(64), annotations),
  };
});
process.stdout.write(JSON.stringify(out));
"""


def test_node_and_python_leave_the_same_bindings(node_sdk: Path, tmp_path: Path) -> None:
    cases = tmp_path / "cases.json"
    raw = [{f: getattr(i, f) for f in DispatchIdentity.__struct_fields__} for i in IDENTITIES]
    for entry in raw:
        entry["started_at_ms"] = str(entry["started_at_ms"])
    cases.write_text(json.dumps({"identities": raw, "key": {"kid": "node-k", "secretHex": SECRET}}))
    (node_sdk / "bindings.mjs").write_text(NODE)
    done = subprocess.run(
        ["node", "bindings.mjs", str(cases)],
        cwd=node_sdk,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    node = json.loads(done.stdout)
    for identity, got in zip(IDENTITIES, node, strict=True):
        trailer = git_commit_trailer(identity, KEYS, tree="t" * 40, parents=["p" * 40, "q" * 40])
        annotations = oci_annotations(
            identity, KEYS, config_digest="sha256:" + "c" * 64, layer_digests=["sha256:" + "d" * 64]
        )
        assert got == {
            "record": idempotency_binding(identity, KEYS),
            "trailer": trailer,
            "commitDigest": git_commit_evidence_digest("e" * 40, trailer),
            "annotations": annotations,
            "manifestDigest": oci_manifest_evidence_digest("sha256:" + "f" * 64, annotations),
        }
        # And the resolver accepts what Node signed.
        subject = git_subject("t" * 40, ["p" * 40, "q" * 40])
        token = got["trailer"].split(": ", 1)[1]
        verify_binding(token, identity, kind=GIT_COMMIT, subject=subject, keys=KEYS)
