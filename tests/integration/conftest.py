"""Fixtures shared by the API and console tests."""

from tests.integration.oidc import jwks_file, signing_key

__all__ = ["jwks_file", "signing_key"]
