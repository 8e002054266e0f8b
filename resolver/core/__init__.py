"""The recovery algorithm: value types, ports, the provider protocol and registry, the
reconciler and the replica loop. It imports no database driver, no web stack and no demo."""
