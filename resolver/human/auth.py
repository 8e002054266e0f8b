"""OIDC bearer-token verification for the manual-resolution API (asymmetric keys only).

The issuer's keys come from a JWKS URL (cached, refetched when a token names an unknown
`kid`) or a mounted file (re-read when it changes), so an identity provider's key rotation
needs no restart.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jwt
import structlog

from resolver.core.domain import Principal
from resolver.core.errors import ConfigError, ResolverError

# Symmetric and `none` algorithms are never accepted: a verifier must not be able to mint.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")
REQUIRED_CLAIMS = ("iss", "aud", "exp", "iat", "sub", "auth_time")


class InvalidToken(ResolverError):
    """The bearer token is missing, malformed, forged, expired or for someone else.

    `reason` is a bounded class for metrics (`expired`, `signature`, ...), never token content.
    """

    def __init__(self, message: str, *, reason: str = "invalid") -> None:
        super().__init__(message)
        self.reason = reason


# Most specific first: InvalidSignatureError is a DecodeError, ExpiredSignatureError an
# InvalidTokenError.
_REASONS: tuple[tuple[type[jwt.PyJWTError], str], ...] = (
    (jwt.ExpiredSignatureError, "expired"),
    (jwt.InvalidAudienceError, "audience"),
    (jwt.InvalidIssuerError, "issuer"),
    (jwt.MissingRequiredClaimError, "claims"),
    (jwt.ImmatureSignatureError, "claims"),
    (jwt.InvalidIssuedAtError, "claims"),
    (jwt.InvalidSignatureError, "signature"),
    (jwt.InvalidAlgorithmError, "algorithm"),
    (jwt.DecodeError, "malformed"),
)


def _reason(exc: jwt.PyJWTError) -> str:
    return next((reason for kind, reason in _REASONS if isinstance(exc, kind)), "invalid")


log = structlog.get_logger("resolver.auth")
Clock = Callable[[], float]


class KeySource(Protocol):
    def key(self, kid: str) -> Any | None:
        """The verification key named `kid`, or None when the issuer has no such key."""


class JwksError(ValueError):
    """A JWKS document that cannot be used (unreadable, not JSON, a key without a kid)."""


def parse_jwks(document: Any) -> dict[str, Any]:
    """kid -> key of every key in a JWKS document; refuses an empty or kid-less set."""
    try:
        keys = {k["kid"]: jwt.PyJWK(k).key for k in document["keys"]}
    except (TypeError, KeyError, jwt.PyJWKError) as exc:
        raise JwksError(f"not a JWKS with a kid on every key ({type(exc).__name__})") from None
    if not keys:
        raise JwksError("holds no keys")
    return keys


class JwksFile:
    """A mounted JWKS, re-read when the file changes (a ConfigMap update swaps it in place).

    A changed file that does not parse keeps the previous keys (a half-written file must not
    lock every user out) and is logged once.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._seen = self._signature()
        try:
            self._keys = self._read()
        except JwksError as exc:
            raise ConfigError(f"RESOLVER_OIDC_JWKS_FILE: {path} {exc}") from None

    def key(self, kid: str) -> Any | None:
        with self._lock:
            signature = self._signature()
            if signature != self._seen:
                self._seen = signature
                self._reload()
            return self._keys.get(kid)

    def _reload(self) -> None:
        try:
            self._keys = self._read()
        except JwksError as exc:
            log.warning("jwks_reload_failed", path=str(self._path), error=str(exc))
            return
        log.info("jwks_reloaded", path=str(self._path), kids=sorted(self._keys))

    def _signature(self) -> tuple[int, ...] | None:
        try:
            st = os.stat(self._path)  # follows the ConfigMap's ..data symlink
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)

    def _read(self) -> dict[str, Any]:
        try:
            document = json.loads(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise JwksError(f"is not readable JSON ({type(exc).__name__})") from None
        return parse_jwks(document)


@dataclass
class JwksUrl:
    """The issuer's `jwks_uri`, cached for `cache_seconds`; a token naming a kid the cache
    lacks triggers a refetch (a rotation), at most once per `refetch_min_seconds` so forged
    kids cannot turn the API into a load generator against the identity provider. A failed
    fetch keeps the keys it had."""

    url: str
    cache_seconds: float = 300.0
    refetch_min_seconds: float = 30.0
    timeout_seconds: float = 5.0
    clock: Clock = time.monotonic
    _keys: dict[str, Any] = field(default_factory=dict, init=False)
    _fetched_at: float = field(default=-math.inf, init=False)
    _attempted_at: float = field(default=-math.inf, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._client = jwt.PyJWKClient(
            self.url, cache_keys=False, cache_jwk_set=False, timeout=self.timeout_seconds
        )

    def start(self) -> JwksUrl:
        """The first fetch, at start-up: an unusable URL fails fast with its reason."""
        try:
            self._keys = parse_jwks(self._client.fetch_data())
        except (jwt.PyJWKClientError, JwksError, ValueError) as exc:
            raise ConfigError(f"RESOLVER_OIDC_JWKS_URL: cannot load {self.url}: {exc}") from None
        self._fetched_at = self._attempted_at = self.clock()
        return self

    def key(self, kid: str) -> Any | None:
        with self._lock:
            now = self.clock()
            may_fetch = now - self._attempted_at >= self.refetch_min_seconds
            if may_fetch and now - self._fetched_at >= self.cache_seconds:
                self._fetch(now, reason="expired")
            elif may_fetch and kid not in self._keys:
                self._fetch(now, reason="unknown_kid")
            return self._keys.get(kid)

    def _fetch(self, now: float, *, reason: str) -> None:
        self._attempted_at = now
        try:
            self._keys = parse_jwks(self._client.fetch_data())
        except (jwt.PyJWKClientError, JwksError, ValueError) as exc:
            log.warning("jwks_fetch_failed", url=self.url, reason=reason, error=str(exc))
            return
        self._fetched_at = now
        log.info("jwks_fetched", url=self.url, reason=reason, kids=sorted(self._keys))


@dataclass(frozen=True, slots=True)
class TokenVerifier:
    issuer: str
    audience: str
    keys: KeySource
    leeway_seconds: int = 30

    @classmethod
    def from_jwks_file(cls, path: Path, *, issuer: str, audience: str) -> TokenVerifier:
        return cls(issuer=issuer, audience=audience, keys=JwksFile(path))

    @classmethod
    def from_jwks_url(cls, source: JwksUrl, *, issuer: str, audience: str) -> TokenVerifier:
        return cls(issuer=issuer, audience=audience, keys=source.start())

    def verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
            key = self.keys.key(str(header.get("kid")))
            if key is None:
                raise InvalidToken("unknown signing key", reason="unknown_key")
            claims = jwt.decode(
                token,
                key=key,
                algorithms=list(ALGORITHMS),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_seconds,
                options={"require": list(REQUIRED_CLAIMS)},
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(type(exc).__name__, reason=_reason(exc)) from None
        return _principal(claims, str(header.get("kid")))


def _printable(value: str) -> bool:
    """No control character (a NUL, a newline, ...): the claim is stored, logged and shown."""
    return not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value)


def _principal(claims: Mapping[str, Any], kid: str) -> Principal:
    auth_time, amr, sub = claims.get("auth_time"), claims.get("amr", []), claims.get("sub")
    issuer = claims.get("iss")
    if not isinstance(auth_time, int) or isinstance(auth_time, bool):
        raise InvalidToken("auth_time must be an integer", reason="claims")
    if (
        not isinstance(amr, list)
        or not all(isinstance(v, str) and 0 < len(v) <= 64 and _printable(v) for v in amr)
        or len(amr) > 16
    ):
        raise InvalidToken("amr must be a short list of printable strings", reason="claims")
    if not isinstance(sub, str) or not 0 < len(sub) <= 128 or not _printable(sub):
        raise InvalidToken("sub must be a non-empty printable string", reason="claims")
    if not isinstance(issuer, str) or not 0 < len(issuer) <= 512 or not _printable(issuer):
        raise InvalidToken("iss must be a printable string", reason="claims")
    if not 0 < len(kid) <= 256 or not _printable(kid):
        raise InvalidToken("kid must be a printable string", reason="claims")
    return Principal(
        user_id=sub, auth_time_ms=auth_time * 1000, amr=tuple(amr), issuer=issuer, token_kid=kid
    )
