"""The provider contract kit, shipped for provider authors: a pytest plugin and the receipt
service it plays in HTTP scenarios. Nothing here can settle a dispatch; the test rig of this
repository (fabricated-evidence providers, test databases) lives in tests/support."""
