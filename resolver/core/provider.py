"""The evidence protocol: what a provider is, and how action types find theirs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from functools import cache
from importlib.metadata import EntryPoints, entry_points
from typing import Any, Protocol, TypeVar, runtime_checkable

import msgspec
from pydantic import BaseModel, ValidationError

from resolver.core.declarations import (
    ProviderDeclaration,
    ReasonCatalogue,
    declaration_of,
    reason_catalogue,
)
from resolver.core.domain import DispatchIdentity, Finding
from resolver.core.errors import ConfigError
from resolver.core.escalation import CONFIG_KEY as ESCALATION_KEY
from resolver.core.escalation import NEVER, EscalationPolicy, escalation_policy

ENTRY_POINT_GROUP = "resolver.providers"


class Capability(StrEnum):
    AUTOMATIC = "automatic"
    MANUAL_ONLY = "manual_only"


@runtime_checkable
class EvidenceProvider(Protocol):
    """Reads evidence about one dispatch. It must never cause a side effect."""

    capability: Capability
    timeout_seconds: float

    def inspect(self, identity: DispatchIdentity) -> Finding: ...


@runtime_checkable
class PageEvidenceProvider(EvidenceProvider, Protocol):
    """A provider that answers a whole page in one round trip (e.g. one query).

    One that sets `bounds_own_time = True` promises never to take longer than its
    `timeout_seconds` (every wait it makes is bounded so): the reconciler then calls it on
    the cycle's own thread instead of handing the page to its thread pool.
    """

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]: ...


ProviderFactory = Callable[[Mapping[str, Any]], EvidenceProvider]


class ProviderRegistry(msgspec.Struct, frozen=True):
    """Action type -> provider; an action type with no provider has no trusted evidence."""

    by_action_type: Mapping[str, EvidenceProvider]
    # The configured provider name per action type: the `provider` label of the metrics.
    names: Mapping[str, str] = msgspec.field(default_factory=dict)
    # How long each non-final finding may last per action type (resolver.escalation);
    # an action type absent here never escalates.
    escalation: Mapping[str, EscalationPolicy] = msgspec.field(default_factory=dict)
    # What each configured provider declared, by provider name (resolver.core.declarations).
    declarations: Mapping[str, ProviderDeclaration] = msgspec.field(default_factory=dict)

    def for_action(self, action_type: str) -> EvidenceProvider | None:
        return self.by_action_type.get(action_type)

    def escalation_for(self, action_type: str) -> EscalationPolicy:
        return self.escalation.get(action_type, NEVER)

    @property
    def longest_timeout_seconds(self) -> float:
        return max((p.timeout_seconds for p in self.by_action_type.values()), default=0.0)

    def close(self) -> None:
        """Release what providers hold (connection pools); providers without `close` hold none."""
        for provider in {id(p): p for p in self.by_action_type.values()}.values():
            close = getattr(provider, "close", None)
            if callable(close):
                close()


class _Selectable(Protocol):
    # What `entry_points()` returns: EntryPoints, or on Python 3.11 its grouped mapping.
    def select(self, *, group: str) -> EntryPoints: ...


@cache
def _installed_entry_points() -> _Selectable:
    # One scan of every installed distribution's metadata per process (tens of ms at
    # start-up), shared by the provider and cycle-subscriber groups.
    return entry_points()


@cache
def installed_entry_points(group: str) -> EntryPoints:
    """The installed distributions' entry points of `group` (read once per process).

    Only the groups asked for are selected: each selection walks every entry point of every
    group, and a replica asks for two of the dozens an environment installs (a third of
    the scan's cost when all were selected up front)."""
    return _installed_entry_points().select(group=group)


def discover_factories() -> dict[str, ProviderFactory]:
    """Provider factories registered under the `resolver.providers` entry-point group."""
    return {ep.name: ep.load() for ep in installed_entry_points(ENTRY_POINT_GROUP)}


def _registered() -> dict[str, Callable[[], ProviderFactory]]:
    # Loaded on use only: a replica imports the providers it is configured with (an HTTP
    # client stack, say), not every installed one, at start-up.
    return {ep.name: ep.load for ep in installed_entry_points(ENTRY_POINT_GROUP)}


def _given(factory: ProviderFactory) -> Callable[[], ProviderFactory]:
    return lambda: factory


def installed_declarations() -> dict[str, ProviderDeclaration]:
    """What every installed provider declares, by entry-point name: what the API serves to
    the console, which shows cases of any provider a replica was ever configured with.

    Loading an entry point imports its module; one that fails is a broken installation and a
    `ConfigError` naming it, never a console that silently shows raw codes."""
    declarations: dict[str, ProviderDeclaration] = {}
    for ep in installed_entry_points(ENTRY_POINT_GROUP):
        try:
            factory = ep.load()
        except Exception as exc:  # any import-time failure of someone else's module
            raise ConfigError(
                f"provider {ep.name} ({ep.value}) is installed but does not load: "
                f"{type(exc).__name__}; reinstall it or uninstall its package"
            ) from None
        declarations[ep.name] = declaration_of(factory)
    return declarations


def installed_reasons() -> ReasonCatalogue:
    """The reason codes of the resolver and of every installed provider, merged."""
    return reason_catalogue(installed_declarations())


def build_registry(
    action_types: Mapping[str, Mapping[str, Any]],
    factories: Mapping[str, ProviderFactory] | None = None,
) -> ProviderRegistry:
    """Instantiate one provider per configured action type; unknown names fail start-up."""
    known = _registered() if factories is None else {n: _given(f) for n, f in factories.items()}
    providers: dict[str, EvidenceProvider] = {}
    names: dict[str, str] = {}
    escalation: dict[str, EscalationPolicy] = {}
    declarations: dict[str, ProviderDeclaration] = {}
    for action_type, raw in action_types.items():
        settings = dict(raw)
        name = settings.pop("provider", None)
        # The resolver's own key, not the provider's: taken out before the provider sees it.
        windows = settings.pop(ESCALATION_KEY, None)
        if name not in known:
            raise ConfigError(
                f"action_types.{action_type}.provider: {name!r} is not a registered provider; "
                f"choose one of {sorted(known)} or install the package that provides it"
            )
        factory = known[name]()
        try:
            providers[action_type] = factory(settings)
        except ConfigError as exc:
            raise ConfigError(f"action_types.{action_type}: {exc}") from exc
        names[action_type] = name
        declarations[name] = declaration_of(factory)
        try:
            escalation[action_type] = escalation_policy(
                declarations[name].escalate_after_seconds, windows
            )
        except ConfigError as exc:
            raise ConfigError(f"action_types.{action_type}.{exc}") from None
    # Checked at start-up: two configured providers giving one code two meanings.
    reason_catalogue(declarations)
    return ProviderRegistry(providers, names, escalation, declarations)


SettingsModel = TypeVar("SettingsModel", bound=BaseModel)


def parse_provider_settings(
    model: type[SettingsModel], settings: Mapping[str, Any], provider: str
) -> SettingsModel:
    """Validate a provider's settings; the first problem becomes a `ConfigError` naming the
    key and the fix. Values are never echoed: a setting may hold a URL or a path."""
    allowed = sorted(model.model_fields)
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        raise ConfigError(
            f"{unknown[0]}: provider {provider} has no such setting; remove it or use one of "
            f"{allowed}"
        )
    try:
        return model.model_validate(dict(settings))
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"]) or "settings"
        message = str(error["msg"]).removeprefix("Value error, ")
        field = model.model_fields.get(key)
        fix = f"; {field.description}" if field is not None and field.description else ""
        raise ConfigError(f"{key}: {message} (provider {provider}){fix}") from None
