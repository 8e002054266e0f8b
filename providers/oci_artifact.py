"""`oci_artifact`: an image or artifact pushed to an OCI registry, found by tag, bound to the
dispatch by an annotation of its manifest.

The executor pushes its manifest with the annotation `org.approved-action-resolver.binding`
(`resolver.executor.oci_annotations`), a token signed over the dispatch identity and the
manifest's config and layer digests, at the tag the action names. This provider asks the
registry for that tag's manifest with a token that may only pull (distribution's token
authentication: `token_realm`, `service`, a login that the token service grants `pull` only),
through the GET/HEAD-only client, and accepts the manifest only if its annotation binds it.

| the registry's answer for the tag                       | finding                          |
|----------------------------------------------------------|----------------------------------|
| 404 (no such tag or repository)                          | missing (`no_tag`)               |
| a manifest whose annotation binds this dispatch          | verified_succeeded (`pushed`)    |
| the annotation altered, another attempt's, other layers  | conflict (receipt reasons)       |
| a manifest without the annotation                        | conflict (`manifest_not_bound`)  |
| not an image manifest; over 4 MiB                       | conflict (`bad_manifest`; `too_large`) |
| 401/403, a token refused, another 4xx                    | unavailable (configuration)      |
| 5xx, 408/425/429, no answer                              | unavailable (outage)             |

A push that failed leaves no manifest at the tag, so this never answers `verified_failed`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from providers._declared import MISSING_FOR_AN_HOUR
from resolver.evidence import (
    HTTP_SOURCE_REASONS,
    RECEIPT_REASONS,
    Capability,
    ConfigError,
    DispatchIdentity,
    Finding,
    FindingKind,
    HttpReply,
    HttpUnavailable,
    KeyRing,
    Outcome,
    ProviderFailure,
    ReadOnlyHttpClient,
    Reason,
    ReceiptRejected,
    declare,
    parse_provider_settings,
)
from resolver.evidence.bindings import (
    OCI_ANNOTATION,
    OCI_MANIFEST,
    binding_evidence_digest,
    oci_subject,
    verify_binding,
)

NAME = "oci_artifact"
RESULT_CODE = "pushed"
# A registry accepts manifests of at most 4 MiB; an image manifest is a few KiB.
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
PLACEHOLDERS = ("dispatch_id", "idempotency_key", "project_id")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_REPOSITORY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*\Z")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
_TRANSIENT_4XX = frozenset({408, 425, 429})

_NO_TAG = Finding(FindingKind.MISSING, cause="no_tag")
_NOT_BOUND = Finding(FindingKind.CONFLICT, cause="manifest_not_bound")
_BAD_MANIFEST = Finding(FindingKind.CONFLICT, cause="bad_manifest")
_TOO_LARGE = Finding(FindingKind.CONFLICT, cause="too_large")
_OUTAGE = Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.OUTAGE)


class OciArtifactSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    registry_url: str = Field(description="the registry: https:// (http:// to loopback only)")
    repository: str = Field(description="the repository name, e.g. platform/releases")
    tag: str = Field(
        default="{idempotency_key}",
        description=f"the tag the action pushes; placeholders {list(PLACEHOLDERS)}",
    )
    token_realm: str | None = Field(
        default=None, description="the token service's URL (the registry's auth realm)"
    )
    service: str | None = Field(default=None, description="the registry's service name")
    username: str | None = Field(default=None, description="the login the token service knows")
    password_env: str | None = Field(default=None, description="the variable holding its password")
    token_env: str | None = Field(
        default=None, description="or: the variable holding a bearer token that may only pull"
    )
    timeout_seconds: float = Field(default=5.0, gt=0, le=60, description="use 0 < s <= 60")
    max_in_flight: int = Field(default=8, ge=1, le=64, description="use 1..64")

    @field_validator("registry_url", "token_realm")
    @classmethod
    def _web_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        loopback = parts.hostname in ("127.0.0.1", "::1", "localhost")
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise ValueError("must be an https:// URL")
        if parts.scheme == "http" and not loopback:
            raise ValueError("plain http:// only to a loopback address; use https://")
        if parts.username or parts.password:
            raise ValueError("holds credentials; use username and password_env or token_env")
        return value.rstrip("/")

    @field_validator("repository")
    @classmethod
    def _repository(cls, value: str) -> str:
        if not _REPOSITORY.match(value):
            raise ValueError("must be a repository name (lower-case path components)")
        return value

    @field_validator("tag")
    @classmethod
    def _tag(cls, value: str) -> str:
        unknown = set(_PLACEHOLDER.findall(value)) - set(PLACEHOLDERS)
        if unknown or not _TAG.match(_PLACEHOLDER.sub("x", value)):
            raise ValueError(f"must be a tag naming only placeholders {list(PLACEHOLDERS)}")
        return value

    @model_validator(mode="after")
    def _one_way_in(self) -> OciArtifactSettings:
        login = (self.token_realm, self.service, self.username, self.password_env)
        if any(v is not None for v in login) and not all(v is not None for v in login):
            raise ValueError(
                "token authentication needs token_realm, service, username and password_env"
            )
        if self.token_env is not None and self.token_realm is not None:
            raise ValueError("set token_env or token authentication, not both")
        return self


class OciArtifactProvider:
    """A page: one token for the repository, then its manifests at once over pooled
    connections; every wait ends within the timeout."""

    capability = Capability.AUTOMATIC
    bounds_own_time = True

    def __init__(
        self,
        settings: OciArtifactSettings,
        registry: ReadOnlyHttpClient,
        realm: ReadOnlyHttpClient | None,
        secret: str | None,
        keys: KeyRing,
    ) -> None:
        self._settings = settings
        self._registry = registry
        self._realm = realm
        self._secret = secret
        self._keys = keys
        self.timeout_seconds = settings.timeout_seconds

    def inspect(self, identity: DispatchIdentity) -> Finding:
        return self.inspect_page([identity])[identity.dispatch_id]

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        tags = {i.dispatch_id: self._tag(i) for i in identities}
        authorization = self._authorization()
        if isinstance(authorization, Finding):
            return dict.fromkeys(tags, authorization)
        findings: dict[str, Finding] = {}
        wanted = []
        for identity in identities:
            tag = tags[identity.dispatch_id]
            if not _TAG.match(tag):
                findings[identity.dispatch_id] = Finding(
                    FindingKind.UNAVAILABLE, failure=ProviderFailure.CONFIGURATION, cause="bad_tag"
                )
            else:
                wanted.append(identity)
        paths = [
            f"/v2/{self._settings.repository}/manifests/{quote(tags[i.dispatch_id], safe='')}"
            for i in wanted
        ]
        headers = {"Accept": ", ".join(MANIFEST_TYPES), **authorization}
        replies = self._registry.get_many(paths, headers) if paths else []
        for identity, reply in zip(wanted, replies, strict=True):
            findings[identity.dispatch_id] = self._judge(identity, reply)
        return findings

    def _tag(self, identity: DispatchIdentity) -> str:
        return _PLACEHOLDER.sub(lambda m: str(getattr(identity, m[1])), self._settings.tag)

    def _authorization(self) -> dict[str, str] | Finding:
        if self._realm is None:
            return {"Authorization": f"Bearer {self._secret}"} if self._secret else {}
        settings = self._settings
        query = urlencode(
            {"service": settings.service, "scope": f"repository:{settings.repository}:pull"}
        )
        basic = base64.b64encode(f"{settings.username}:{self._secret}".encode()).decode()
        path = urlsplit(settings.token_realm or "").path or "/"
        try:
            reply = self._realm.get(f"{path}?{query}", {"Authorization": f"Basic {basic}"})
        except HttpUnavailable:
            return _OUTAGE
        if reply.status != 200:
            return _status_finding(reply.status, token=True)
        try:
            document = json.loads(reply.body)
            token = document.get("token") or document.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            return _status_finding(401, token=True)
        return {"Authorization": f"Bearer {token}"}

    def _judge(self, identity: DispatchIdentity, reply: HttpReply | HttpUnavailable) -> Finding:
        if isinstance(reply, HttpUnavailable):
            return _OUTAGE
        if reply.status == 404:
            return _NO_TAG
        if reply.status != 200:
            return _status_finding(reply.status, token=False)
        if reply.truncated:
            return _TOO_LARGE
        manifest = _image_manifest(reply.body)
        if manifest is None:
            return _BAD_MANIFEST
        config, layers, token = manifest
        if token is None:
            return _NOT_BOUND
        subject = oci_subject(config, layers)
        try:
            verify_binding(token, identity, kind=OCI_MANIFEST, subject=subject, keys=self._keys)
        except ReceiptRejected as exc:
            return Finding(FindingKind.CONFLICT, cause=exc.reason)
        digest = "sha256:" + hashlib.sha256(reply.body).hexdigest()
        evidence = binding_evidence_digest(OCI_MANIFEST, digest, token)
        return Finding.verified(Outcome.SUCCEEDED, evidence, RESULT_CODE)

    def close(self) -> None:
        self._registry.close()
        if self._realm is not None:
            self._realm.close()


def _image_manifest(body: bytes) -> tuple[str, list[str], str | None] | None:
    """(config digest, layer digests, binding token) of an image manifest, or None."""
    try:
        document = json.loads(body)
        config = document["config"]["digest"]
        layers = [layer["digest"] for layer in document["layers"]]
        annotations = document.get("annotations") or {}
    except (ValueError, KeyError, TypeError):
        return None
    if document.get("schemaVersion") != 2 or not isinstance(annotations, dict):
        return None
    if not all(isinstance(d, str) and _DIGEST.match(d) for d in [config, *layers]):
        return None
    token = annotations.get(OCI_ANNOTATION)
    return config, layers, token if isinstance(token, str) and token else None


def _status_finding(status: int, *, token: bool) -> Finding:
    if status >= 500 or status in _TRANSIENT_4XX:
        return _OUTAGE
    cause = "token_refused" if token else f"http_{status}"
    return Finding(FindingKind.UNAVAILABLE, failure=ProviderFailure.CONFIGURATION, cause=cause)


def _secret(settings: OciArtifactSettings) -> str | None:
    name = settings.password_env or settings.token_env
    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        key = "password_env" if settings.password_env else "token_env"
        raise ConfigError(f"{key}: environment variable {name} is not set")
    return value


def _client(url: str, settings: OciArtifactSettings, max_body_bytes: int) -> ReadOnlyHttpClient:
    parts = urlsplit(url)
    return ReadOnlyHttpClient(
        f"{parts.scheme}://{parts.netloc}",
        timeout_seconds=settings.timeout_seconds,
        max_body_bytes=max_body_bytes,
        max_in_flight=settings.max_in_flight,
    )


@declare(
    reasons=(
        Reason("no_tag", "the registry has no such tag: the push has not landed"),
        Reason(
            "manifest_not_bound",
            "the tag's manifest carries no binding annotation for the approved action",
        ),
        Reason("bad_manifest", "the tag holds something other than an image manifest"),
        Reason("bad_tag", "the configured tag template gives a name the registry cannot hold"),
        Reason("token_refused", "the registry's token service refused the resolver's login"),
        *RECEIPT_REASONS,
        *HTTP_SOURCE_REASONS,
    ),
    escalate_after_seconds=MISSING_FOR_AN_HOUR,
)
def create(settings: Mapping[str, Any]) -> OciArtifactProvider:
    """The `resolver.providers` entry point: settings from the YAML config."""
    parsed = parse_provider_settings(OciArtifactSettings, settings, NAME)
    keys = KeyRing.from_environment().require_keys(NAME)
    registry = _client(parsed.registry_url, parsed, MAX_MANIFEST_BYTES)
    realm = _client(parsed.token_realm, parsed, 64 * 1024) if parsed.token_realm else None
    return OciArtifactProvider(parsed, registry, realm, _secret(parsed), keys)
