"""Test support shipped with the package: a private PostgreSQL and the provider contract kit."""
