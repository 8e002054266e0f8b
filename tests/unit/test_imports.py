"""The import graph of `resolver/` and `providers/`: no cycles, one home for value types, and
the layers the package layout states (docs/architecture.md), each rule shown to catch a
planted violation."""

from __future__ import annotations

import graphlib
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass

import grimp
import pytest

import resolver.core.domain

PACKAGES = ("resolver", "providers")
Edges = Mapping[str, set[str]]

DRIVERS = ("psycopg", "psycopg_pool", "sqlalchemy", "alembic", "pymysql")
WEB_STACK = ("fastapi", "starlette", "uvicorn")

# The value types' modules, by concern (resolver/core/domain/): imported through the package.
DOMAIN_MODULES = tuple(
    f"resolver.core.domain.{m.name}" for m in pkgutil.iter_modules(resolver.core.domain.__path__)
)

# One module per port of resolver.core.ports (resolver/db/store/).
PORT_STORES = tuple(
    f"resolver.db.store.{m}"
    for m in ("audit", "backlog", "cases", "execution", "late_evidence", "manual", "recovery")
)


@dataclass(frozen=True, slots=True)
class Forbidden:
    """Modules under `importers` (but not under `exempt`) import nothing under `targets`;
    `transitive`: not through any other module either."""

    rule: str
    importers: tuple[str, ...]
    targets: tuple[str, ...]
    exempt: tuple[str, ...] = ()
    transitive: bool = False


RULES = (
    Forbidden(
        "the algorithm imports no database, no web stack, no demo and no application shell",
        importers=("resolver.core",),
        targets=("resolver.db", *DRIVERS, *WEB_STACK, "resolver.demo", "resolver.app"),
        transitive=True,
    ),
    Forbidden(
        "the algorithm builds no telemetry: the composition root hangs it on the cycle events",
        importers=("resolver.core",),
        targets=("resolver.telemetry", "prometheus_client", "opentelemetry"),
        transitive=True,
    ),
    Forbidden(
        "the shell composes the demo, never the other way: the demo does not reach the shell",
        importers=("resolver.demo",),
        targets=("resolver.app",),
        transitive=True,
    ),
    Forbidden(
        "only resolver.db imports a database driver (providers read through db.evidence)",
        importers=PACKAGES,
        targets=DRIVERS,
        exempt=("resolver.db",),
    ),
    Forbidden(
        "the product imports no built-in provider (it finds them by entry point)",
        importers=("resolver",),
        targets=("providers",),
    ),
    Forbidden(
        "the value types are imported from resolver.core.domain, never from the module of one",
        importers=PACKAGES,
        targets=DOMAIN_MODULES,
        exempt=("resolver.core.domain",),
    ),
    Forbidden(
        "a port's store stands on the shared handle and the row mappers, never on another port",
        importers=PORT_STORES,
        targets=PORT_STORES,
    ),
)


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in prefixes)


def _reachable(edges: Edges, start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(edges.get(start, ()))
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(edges.get(module, ()))
    return seen


def violations(edges: Edges, rule: Forbidden) -> list[str]:
    """Every `importer -> target` pair that breaks `rule`, in a stable order."""
    found = []
    for module in sorted(edges):
        if not _under(module, rule.importers) or _under(module, rule.exempt):
            continue
        reached = _reachable(edges, module) if rule.transitive else edges[module]
        found += [f"{module} -> {t}" for t in sorted(reached) if _under(t, rule.targets)]
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # TYPE_CHECKING-only imports count too: a cycle that only type checkers see still means
    # two modules each define part of the other's vocabulary, which is what the domain is for.
    # External packages appear as one module each (`psycopg`), so the layer rules see them.
    return grimp.build_graph(
        *PACKAGES, include_external_packages=True, exclude_type_checking_imports=False
    )


@pytest.fixture(scope="module")
def edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def _internal(edges: Edges) -> dict[str, set[str]]:
    ours = {m for m in edges if _under(m, PACKAGES)}
    return {m: edges[m] & ours for m in ours}


def test_no_import_cycle_anywhere(edges: Edges) -> None:
    try:
        graphlib.TopologicalSorter(_internal(edges)).prepare()
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_the_cycle_check_has_teeth(edges: Edges) -> None:
    planted = _internal(edges)
    planted["resolver.core.domain"] = {*planted["resolver.core.domain"], "resolver.core.ports"}
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(planted).prepare()


def test_value_types_depend_on_nothing_but_errors(edges: Edges) -> None:
    internal = _internal(edges)
    package = {"resolver.core.domain", *DOMAIN_MODULES}
    assert len(package) > 5
    for module in package:
        assert internal[module] <= {"resolver.core.errors", *package}, module


def test_ports_hold_protocols_only_and_import_no_service(edges: Edges) -> None:
    # ports.py and manual.py used to import each other (Principal, ManualDecision): the values
    # both speak now live in the domain package, so only manual -> ports (ManualStore) remains.
    assert _internal(edges)["resolver.core.ports"] == {"resolver.core.domain"}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.rule)
def test_the_layers_hold(edges: Edges, rule: Forbidden) -> None:
    assert violations(edges, rule) == [], rule.rule


def test_the_graph_sees_what_the_rules_forbid(edges: Edges) -> None:
    # Without this a rule could pass only because the graph never showed the package at all.
    assert {"psycopg", "sqlalchemy"} <= edges["resolver.db.store.handle"] | edges[
        "resolver.db.migrate"
    ]
    assert "fastapi" in edges["resolver.human.api.app"]
    assert any(_under(m, ("providers",)) for m in edges)


# One planted import per rule, into a copy of the real graph. Some are indirect: the module
# planted into is imported by another of the same layer, which then reaches the target too.
PLANTED = [
    (RULES[0], "resolver.core.events", "psycopg", "resolver.core.replica -> psycopg"),
    (RULES[0], "resolver.core.reconciler", "resolver.demo.simple", None),
    (
        RULES[1],
        "resolver.core.liveness",
        "resolver.telemetry.logs",
        "resolver.core.replica -> resolver.telemetry.logs",
    ),
    (RULES[1], "resolver.core.runtime", "prometheus_client", None),
    (RULES[2], "resolver.demo.view", "resolver.app.config", None),
    (
        RULES[2],
        "resolver.demo.localpg",
        "resolver.app.composition",
        "resolver.demo.live -> resolver.app.composition",
    ),
    (RULES[3], "providers.internal_mutation", "psycopg", None),
    (RULES[3], "resolver.executor.receipts", "psycopg.pq", None),
    (RULES[4], "resolver.demo.simple", "providers.internal_mutation", None),
    (RULES[5], "resolver.human.manual", "resolver.core.domain.decisions", None),
    (RULES[6], "resolver.db.store.manual", "resolver.db.store.cases", None),
]


@pytest.mark.parametrize(("rule", "importer", "imported", "expected"), PLANTED)
def test_each_layer_rule_catches_a_planted_violation(
    edges: Edges, rule: Forbidden, importer: str, imported: str, expected: str | None
) -> None:
    assert violations(edges, rule) == []
    planted = {m: set(targets) for m, targets in edges.items()}
    planted[importer].add(imported)
    found = violations(planted, rule)
    assert (expected or f"{importer} -> {imported}") in found
