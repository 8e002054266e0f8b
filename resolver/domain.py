"""Deprecated: 0.1.0's `resolver.domain`, removed in 0.3.0. Import from `resolver.evidence`
(providers) or `resolver.executor` (executors) (CHANGELOG.md, Upgrading; the shim is in
resolver/_compat)."""

from resolver._compat import forward

__getattr__ = forward(__name__)
