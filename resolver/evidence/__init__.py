"""The evidence toolkit providers build on: signed receipts, the read-only HTTP client and its
engine, and the provider contract kit (a pytest plugin and the receipt service it plays in
HTTP scenarios). Nothing here can settle a dispatch; the test rig of this repository
(fabricated-evidence providers, test databases) lives in tests/support."""
