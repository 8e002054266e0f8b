"""Worker configuration from `RESOLVER_*` variables, validated before anything starts."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from resolver.core.domain import PAGE_SIZE_HARD_CAP
from resolver.core.errors import ConfigError, settings_error
from resolver.db import dsn
from resolver.db.connect import ConnectionSettings

if TYPE_CHECKING:
    from resolver.human.console_config import ConsoleConfig

PREFIX = "RESOLVER_"
# Read outside Settings: the log level by the command line, the receipt keys by the keyring.
OTHER_VARIABLES = frozenset(
    {
        "RESOLVER_LOG_LEVEL",
        "RESOLVER_RECEIPT_KEYS",
        "RESOLVER_SECRETS_DIR",
        "RESOLVER_RECEIPT_SIGNING_KID",
        # The evidence reader's URL, read by the SQL providers (providers/_sql.py).
        "RESOLVER_EVIDENCE_DATABASE_URL",
    }
)
# Reserved for test-support code: never a production setting, never warned about.
TEST_PREFIX = "RESOLVER_TEST_"
# Fields whose value may hold a secret: a validation message never quotes them.
SECRET_FIELDS = frozenset({"database_url"})


def _default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Settings(ConnectionSettings):
    """Every field maps to `RESOLVER_<FIELD>`; units are in the names. How connections are
    made (pooler, timeouts) is `ConnectionSettings`, which the executor SDK reads alone."""

    model_config = SettingsConfigDict(env_prefix="RESOLVER_", extra="ignore", frozen=True)

    database_url: str | None = Field(
        default=None,
        description="PostgreSQL URL or key=value string, e.g. postgresql://resolver@db:5432/app",
    )
    config: Path | None = Field(default=None, description="YAML provider config file")
    api_host: str = Field(default="127.0.0.1", description="manual-resolution API bind address")
    api_port: int = Field(default=8080, ge=1, le=65535)
    api_decisions_per_minute: int = Field(default=30, ge=1, le=10_000)
    proposal_ttl_seconds: int = Field(
        default=3600,
        ge=60,
        le=86_400,
        description="how long a two-person proposal waits for its second person, at most the "
        "database's bound (recovery_decision_policy)",
    )
    oidc_issuer: str | None = Field(default=None, description="expected `iss` of bearer tokens")
    oidc_audience: str | None = Field(default=None, description="expected `aud` of bearer tokens")
    oidc_jwks_file: Path | None = Field(
        default=None, description="JWKS with the issuer's keys, re-read when it changes"
    )
    oidc_jwks_url: str | None = Field(
        default=None, description="the issuer's jwks_uri (https), instead of a file"
    )
    audit_signing_key_file: Path | None = Field(
        default=None,
        description="the API's Ed25519 private key (PEM) that signs each authorization fact",
    )
    audit_signing_kid: str | None = Field(
        default=None, description="the key id recorded with each fact that key signs"
    )
    audit_public_keys_file: Path | None = Field(
        default=None,
        description="`kid=hex` lines of the API's current and retired public keys, for "
        "`resolver audit verify`",
    )
    console_oidc_client_id: str | None = Field(
        default=None, description="the console's OIDC public client id: enables its sign-in"
    )
    console_oidc_issuer: str | None = Field(
        default=None, description="the console's sign-in issuer (default RESOLVER_OIDC_ISSUER)"
    )
    console_oidc_scope: str = Field(default="openid", description="scopes the console asks for")
    console_oidc_resource: str | None = Field(
        default=None, description="RFC 8707 resource the console asks a token for"
    )
    console_links: str | None = Field(
        default=None, description='JSON list of {"label", "template"} link-outs for a case'
    )
    console_reason_codes: str | None = Field(
        default=None, description="comma-separated reason codes the console offers"
    )
    oidc_jwks_cache_seconds: float = Field(default=300.0, ge=0, le=86_400)
    oidc_jwks_refetch_min_seconds: float = Field(default=30.0, ge=0, le=3_600)
    replica_id: str = Field(default_factory=_default_replica_id, min_length=1, max_length=128)
    page_size: int = Field(default=16, description="controls claimed per cycle (1..64)")
    cadence_seconds: float = Field(default=2.0, gt=0, description="sleep after a partial page")
    cadence_jitter_ratio: float = Field(default=0.2, ge=0, le=1)
    cadence_min_seconds: float = Field(
        default=0.25,
        gt=0,
        description="after a partial page, sleep until the next control falls due, at least this",
    )
    recovery_lease_seconds: float = Field(default=60.0, gt=0)
    commit_margin_seconds: float = Field(default=5.0, ge=0)
    backoff_base_seconds: float = Field(default=5.0, gt=0)
    backoff_max_seconds: float = Field(default=600.0, gt=0)
    default_provider_timeout_seconds: float = Field(default=10.0, gt=0)
    inspect_concurrency: int | None = Field(
        default=None, ge=1, le=PAGE_SIZE_HARD_CAP, description="defaults to the page size"
    )
    # Late evidence after a manual decision (docs/manual-resolution.md): how long the
    # provider keeps looking (0: never), and how often (a low cadence: it is read-only
    # reassurance, not recovery).
    late_evidence_window_seconds: float = Field(
        default=86_400.0, ge=0, le=2_592_000, description="0 stops looking after decisions"
    )
    late_evidence_cadence_seconds: float = Field(default=300.0, ge=1, le=86_400)
    shutdown_grace_seconds: float = Field(default=25.0, gt=0)
    storage_retry_max_seconds: float = Field(default=30.0, gt=0)
    startup_timeout_seconds: float = Field(
        default=120.0, ge=0, description="`resolver run` waits this long for the database"
    )
    max_connections: int = Field(default=4, ge=1, le=64)
    http_port: int = Field(
        default=0, ge=0, le=65535, description="/metrics, /healthz, /readyz port; 0 disables"
    )
    # All interfaces by default: Prometheus and the kubelet reach a pod on its pod address.
    http_host: str = Field(default="0.0.0.0", description="address of the HTTP endpoints")  # noqa: S104
    metrics_cache_seconds: float = Field(
        default=5.0, ge=0, description="a backlog read serves scrapes for this long"
    )
    # `resolver migrate`: DDL gives up on a lock after this long rather than queue (and stall
    # the replicas queued behind it), then retries the whole, rolled-back attempt.
    migration_lock_timeout_ms: int = Field(default=5_000, ge=1, le=600_000)
    migration_attempts: int = Field(default=10, ge=1, le=1_000)
    migration_retry_delay_seconds: float = Field(default=2.0, ge=0, le=600)

    @field_validator("oidc_jwks_url")
    @classmethod
    def _jwks_over_tls(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        # Keys fetched in clear text could be swapped on the way: only loopback may skip TLS.
        loopback = parts.hostname in {"127.0.0.1", "::1", "localhost"}
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise ValueError("must be an https:// URL (plain http only to a loopback address)")
        return value

    @field_validator("database_url")
    @classmethod
    def _postgresql(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                dsn.parse(value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("page_size")
    @classmethod
    def _page_cap(cls, value: int) -> int:
        if not 1 <= value <= PAGE_SIZE_HARD_CAP:
            raise ValueError(
                f"must be between 1 and {PAGE_SIZE_HARD_CAP} (the hard cap keeps every cycle's "
                "work bounded); run more replicas for more throughput"
            )
        return value

    @model_validator(mode="after")
    def _cross_field(self) -> Settings:
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError(
                "RESOLVER_BACKOFF_MAX_SECONDS must be >= RESOLVER_BACKOFF_BASE_SECONDS"
            )
        self.check_lease_budget()
        return self

    def check_lease_budget(self, configured_timeout_seconds: float = 0.0) -> None:
        """A recovery lease must outlive the slowest inspect plus the commit, or two
        replicas could inspect the same dispatch under overlapping leases.

        The default provider timeout always counts (it bounds every provider that sets none,
        and the settings are checked before the provider file is read), so the message names
        which of the two set the figure: an operator who sees 10 s with every provider at 2 s
        must learn that the default is the one to lower."""
        default = self.default_provider_timeout_seconds
        longest = max(default, configured_timeout_seconds)
        needed = longest + self.commit_margin_seconds
        if self.recovery_lease_seconds <= needed:
            source = (
                "RESOLVER_DEFAULT_PROVIDER_TIMEOUT_SECONDS, which counts even when every "
                "provider sets its own timeout_seconds"
                if default >= configured_timeout_seconds
                else "a provider's timeout_seconds in the provider config"
            )
            raise ConfigError(
                f"RESOLVER_RECOVERY_LEASE_SECONDS={self.recovery_lease_seconds:g} must exceed the "
                f"longest provider timeout ({longest:g}s: {source}) plus "
                f"RESOLVER_COMMIT_MARGIN_SECONDS ({self.commit_margin_seconds:g}s); raise the "
                f"lease above {needed:g} or lower that timeout"
            )

    def require_oidc(self) -> tuple[str, str, Path | str]:
        """Issuer, audience and the key source: a JWKS file (Path) or a JWKS URL (str)."""
        missing = [
            f"RESOLVER_{name.upper()}"
            for name in ("oidc_issuer", "oidc_audience")
            if not getattr(self, name)
        ]
        if not (self.oidc_jwks_file or self.oidc_jwks_url):
            missing.append("RESOLVER_OIDC_JWKS_URL or RESOLVER_OIDC_JWKS_FILE")
        if missing:
            raise ConfigError(
                f"the manual-resolution API verifies OIDC tokens and needs {', '.join(missing)}; "
                "set them to your identity provider's issuer, this API's audience and its keys "
                "(its jwks_uri, or a JWKS file)"
            )
        if self.oidc_jwks_file and self.oidc_jwks_url:
            raise ConfigError(
                "set one of RESOLVER_OIDC_JWKS_URL and RESOLVER_OIDC_JWKS_FILE, not both"
            )
        assert self.oidc_issuer and self.oidc_audience
        keys: Path | str | None = self.oidc_jwks_file or self.oidc_jwks_url
        assert keys is not None
        return self.oidc_issuer, self.oidc_audience, keys

    def require_audit_signing(self) -> tuple[Path, str]:
        """The API's fact-signing key file and its key id: the API records no decision
        without them."""
        if not (self.audit_signing_key_file and self.audit_signing_kid):
            raise ConfigError(
                "the manual-resolution API signs each authorization fact and needs "
                "RESOLVER_AUDIT_SIGNING_KEY_FILE (an Ed25519 private key in PEM, e.g. from "
                "`openssl genpkey -algorithm ed25519`) and RESOLVER_AUDIT_SIGNING_KID"
            )
        return self.audit_signing_key_file, self.audit_signing_kid

    def console(self) -> ConsoleConfig:
        """What the operator console is told; a bad value is a `ConfigError` naming it."""
        # Imported here: only `resolver api` serves the console, and its models are built
        # when their module loads, a cost every replica's start-up would pay for nothing.
        from resolver.human.console_config import console_config

        return console_config(
            client_id=self.console_oidc_client_id,
            issuer=self.console_oidc_issuer or self.oidc_issuer,
            scope=self.console_oidc_scope,
            resource=self.console_oidc_resource,
            links=self.console_links,
            reason_codes=self.console_reason_codes,
        )

    def require_database_url(self) -> str:
        if not self.database_url:
            raise ConfigError(
                "RESOLVER_DATABASE_URL is not set; export it, e.g. "
                "RESOLVER_DATABASE_URL=postgresql://resolver@localhost:5432/app"
            )
        return self.database_url


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment; a bad value becomes one readable `ConfigError`."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise settings_error(exc.errors(), secret_fields=SECRET_FIELDS) from None
    except ConfigError:
        raise


def known_variables(extra: Iterable[str] = ()) -> frozenset[str]:
    """Every `RESOLVER_*` name something in this program reads."""
    fields = {f"{PREFIX}{name.upper()}" for name in Settings.model_fields}
    return frozenset({*fields, *OTHER_VARIABLES, *extra})


def unknown_variables(
    environ: Mapping[str, str], extra: Iterable[str] = ()
) -> list[tuple[str, str | None]]:
    """`RESOLVER_*` names nothing reads (a typo is otherwise silently ignored), each with the
    closest known name when one is close; `RESOLVER_TEST_*` belongs to the test support."""
    known = known_variables(extra)
    unknown = sorted(
        name
        for name in environ
        if name.startswith(PREFIX) and not name.startswith(TEST_PREFIX) and name not in known
    )
    return [(name, _closest(name, known)) for name in unknown]


def _closest(name: str, known: Iterable[str]) -> str | None:
    # Imported here: only a start-up with an unknown RESOLVER_* name needs it.
    import difflib

    matches = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return matches[0] if matches else None


def provider_variables(path: Path | None) -> frozenset[str]:
    """Environment names the provider config points at (`token_env`, `database_url_env`):
    a deployment may choose `RESOLVER_*` names for them."""
    try:
        action_types = load_provider_config(path)
    except ConfigError:
        return frozenset()  # the command that needs the file reports it
    return frozenset(
        str(value)
        for entry in action_types.values()
        for key, value in entry.items()
        if key.endswith("_env") and isinstance(value, str)
    )


def load_provider_config(path: Path | None) -> dict[str, dict[str, Any]]:
    """The `action_types` mapping of the YAML provider config (empty without a file)."""
    if path is None:
        return {}
    # Imported here: a replica without a provider file never loads the YAML parser.
    import yaml

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"RESOLVER_CONFIG: cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"RESOLVER_CONFIG: {path} is not valid YAML: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) - {"action_types"}:
        raise ConfigError(f"RESOLVER_CONFIG: {path} must hold one top-level key, action_types")
    action_types = raw.get("action_types") or {}
    if not isinstance(action_types, dict):
        raise ConfigError(f"RESOLVER_CONFIG: action_types in {path} must be a mapping")
    for name, entry in action_types.items():
        if not isinstance(entry, dict) or "provider" not in entry:
            raise ConfigError(
                f"RESOLVER_CONFIG: action_types.{name} must be a mapping with a provider key"
            )
    return action_types
