"""Fixtures shared by the API and console tests."""

from tests.integration.console_rig import axe_source, npm_rig, provider
from tests.integration.oidc import jwks_file, signing_key

__all__ = ["axe_source", "jwks_file", "npm_rig", "provider", "signing_key"]
