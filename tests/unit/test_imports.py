"""The import graph of `resolver/` and `providers/`: no cycles, one home for value types."""

from __future__ import annotations

import graphlib

import grimp
import pytest

PACKAGES = ("resolver", "providers")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # TYPE_CHECKING-only imports count too: a cycle that only type checkers see still means
    # two modules each define part of the other's vocabulary, which is what domain.py is for.
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)


def _edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    modules = set(graph.modules)
    return {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}


def test_no_import_cycle_anywhere(graph: grimp.ImportGraph) -> None:
    try:
        graphlib.TopologicalSorter(_edges(graph)).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_the_cycle_check_has_teeth(graph: grimp.ImportGraph) -> None:
    edges = _edges(graph)
    edges["resolver.core.domain"] = {*edges["resolver.core.domain"], "resolver.core.ports"}
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(edges).prepare()


def test_value_types_depend_on_nothing_but_errors(graph: grimp.ImportGraph) -> None:
    internal = graph.find_modules_directly_imported_by("resolver.core.domain") & set(graph.modules)
    assert internal <= {"resolver.core.errors"}


def test_ports_hold_protocols_only_and_import_no_service(graph: grimp.ImportGraph) -> None:
    # ports.py and manual.py used to import each other (Principal, ManualDecision): the values
    # both speak now live in domain.py, so only manual -> ports (its ManualStore) remains.
    internal = graph.find_modules_directly_imported_by("resolver.core.ports") & set(graph.modules)
    assert internal == {"resolver.core.domain"}
