"""Import paths of the previous release, kept for one release with a `DeprecationWarning`.

A module that moved is replaced by a stub whose module `__getattr__` comes from `forward`:
each name still resolves to the very same object, and the warning names where to import it
from now (the public surface when it is on one, else its module). CHANGELOG.md's upgrade
section lists the same moves; the stubs go in the release after next.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from importlib import import_module
from typing import Any

# The documented surfaces, in the order a name is looked for: a name on one of them is
# imported from there, whatever module defines it.
PUBLIC_SURFACES = ("resolver.evidence", "resolver.executor", "resolver.evidence.contract")


def new_path(name: str, home: str) -> str:
    """Where `name` (defined in `home`) is imported from now, said for a warning."""
    value = getattr(import_module(home), name)
    for surface in PUBLIC_SURFACES:
        module = import_module(surface)
        if name in getattr(module, "__all__", ()) and getattr(module, name) is value:
            return surface
    return f"{home} (internal: not covered by docs/versioning.md)"


def forward(old: str, home: str, names: Iterable[str] | None = None) -> Callable[[str], Any]:
    """A module `__getattr__` for the stub at `old`: `names` (every public name of `home`
    when None) resolve to `home`'s objects with a warning naming the new import path."""
    allowed = None if names is None else frozenset(names)

    def __getattr__(name: str) -> Any:
        if name.startswith("_") or (allowed is not None and name not in allowed):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        try:
            value = getattr(import_module(home), name)
        except AttributeError:
            raise AttributeError(f"module {old!r} has no attribute {name!r}") from None
        warnings.warn(
            f"{old}.{name} is deprecated and will be removed in the next release: "
            f"import {name} from {new_path(name, home)} (see CHANGELOG.md, Upgrading)",
            DeprecationWarning,
            stacklevel=3,  # the stub module's __getattr__, then the importing line
        )
        return value

    return __getattr__
