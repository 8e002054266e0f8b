"""Binding v1: the short signed token an executor leaves on what its side effect created.

Where a side effect lands in a system the resolver can read (a commit trailer, an image
manifest's annotation, a downstream service's idempotency record), the executor leaves this
token beside it; the provider finds the object, reads the token back and accepts the object
as evidence only if the token is bound to the whole dispatch identity and signed with a
receipt key:

    v1 dispatch=<dispatch_id> attempt=<attempt> kid=<kid> sig=<hex HMAC-SHA256>

The signature covers the canonical JSON of the whole identity (the nine fields of a receipt's
binding), the evidence `kind` (one token never counts for another kind of object) and the
`subject`, the object's own content digest where the executor knows it before the object
exists (a commit's tree and parents, a manifest's config and layers), so a token copied onto
other content fails. The dispatch and attempt are in clear only to tell "bound to another
dispatch" from "altered": both are signed again with everything else.

Any deviation is a `ReceiptRejected` with a receipt reason (`bad_value`, `unknown_kid`,
`bad_signature`, `identity_mismatch`, `version_mismatch`): one vocabulary, the same sentences.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from resolver.core.domain import ID_PATTERN, DispatchIdentity, canonical_json, sha256_hex
from resolver.core.errors import ReceiptRejected
from resolver.evidence.receipts import KeyRing, RejectReason

__all__ = [
    "BINDING_VERSION",
    "GIT_COMMIT",
    "GIT_TRAILER",
    "IDEMPOTENCY_RECORD",
    "MAX_BINDING_CHARS",
    "OCI_ANNOTATION",
    "OCI_MANIFEST",
    "binding_evidence_digest",
    "binding_message",
    "git_subject",
    "oci_subject",
    "sign_binding",
    "verify_binding",
]

BINDING_VERSION = 1
# The longest token: two ids of 128, a kid of 64, a 64-hex signature and the labels.
MAX_BINDING_CHARS = 512
_TOKEN = re.compile(
    r"^v(?P<v>[0-9]{1,3}) dispatch=(?P<dispatch>\S+) attempt=(?P<attempt>[0-9]{1,18})"
    r" kid=(?P<kid>[A-Za-z0-9][A-Za-z0-9_.-]{0,63}) sig=(?P<sig>[0-9a-f]{64})\Z"
)
_KIND = re.compile(r"^[a-z][a-z0-9_.-]{0,63}\Z")

# The kinds of bound object, each with where its token sits and what its subject is.
# A downstream service's idempotency record: the token in the record, no subject (the record
# is found by the idempotency key, which the signature covers).
IDEMPOTENCY_RECORD = "request_record"
# A Git commit: the token in a trailer of its message; the subject its tree and parents.
GIT_COMMIT = "git_commit"
GIT_TRAILER = "Resolver-Binding"
# An OCI image or artifact manifest: the token in an annotation; the subject its config and
# layer digests.
OCI_MANIFEST = "oci_manifest"
OCI_ANNOTATION = "org.approved-action-resolver.binding"


def git_subject(tree: str, parents: Sequence[str]) -> str:
    """What a commit's token is bound to: its tree and its parents, in order."""
    return " ".join(["tree", tree, *(f"parent {p}" for p in parents)])


def oci_subject(config_digest: str, layer_digests: Sequence[str]) -> str:
    """What a manifest's token is bound to: its config and its layers, in order."""
    return " ".join(["config", config_digest, *(f"layer {d}" for d in layer_digests)])


def binding_message(identity: DispatchIdentity, *, kind: str, subject: str) -> bytes:
    """What the signature covers: the identity, the evidence kind and the subject."""
    if not _KIND.match(kind):
        raise ValueError(f"an evidence kind matches {_KIND.pattern}")
    return canonical_json(
        {
            "v": BINDING_VERSION,
            "kind": kind,
            "subject": subject,
            "schema_version": identity.schema_version,
            "dispatch_id": identity.dispatch_id,
            "approval_request_id": identity.approval_request_id,
            "project_id": identity.project_id,
            "action_type": identity.action_type,
            "action_digest": identity.action_digest,
            "attempt": identity.attempt,
            "started_at_ms": identity.started_at_ms,
            "idempotency_key": identity.idempotency_key,
        }
    )


def sign_binding(identity: DispatchIdentity, *, kind: str, subject: str, keys: KeyRing) -> str:
    """The token for `identity`, signed with the ring's current kid."""
    kid = keys.current_kid
    sig = keys.mac(kid, binding_message(identity, kind=kind, subject=subject))
    return (
        f"v{BINDING_VERSION} dispatch={identity.dispatch_id} attempt={identity.attempt}"
        f" kid={kid} sig={sig}"
    )


def verify_binding(
    token: str, identity: DispatchIdentity, *, kind: str, subject: str, keys: KeyRing
) -> None:
    """Accept `token` only if it binds `identity`'s object of `kind` and `subject`."""
    if len(token) > MAX_BINDING_CHARS:
        raise ReceiptRejected("the binding is longer than any valid one", "too_large")
    match = _TOKEN.match(token.strip())
    if match is None or not ID_PATTERN.match(match["dispatch"]):
        raise ReceiptRejected("the binding is not a v1 token", RejectReason.BAD_VALUE.value)
    if int(match["v"]) != BINDING_VERSION:
        raise ReceiptRejected(
            "the binding has another version", RejectReason.VERSION_MISMATCH.value
        )
    if match["dispatch"] != identity.dispatch_id or int(match["attempt"]) != identity.attempt:
        raise ReceiptRejected(
            "the binding names another dispatch or attempt", RejectReason.IDENTITY_MISMATCH.value
        )
    keys.check(match["kid"], binding_message(identity, kind=kind, subject=subject), match["sig"])


def binding_evidence_digest(kind: str, object_id: str, token: str) -> str:
    """The evidence digest of a verified bound object: its kind, its own id (a commit id, a
    manifest digest, a record's key) and the token; the executor computes the same one for
    its completion, so a completion racing the resolution replays it exactly."""
    return sha256_hex(canonical_json({"evidence": kind, "object": object_id, "binding": token}))
