"""Deprecated: 0.1.0's home of the provider contract kit, removed in 0.3.0. The kit is the
pytest plugin `resolver.evidence.contract` now (CHANGELOG.md, Upgrading; the shims are in
resolver/_compat)."""
