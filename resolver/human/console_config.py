"""What the operator console is told at start: sign-in, link-out templates and reason codes.

Served as `/console/config.json` (no secret in it: a public client has none) and used to build
the console's Content-Security-Policy, so the page may talk to its own origin and, when OIDC
sign-in is configured, to the issuer's origin only.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from resolver.core.domain import REASON_CODE_PATTERN
from resolver.core.errors import ConfigError

# The identity fields a link-out template may name: each is URL-encoded by the console.
LINK_FIELDS = frozenset(
    {"dispatch_id", "approval_request_id", "project_id", "action_type", "idempotency_key"}
)
M = TypeVar("M", bound=BaseModel)
PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
MAX_LINKS = 10
DEFAULT_REASON_CODES = (
    "checked_downstream_succeeded",
    "checked_downstream_not_done",
    "vendor_confirmed",
    "vendor_declined",
    "node_lost_outcome_unknown",
    "cannot_verify",
)


class LinkTemplate(BaseModel):
    """A link-out shown on the case view, e.g. the approval in the platform's UI."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(min_length=1, max_length=60)
    template: str = Field(min_length=1, max_length=500)

    @field_validator("template")
    @classmethod
    def _absolute_web_url(cls, value: str) -> str:
        # Only http(s): a `javascript:` or `data:` template would run in the console's origin.
        parts = urlsplit(value.replace("{", "").replace("}", ""))
        if parts.scheme not in {"https", "http"} or not parts.netloc:
            raise ValueError("must be an absolute http(s) URL")
        unknown = set(PLACEHOLDER.findall(value)) - LINK_FIELDS
        if unknown:
            raise ValueError(
                f"names {sorted(unknown)}; a template may name only {sorted(LINK_FIELDS)}"
            )
        return value


class ConsoleOidc(BaseModel):
    """OIDC authorization code + PKCE as a public client: no secret exists to configure."""

    model_config = ConfigDict(frozen=True)

    issuer: str
    client_id: str = Field(min_length=1, max_length=200)
    scope: str = Field(default="openid", max_length=500)
    resource: str | None = Field(default=None, max_length=500)

    @field_validator("issuer")
    @classmethod
    def _issuer_over_tls(cls, value: str) -> str:
        parts = urlsplit(value)
        loopback = parts.hostname in {"127.0.0.1", "::1", "localhost"}
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise ValueError("must be an https:// URL (plain http only to a loopback address)")
        return value.rstrip("/")

    @property
    def origin(self) -> str:
        parts = urlsplit(self.issuer)
        return f"{parts.scheme}://{parts.netloc}"


class ConsoleConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    oidc: ConsoleOidc | None = None
    links: tuple[LinkTemplate, ...] = Field(default=(), max_length=MAX_LINKS)
    reason_codes: tuple[str, ...] = DEFAULT_REASON_CODES

    @field_validator("reason_codes")
    @classmethod
    def _codes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [code for code in value if not REASON_CODE_PATTERN.match(code)]
        if bad:
            raise ValueError(f"{bad} are not reason codes (1-64 of [a-z0-9_.-])")
        return value

    def content_security_policy(self) -> str:
        """The page loads nothing but itself and talks to this origin and the issuer only."""
        connect = "'self'" + (f" {self.oidc.origin}" if self.oidc else "")
        return (
            f"default-src 'none'; script-src 'self'; style-src 'self'; connect-src {connect}; "
            "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
        )

    def public_document(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def console_config(
    *,
    client_id: str | None,
    issuer: str | None,
    scope: str = "openid",
    resource: str | None = None,
    links: str | None = None,
    reason_codes: str | None = None,
) -> ConsoleConfig:
    """The console's configuration from the `RESOLVER_CONSOLE_*` settings, or `ConfigError`
    naming the variable."""
    oidc = None
    if client_id:
        if not issuer:
            raise ConfigError(
                "RESOLVER_CONSOLE_OIDC_CLIENT_ID needs an issuer: set RESOLVER_CONSOLE_OIDC_ISSUER "
                "or RESOLVER_OIDC_ISSUER"
            )
        oidc = _build(
            "RESOLVER_CONSOLE_OIDC_ISSUER",
            ConsoleOidc,
            issuer=issuer,
            client_id=client_id,
            scope=scope,
            resource=resource,
        )
    fields: dict[str, Any] = {"oidc": oidc}
    if links:
        fields["links"] = _links(links)
    if reason_codes:
        fields["reason_codes"] = tuple(c.strip() for c in reason_codes.split(",") if c.strip())
    return _build(
        "RESOLVER_CONSOLE_REASON_CODES or RESOLVER_CONSOLE_LINKS", ConsoleConfig, **fields
    )


def _links(raw: str) -> list[LinkTemplate]:
    try:
        document = json.loads(raw)
    except ValueError:
        raise ConfigError(
            'RESOLVER_CONSOLE_LINKS must be a JSON list like [{"label": "Approval", '
            '"template": "https://platform.example/approvals/{approval_request_id}"}]'
        ) from None
    if not isinstance(document, list):
        raise ConfigError("RESOLVER_CONSOLE_LINKS must be a JSON list of {label, template}")
    return [_build("RESOLVER_CONSOLE_LINKS", LinkTemplate, **_object(entry)) for entry in document]


def _object(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ConfigError("RESOLVER_CONSOLE_LINKS: every entry is an object {label, template}")
    return entry


def _build(variable: str, model: type[M], **fields: Any) -> M:
    try:
        return model(**fields)
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {str(e['msg']).removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ConfigError(f"{variable}: {reasons}") from None
