"""OIDC bearer-token verification for the manual-resolution API (asymmetric keys only)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt

from resolver.domain import Principal
from resolver.errors import ConfigError, ResolverError

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


@dataclass(frozen=True, slots=True)
class TokenVerifier:
    issuer: str
    audience: str
    keys: Mapping[str, Any]
    leeway_seconds: int = 30

    @classmethod
    def from_jwks_file(cls, path: Path, *, issuer: str, audience: str) -> TokenVerifier:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            keys = {k["kid"]: jwt.PyJWK(k).key for k in document["keys"]}
        except (OSError, ValueError, KeyError, jwt.PyJWKError) as exc:
            raise ConfigError(
                f"RESOLVER_OIDC_JWKS_FILE: {path} is not a readable JWKS with a kid on every "
                f"key ({type(exc).__name__})"
            ) from None
        if not keys:
            raise ConfigError(f"RESOLVER_OIDC_JWKS_FILE: {path} holds no keys")
        return cls(issuer=issuer, audience=audience, keys=keys)

    def verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
            key = self.keys.get(str(header.get("kid")))
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
        return _principal(claims)


def _principal(claims: Mapping[str, Any]) -> Principal:
    auth_time, amr, sub = claims.get("auth_time"), claims.get("amr", []), claims.get("sub")
    if not isinstance(auth_time, int) or isinstance(auth_time, bool):
        raise InvalidToken("auth_time must be an integer", reason="claims")
    if not isinstance(amr, list) or not all(isinstance(v, str) for v in amr):
        raise InvalidToken("amr must be a list of strings", reason="claims")
    if not isinstance(sub, str) or not 0 < len(sub) <= 128:
        raise InvalidToken("sub must be a non-empty string", reason="claims")
    return Principal(user_id=sub, auth_time_ms=auth_time * 1000, amr=tuple(amr))
