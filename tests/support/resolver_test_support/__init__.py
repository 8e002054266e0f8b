"""Test and benchmark support for the resolver: never part of the shipped wheel or image.

Fabricated-evidence providers (`scripted`, `bench_instant`, `bench_delayed`), test databases,
and (for the contention suite) the operation history and crash injection. Everything here
reads only `RESOLVER_TEST_*` variables.
"""
