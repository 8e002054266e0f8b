"""S3-compatible object storage for receipt v1 objects: the key layout and a read-only client.

The key of a dispatch's receipt is derived from its immutable identity only, so the executor
that publishes and the provider that reads agree on it without asking anybody:

    {prefix}{project_id}/{dispatch_id}.receipt.json

A prefix per project lets one policy grant a team's executors and the resolver exactly their
projects' receipts. Ids match `[A-Za-z0-9][A-Za-z0-9_.:-]*`, so a key never holds `/` or
anything a URL must escape beyond what the client does.

The client is botocore's (SigV4, the standard credential chain: environment, web identity
for IRSA / workload identity, container and instance metadata, profiles). `profile` names a
profile of the shared AWS config files instead, so each action type may read or publish as
its own identity (a profile may assume a role: `role_arn` with `source_profile`,
`credential_source` or `web_identity_token_file`). It is imported only when an
object-storage provider or publisher is built: the `s3` extra installs it.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from resolver.core.errors import ConfigError

# S3's bucket naming rules (lowercase, digits, dots and hyphens, 3..63 characters).
BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]\Z")
PREFIX_PATTERN = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}/){0,8}\Z")
RECEIPT_SUFFIX = ".receipt.json"
# Profile names of the shared AWS config files (letters, digits and a few separators).
PROFILE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@+=,\-]{0,63}$"
# The only operations a reader may send; every one of them is an HTTP GET.
READ_OPERATIONS = frozenset({"GetObject", "ListObjectVersions", "GetBucketVersioning"})
_READ_METHODS = frozenset({"GET", "HEAD"})


def receipt_key(prefix: str, project_id: str, dispatch_id: str) -> str:
    """Where the receipt of `dispatch_id` (in `project_id`) lives in the bucket."""
    return f"{prefix}{project_id}/{dispatch_id}{RECEIPT_SUFFIX}"


class ObjectStoreSettings(BaseModel):
    """Where the receipts are; never a credential (the client's standard chain finds it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bucket: str = Field(description="name the bucket holding the receipts")
    prefix: str = Field(
        default="receipts/",
        description="use path segments ending with '/' (e.g. receipts/), or '' for the root",
    )
    endpoint_url: str | None = Field(
        default=None,
        description="give the store's URL (e.g. https://minio.internal:9000); leave unset for AWS",
    )
    region: str = Field(default="us-east-1", pattern=r"^[a-z0-9-]{1,32}$")
    addressing_style: Literal["auto", "path", "virtual"] = Field(
        default="auto", description="use path for MinIO, Ceph and most self-hosted stores"
    )
    timeout_seconds: float = Field(
        default=5.0, gt=0, le=60, description="use a number of seconds in (0, 60]"
    )
    profile: str | None = Field(
        default=None,
        pattern=PROFILE_PATTERN,
        description="name a profile of the shared AWS config files (AWS_CONFIG_FILE, "
        "AWS_SHARED_CREDENTIALS_FILE) to use its identity, e.g. a role for this action type",
    )

    @field_validator("bucket")
    @classmethod
    def _bucket(cls, value: str) -> str:
        if not BUCKET_PATTERN.match(value):
            raise ValueError("use an S3 bucket name: 3-63 lowercase letters, digits, '.' or '-'")
        return value

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not PREFIX_PATTERN.match(value):
            raise ValueError("use path segments of [A-Za-z0-9_.-] each ending with '/'")
        return value

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^/?#\s]+/?\Z", value):
            raise ValueError("give scheme and host only, e.g. https://minio.internal:9000")
        return value


def make_client(
    settings: ObjectStoreSettings,
    *,
    max_pool: int,
    read_only: bool,
    max_attempts: int = 1,
    session: Any = None,
) -> Any:
    """A botocore S3 client with the settings' timeouts and no retries of its own.

    `session`: a botocore session to take credentials from; by default a new one with the
    settings' `profile`, or the standard credential chain when it names none.

    `read_only`: a handler refuses, before signing, any operation but the reads above and
    any request that is not a GET/HEAD, so a reader cannot write even by mistake.
    """
    try:
        # By name: botocore ships no type information, and this module is part of the typed
        # surface that users type-check against.
        botocore_session = importlib.import_module("botocore.session")
        config_class = importlib.import_module("botocore.config").Config
    except ImportError:  # pragma: no cover - depends on the installation
        raise ConfigError(
            "object storage needs the s3 extra: pip install 'approved-action-resolver[s3]'"
        ) from None
    config = config_class(
        region_name=settings.region,
        signature_version="s3v4",
        connect_timeout=settings.timeout_seconds,
        read_timeout=settings.timeout_seconds,
        retries={"total_max_attempts": max_attempts, "mode": "standard"},
        max_pool_connections=max_pool,
        s3={"addressing_style": settings.addressing_style},
        # Only checksums the operation requires: a receipt is tiny, and stores that predate
        # the newer checksum headers refuse them.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    if session is None:
        session = _session(botocore_session, settings.profile)
    client = session.create_client("s3", endpoint_url=settings.endpoint_url, config=config)
    if read_only:
        client.meta.events.register("before-call.s3", _refuse_writes)
        client.meta.events.register("before-send.s3", _refuse_write_methods)
    return client


def _session(botocore_session: Any, profile: str | None) -> Any:
    """A session with the standard credential chain, or the named profile's identity."""
    if profile is None:
        return botocore_session.get_session()
    session = botocore_session.Session(profile=profile)
    if profile not in session.available_profiles:
        raise ConfigError(
            f"profile: {profile!r} is in no shared AWS config file; add a [profile {profile}] "
            "section to the file AWS_CONFIG_FILE names (or ~/.aws/config), or remove the setting"
        )
    return session


def bucket_versioning(client: Any, bucket: str) -> str | None:
    """The bucket's versioning status as the store reports it: `Enabled`, `Suspended`, or
    None when versioning was never turned on (or the store does not say)."""
    status = client.get_bucket_versioning(Bucket=bucket).get("Status")
    return str(status) if status else None


def _refuse_writes(model: Any, **_: Any) -> None:
    if model.name not in READ_OPERATIONS:
        raise PermissionError(f"a receipt reader never sends {model.name}")


def _refuse_write_methods(request: Any, **_: Any) -> None:
    if request.method not in _READ_METHODS:
        raise PermissionError(f"a receipt reader never sends {request.method}")
