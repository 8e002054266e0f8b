"""The previous release's path of the evidence reader: `ReadOnlyDatabase` and `Row` import from
`resolver.evidence` now (resolver/_compat)."""

from resolver._compat import forward

__getattr__ = forward(__name__)
