"""`oci_artifact` against a real OCI registry (Debian's docker-registry, token authentication):
the contract kit, what each tag and annotation means, and a credential the registry lets only
pull."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import msgspec
import pytest

from providers.oci_artifact import OciArtifactProvider, create
from resolver.core.domain import DispatchIdentity, FindingKind, ProviderFailure, action_digest
from resolver.core.errors import ConfigError
from resolver.evidence.contract import NotApplicable, ProviderContract, ProviderHarness, Scenario
from resolver.evidence.receipts import KeyRing
from resolver.executor import oci_annotations, oci_manifest_evidence_digest
from tests.helpers.registry import Registry, available, image, layer_digests, running_registry

KEYS = KeyRing({"oci-k1": bytes.fromhex("1d" * 32)}, signing_kid="oci-k1")
REPOSITORY = "platform/releases"
CONFIG = json.dumps({"architecture": "amd64", "os": "linux"}).encode()

pytestmark = pytest.mark.skipif(not available(), reason="Debian's docker-registry is needed")


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    with running_registry() as running:
        yield running


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOLVER_RECEIPT_KEYS", f"oci-k1={'1d' * 32}")
    monkeypatch.setenv("REGISTRY_READER_PASSWORD", "reader-pw")


def new_identity(attempt: int = 1) -> DispatchIdentity:
    dispatch_id = f"o-{uuid.uuid4().hex[:16]}"
    return DispatchIdentity(
        schema_version=1,
        dispatch_id=dispatch_id,
        approval_request_id=f"ar-{dispatch_id}",
        project_id="proj-oci",
        action_type="image.push",
        action_digest=action_digest({"image": dispatch_id}),
        attempt=attempt,
        started_at_ms=1_800_000_000_000,
        idempotency_key=f"idem-{dispatch_id}",
    )


def provider(registry: Registry, **more: Any) -> OciArtifactProvider:
    return create({"repository": REPOSITORY, **registry.settings(**more)})


def push(
    registry: Registry,
    identity: DispatchIdentity,
    *,
    bound_to: DispatchIdentity | None = None,
    annotate: bool = True,
    layer: bytes | None = None,
) -> str:
    """What the executor pushes: its image, the binding among the manifest's annotations."""
    content = layer or f"layer of {identity.dispatch_id}".encode()
    config_digest, layer_digest = layer_digests(CONFIG, content)
    annotations = (
        oci_annotations(
            bound_to or identity, KEYS, config_digest=config_digest, layer_digests=[layer_digest]
        )
        if annotate
        else {}
    )
    manifest = image(registry, REPOSITORY, annotations, content)
    status, digest = registry.push_manifest(REPOSITORY, identity.idempotency_key, manifest)
    assert status == 201
    return digest


class RegistryHarness:
    entry_point = "oci_artifact"

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def provider(self) -> OciArtifactProvider:
        return provider(self.registry)

    def unavailable_provider(self) -> OciArtifactProvider:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        return provider(self.registry, registry_url=f"http://127.0.0.1:{port}")

    def identity(self) -> DispatchIdentity:
        return new_identity()

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        if scenario is Scenario.SUCCEEDED:
            push(self.registry, identity)
        elif scenario is Scenario.TAMPERED:
            # This dispatch's genuine annotation, on a manifest of other layers.
            content = b"the approved layer"
            config_digest, layer_digest = layer_digests(CONFIG, content)
            annotations = oci_annotations(
                identity, KEYS, config_digest=config_digest, layer_digests=[layer_digest]
            )
            manifest = image(self.registry, REPOSITORY, annotations, b"a different layer")
            self.registry.push_manifest(REPOSITORY, identity.idempotency_key, manifest)
        elif scenario is Scenario.IDENTITY_DRIFT:
            push(self.registry, identity, bound_to=msgspec.structs.replace(identity, attempt=2))
        elif scenario is Scenario.OVERSIZE:
            manifest = image(self.registry, REPOSITORY, {}, b"x")
            manifest["annotations"] = {
                "org.approved-action-resolver.binding": f"v1 dispatch={identity.dispatch_id} "
                + "x" * 600
            }
            self.registry.push_manifest(REPOSITORY, identity.idempotency_key, manifest)
        elif scenario is Scenario.FAILED:
            raise NotApplicable("a push that failed leaves no manifest at the tag")
        elif scenario is Scenario.STILL_RUNNING:
            raise NotApplicable("a manifest lands whole or not at all")
        else:
            raise NotApplicable("an annotation is one token: no field can be added")

    def snapshot(self) -> object:
        # What the registry was asked to change: every write it answered, from its log.
        return [entry for entry in self.registry.methods() if entry[0] not in ("GET", "HEAD")]


class TestOciArtifactContract(ProviderContract):
    @pytest.fixture
    def provider_harness(self, registry: Registry) -> ProviderHarness:
        return RegistryHarness(registry)  # type: ignore[return-value]


def test_what_each_tag_and_annotation_means(registry: Registry) -> None:
    oci = provider(registry)
    assert oci.inspect(new_identity()).cause == "no_tag"
    bound = new_identity()
    digest = push(registry, bound)
    finding = oci.inspect(bound)
    assert (finding.kind, finding.result_code) == (FindingKind.VERIFIED_SUCCEEDED, "pushed")
    content = f"layer of {bound.dispatch_id}".encode()
    config_digest, layer_digest = layer_digests(CONFIG, content)
    annotations = oci_annotations(
        bound, KEYS, config_digest=config_digest, layer_digests=[layer_digest]
    )
    # The executor's helper gives the same evidence digest: a racing completion replays.
    assert finding.evidence_digest == oci_manifest_evidence_digest(digest, annotations)
    unbound = new_identity()
    push(registry, unbound, annotate=False)
    assert oci.inspect(unbound).cause == "manifest_not_bound"
    foreign = new_identity()
    push(registry, foreign, bound_to=new_identity())
    assert oci.inspect(foreign).cause == "identity_mismatch"


def test_the_reader_s_token_may_only_pull_and_the_resolver_only_reads(registry: Registry) -> None:
    identity = new_identity()
    push(registry, identity)
    seen = len(registry.methods())
    assert provider(registry).inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
    assert {method for method, _ in registry.methods()[seen:]} == {"GET"}
    # The token service grants the reader pull only, whatever it asks for; the registry then
    # refuses the reader's writes itself.
    token = registry.token("reader", REPOSITORY, "pull,push")
    headers = {"Authorization": f"Bearer {token}"}
    started = httpx.post(f"{registry.url}/v2/{REPOSITORY}/blobs/uploads/", headers=headers)
    assert started.status_code == 401
    manifest = image(registry, REPOSITORY, {}, b"overwrite")
    overwritten = httpx.put(
        f"{registry.url}/v2/{REPOSITORY}/manifests/{identity.idempotency_key}",
        content=json.dumps(manifest),
        headers={**headers, "Content-Type": "application/vnd.oci.image.manifest.v1+json"},
    )
    assert overwritten.status_code == 401
    assert provider(registry).inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED


def test_a_refused_login_is_a_configuration_error(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGISTRY_READER_PASSWORD", "wrong")
    finding = provider(registry).inspect(new_identity())
    assert (finding.kind, finding.failure, finding.cause) == (
        FindingKind.UNAVAILABLE,
        ProviderFailure.CONFIGURATION,
        "token_refused",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"registry_url": "http://registry.example.com"}, "loopback"),
        ({"registry_url": "https://u:p@registry.example.com"}, "credentials"),
        ({"repository": "Platform/Releases"}, "repository name"),
        ({"tag": "{secret}"}, "placeholders"),
        ({"service": None}, "token authentication needs"),
        ({"token_env": "T"}, "not both"),
    ],
)
def test_bad_settings_are_a_clear_start_up_error(
    registry: Registry, change: dict[str, Any], message: str
) -> None:
    settings = {"repository": REPOSITORY, **registry.settings(), **change}
    settings = {k: v for k, v in settings.items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        create(settings)
