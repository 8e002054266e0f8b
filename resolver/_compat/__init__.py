"""The previous release's names, kept with a `DeprecationWarning` until the release that
removes them: every shim is a row of `SHIMS`, and its code lives in this package.

The old paths stay importable from where 0.1.0 adopters imported them: a stub module there
is one line (`__getattr__ = forward(__name__)`), and a module that still lives (the provider
API package, a built-in provider) hands the names it no longer defines to `forward` in its
own module `__getattr__`. Each warning names where to import the name from now and the
release that removes it; CHANGELOG.md's Upgrading section lists the same moves, and
tests/unit/test_compat.py walks its tables, imports every old path through these shims and
fails once `resolver.__version__` reaches a shim's `removed_in`.

Adding one is a row here plus, at the old path, `__getattr__ = forward(__name__)`: a stub
module of that one line, or the same line in a live module for the names it no longer
defines; the tests then check its warning, its removal release and its changelog row.
Nothing in the product imports this package except the modules that host a shim (the
`module` of a row): tests/unit/test_imports.py holds that rule.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from importlib import import_module
from types import ModuleType
from typing import Any, Protocol, Self, TypeVar

# The release whose names these are, and the one that removes them: deprecated in 0.2.0,
# kept for one more minor release (docs/versioning.md).
PREVIOUS_RELEASE = "0.1.0"
REMOVED_IN = "0.3.0"

POSTGRES_STORE = "resolver.executor.PostgresStore"
NOW_MS = "ExecutionClient's now_ms="

EVIDENCE = "resolver.evidence"
EXECUTOR = "resolver.executor"
CONTRACT = "resolver.evidence.contract"


class Kind(StrEnum):
    MODULE = "module"
    """The whole module is an old path: a stub whose names resolve through `forward`."""
    NAMES = "names"
    """A live module that still answers some old names (`names`) through `forward`."""
    PLUGIN = "plugin"
    """A stub pytest plugin: it re-exports the kit eagerly and warns when imported."""
    CLASS = "class"
    """A deprecated class (`what`), warning when built."""
    ARGUMENT = "argument"
    """A deprecated keyword argument (`what`), warning when passed."""


@dataclass(frozen=True, slots=True)
class Shim:
    """One old path of the previous release and what it resolves to now."""

    module: str
    """Where adopters reach it: the old module, or the module hosting the old name."""
    kind: Kind
    removed_in: str
    home: str = ""
    """MODULE and NAMES: the module that defines the names now."""
    surfaces: tuple[str, ...] = ()
    """The public modules the names are imported from now (CHANGELOG.md's "now" column)."""
    names: frozenset[str] | None = None
    """Only these names (None: every name of `home`, and every name of `surfaces`)."""
    what: str = ""
    """CLASS and ARGUMENT: the deprecated thing, as the warning names it."""

    def resolve(self, name: str) -> tuple[Any, str]:
        """The object `name` resolves to and where to import it from now, or AttributeError."""
        if name.startswith("_") or (self.names is not None and name not in self.names):
            raise self._missing(name)
        public = [s for s in self.surfaces if name in import_module(s).__all__]
        if public:
            return getattr(import_module(public[0]), name), " or ".join(public)
        try:
            value = getattr(import_module(self.home), name)
        except AttributeError:
            raise self._missing(name) from None
        if isinstance(value, ModuleType):
            raise self._missing(name)
        return value, f"{self.home} (internal: not covered by docs/versioning.md)"

    def _missing(self, name: str) -> AttributeError:
        return AttributeError(f"module {self.module!r} has no attribute {name!r}")


SHIMS: tuple[Shim, ...] = (
    Shim("resolver.domain", Kind.MODULE, REMOVED_IN, "resolver.core.domain", (EVIDENCE, EXECUTOR)),
    Shim("resolver.errors", Kind.MODULE, REMOVED_IN, "resolver.core.errors", (EVIDENCE, EXECUTOR)),
    Shim(
        "resolver.receipts",
        Kind.MODULE,
        REMOVED_IN,
        "resolver.evidence.receipts",
        (EVIDENCE, EXECUTOR),
    ),
    Shim(
        "resolver.readonly_http",
        Kind.MODULE,
        REMOVED_IN,
        "resolver.evidence.readonly_http",
        (EVIDENCE,),
    ),
    Shim("resolver.execution", Kind.MODULE, REMOVED_IN, "resolver.executor.client", (EXECUTOR,)),
    Shim(
        "resolver.testing.receipt_server",
        Kind.MODULE,
        REMOVED_IN,
        "resolver.evidence.receipt_server",
        (CONTRACT,),
    ),
    Shim("resolver.testing.contract", Kind.PLUGIN, REMOVED_IN, surfaces=(CONTRACT,)),
    Shim(
        "resolver.db.repository",
        Kind.MODULE,
        REMOVED_IN,
        "resolver._compat.postgres_store",
        (EXECUTOR,),
        names=frozenset({"PostgresStore"}),
    ),
    # The previous release's module `resolver.evidence` (a package now, the provider API)
    # also held the provider registry, which is internal now.
    Shim(
        "resolver.evidence",
        Kind.NAMES,
        REMOVED_IN,
        "resolver.core.provider",
        names=frozenset(
            {
                "ENTRY_POINT_GROUP",
                "ProviderRegistry",
                "SettingsModel",
                "build_registry",
                "discover_factories",
                "installed_entry_points",
            }
        ),
    ),
    # The executor's receipt writer was exported by the built-in provider that reads it.
    Shim(
        "providers.internal_mutation",
        Kind.NAMES,
        REMOVED_IN,
        "resolver.executor.receipts",
        (EXECUTOR,),
        names=frozenset({"WrittenReceipt", "write_receipt"}),
    ),
    # Deprecated in this release itself: the store of every port, and the clock per call.
    Shim("resolver.executor", Kind.CLASS, REMOVED_IN, what=POSTGRES_STORE),
    Shim("resolver.executor.client", Kind.ARGUMENT, REMOVED_IN, what=NOW_MS),
)

_BY_MODULE = {s.module: s for s in SHIMS if s.kind in (Kind.MODULE, Kind.NAMES, Kind.PLUGIN)}
_BY_WHAT = {s.what: s for s in SHIMS if s.what}


def deprecated(what: str, instead: str, *, stacklevel: int) -> None:
    """Warn that the shim `what` (a CLASS or ARGUMENT row) goes in its release: do `instead`.
    `stacklevel` counts from the caller of this function to the adopter's line."""
    shim = _BY_WHAT[what]
    warnings.warn(
        f"{what} is deprecated and will be removed in {shim.removed_in}: {instead} "
        "(see CHANGELOG.md, Upgrading)",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def forward(module: str, *, stacklevel: int = 2) -> Callable[[str], Any]:
    """The module `__getattr__` of `module`'s shim: each old name resolves to the very same
    object as its new path, warning (once per importing line) where that is. `stacklevel`
    is 3 when the module's own `__getattr__` calls this one rather than being it."""
    shim = _BY_MODULE[module]

    def __getattr__(name: str) -> Any:
        value, where = shim.resolve(name)
        warnings.warn(
            f"{module}.{name} is deprecated and will be removed in {shim.removed_in}: "
            f"import {name} from {where} (see CHANGELOG.md, Upgrading)",
            DeprecationWarning,
            stacklevel=stacklevel,  # the line that imports the name
        )
        return value

    return __getattr__


def plugin_imported(module: str) -> None:
    """The warning of a stub plugin module, said when it is imported."""
    shim = _BY_MODULE[module]
    (new,) = shim.surfaces
    warnings.warn(
        f"{module} is deprecated and will be removed in {shim.removed_in}: use the pytest "
        f"plugin {new} and import the kit from it (see CHANGELOG.md, Upgrading)",
        DeprecationWarning,
        stacklevel=3,
    )


class _Clocked(Protocol):
    def at(self, now_ms: int) -> Self: ...


_C = TypeVar("_C", bound=_Clocked)


def clock_per_call(store: _C, now_ms: int | None) -> _C:
    """The previous release's `now_ms=` on each `ExecutionClient` call: the store at
    `now_ms`, warning; the store itself when none was passed."""
    if now_ms is None:
        return store
    # The adopter's line called the client's method, which called this function.
    deprecated(NOW_MS, "set the clock once with client.at(now_ms)", stacklevel=3)
    return store.at(now_ms)
