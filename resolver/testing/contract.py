"""Deprecated: 0.1.0's contract kit plugin, removed in 0.3.0 (the shim is in resolver/_compat).

`pytest_plugins = ["resolver.testing.contract"]` still works: pytest finds the fixtures
(`receipt_keys`, `receipt_server`) among this module's names, so they are imported here, not
resolved on use. Use `pytest_plugins = ["resolver.evidence.contract"]` and import the kit from
there (CHANGELOG.md, Upgrading).
"""

from resolver._compat import plugin_imported
from resolver.evidence.contract import *  # noqa: F403
from resolver.evidence.contract import __all__ as __all__

plugin_imported(__name__)
