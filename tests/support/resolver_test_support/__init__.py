"""Test and benchmark support for the resolver: never part of the shipped wheel or image.

Only what a `resolver run` process started by the tests or the benchmark loads through its
entry points: the fabricated-evidence providers (`scripted`, `bench_instant`, `bench_delayed`)
and (for the contention suite) the operation history and crash injection. Everything here
reads only `RESOLVER_TEST_*` variables. Helpers used only inside the test process (test
databases, the catalog reader, servers and rigs) live in `tests/helpers`.
"""
