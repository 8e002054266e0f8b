"""Leaving the binding behind: the token an executor puts where its side effect lands.

For a side effect in a system the resolver reads (a downstream service's idempotency record,
a Git commit, an OCI manifest), the executor signs a binding v1 token for the dispatch
(`resolver.evidence.bindings`) and leaves it on what it creates; the matching provider finds
the object and accepts it only with that token. Take the identity from the live lease
(`SideEffect.identity()`), sign with the receipt key ring, and complete with the evidence
digest these helpers give, so that a completion racing a recovery replays it exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

from resolver.core.domain import DispatchIdentity
from resolver.evidence.bindings import (
    GIT_COMMIT,
    GIT_TRAILER,
    IDEMPOTENCY_RECORD,
    OCI_ANNOTATION,
    OCI_MANIFEST,
    binding_evidence_digest,
    git_subject,
    oci_subject,
    sign_binding,
)
from resolver.evidence.receipts import KeyRing

__all__ = [
    "git_commit_evidence_digest",
    "git_commit_trailer",
    "idempotency_binding",
    "oci_annotations",
    "oci_manifest_evidence_digest",
]


def idempotency_binding(identity: DispatchIdentity, keys: KeyRing) -> str:
    """The token to send with the request (beside the dispatch's idempotency key), for the
    service to store in its idempotency record: e.g. a `Resolver-Binding` header."""
    return sign_binding(identity, kind=IDEMPOTENCY_RECORD, subject="", keys=keys)


def git_commit_trailer(
    identity: DispatchIdentity, keys: KeyRing, *, tree: str, parents: Sequence[str]
) -> str:
    """The trailer line to end the commit message with (`git commit --trailer` or the
    message's last paragraph), bound to the commit's tree and parents."""
    token = sign_binding(identity, kind=GIT_COMMIT, subject=git_subject(tree, parents), keys=keys)
    return f"{GIT_TRAILER}: {token}"


def git_commit_evidence_digest(commit: str, trailer: str) -> str:
    """The evidence digest the git provider gives the commit `commit` carrying `trailer`."""
    return binding_evidence_digest(GIT_COMMIT, commit, trailer.removeprefix(f"{GIT_TRAILER}: "))


def oci_annotations(
    identity: DispatchIdentity, keys: KeyRing, *, config_digest: str, layer_digests: Sequence[str]
) -> dict[str, str]:
    """The annotation to put in the manifest, bound to its config and layers."""
    subject = oci_subject(config_digest, layer_digests)
    return {OCI_ANNOTATION: sign_binding(identity, kind=OCI_MANIFEST, subject=subject, keys=keys)}


def oci_manifest_evidence_digest(manifest_digest: str, annotations: dict[str, str]) -> str:
    """The evidence digest the registry provider gives the manifest `manifest_digest`."""
    return binding_evidence_digest(OCI_MANIFEST, manifest_digest, annotations[OCI_ANNOTATION])
