"""Fixtures shared by the API and console tests."""

import pytest

from resolver.core.domain import FindingKind
from tests.helpers.api import api
from tests.helpers.console import axe_source, browser, chromium, npm_rig, page, provider, site
from tests.helpers.database import World
from tests.helpers.oidc import jwks_file, signing_key
from tests.helpers.providers import ScriptedProvider, fixed, reconciler
from tests.helpers.stores import Storage

__all__ = [
    "api",
    "axe_source",
    "browser",
    "chromium",
    "jwks_file",
    "npm_rig",
    "page",
    "provider",
    "signing_key",
    "site",
]


@pytest.fixture
def manual_item(world: World, store: Storage) -> tuple[str, int]:
    # Real database clock: these executions' leases expired long ago.
    lease = world.started(now_ms=1_000_000)
    reconciler(store, ScriptedProvider(fixed(FindingKind.CONFLICT))).run_cycle()
    return lease.dispatch_id, lease.version
