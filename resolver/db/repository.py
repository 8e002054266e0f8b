"""Deprecated: 0.1.0's `resolver.db.repository`, removed in 0.3.0. Import `PostgresStore` from
`resolver.executor`, itself deprecated for `PostgresExecutionStore` (CHANGELOG.md, Upgrading;
the shim is in resolver/_compat)."""

from resolver._compat import forward

__getattr__ = forward(__name__)
