"""Deprecated: the previous release's home of the provider contract kit, kept for one release.
The kit is the pytest plugin `resolver.evidence.contract` now (CHANGELOG.md, Upgrading)."""
