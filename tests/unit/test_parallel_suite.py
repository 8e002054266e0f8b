"""What keeps the parallel suite (pytest-xdist, tests/conftest.py) safe: which tests share a
worker, and the ports a worker hands its servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LONGEST_FIRST, SHARED_STATE_GROUPS
from tests.helpers.telemetry import PORTS_FROM, PORTS_PER_WORKER, free_port

EPHEMERAL_FROM = 32768  # Linux's default ip_local_port_range starts here


def _group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return None if mark is None else str(mark.args[0])


def test_tests_sharing_state_beyond_a_database_run_in_one_group(
    request: pytest.FixtureRequest,
) -> None:
    items = request.session.items
    for item in items:
        for fixture, group in SHARED_STATE_GROUPS.items():
            if fixture in getattr(item, "fixturenames", ()):
                assert _group(item) == group, item.nodeid


def test_a_module_whose_fixtures_outlive_a_test_stays_on_one_worker(
    request: pytest.FixtureRequest,
) -> None:
    for item in request.session.items:
        info = getattr(item, "_fixtureinfo", None)
        scopes = {d[-1].scope for d in info.name2fixturedefs.values() if d} if info else set()
        if scopes & {"class", "module", "package"}:
            assert _group(item) is not None, item.nodeid
    # This module's tests use function-scoped fixtures only: they are handed out one by one.
    assert _group(request.node) is None


def test_each_worker_hands_out_ports_from_its_own_slice_below_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert PORTS_FROM + 12 * PORTS_PER_WORKER <= EPHEMERAL_FROM
    slices = {}
    for worker in ("gw0", "gw1", "gw3"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        ports = [free_port() for _ in range(3)]
        assert len(set(ports)) == 3, ports  # a port just handed out is not handed out again
        slices[worker] = {p // PORTS_PER_WORKER for p in ports}
    assert slices == {
        "gw0": {PORTS_FROM // PORTS_PER_WORKER},
        "gw1": {PORTS_FROM // PORTS_PER_WORKER + 1},
        "gw3": {PORTS_FROM // PORTS_PER_WORKER + 3},
    }


def test_the_longest_modules_are_handed_out_first(request: pytest.FixtureRequest) -> None:
    root = Path(str(request.config.rootpath))
    assert [p for p in LONGEST_FIRST if not (root / p).is_file()] == []  # no stale name
    modules = [item.nodeid.split("::", 1)[0] for item in request.session.items]
    ranked = [m for m in modules if m in LONGEST_FIRST]
    assert modules[: len(ranked)] == ranked  # before every other module
    assert ranked == sorted(ranked, key=LONGEST_FIRST.index)
