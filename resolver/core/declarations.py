"""What a provider declares about itself, through the factory its entry point names.

A provider's reason codes (each with a plain sentence for people and whether it suggests
the evidence was forged or tampered with) and its default escalation windows travel with
its factory: `@declare(reasons=..., escalate_after_seconds=...)` on the function the
`resolver.providers` entry point names. The registry reads them from there, for the
built-ins exactly as for anyone else's provider: the core names no provider.

A declaration is data only, checked when it is built (an import-time error in the
provider's own module, never at a recovery): codes of the finding-cause shape, sentences
short, on one line and free of anything that looks like a secret, windows only for findings
that can escalate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import msgspec

from resolver.core.domain import (
    CAUSE_PATTERN,
    ESCALATABLE,
    UNEXPLAINED_CONFLICT,
    FindingKind,
    ProviderFailure,
)
from resolver.core.errors import ConfigError

# A sentence is read in a table cell and after "Evidence conflicts: ": a clause, not a page.
MAX_SENTENCE_CHARS = 160
# A window longer than a year is a typo, not a policy.
MAX_WINDOW_SECONDS = 366 * 86_400

# Printable text on one line: a sentence is rendered as text, never markup, but a control
# character or a line break would still mislead the person reading it.
_PRINTABLE_LINE = re.compile(r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]+\Z")
# What a secret tends to look like in text: credentials in a URL, `key=value` of a secret
# name, a bearer token, a PEM block, or a long run of hex or base64 (a key, a token).
_SECRET_SHAPES = (
    re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", re.I),
    re.compile(r"(passw(or)?d|secret|token|api[_-]?key|private[_-]?key)\s*[=:]\s*\S", re.I),
    re.compile(r"\bbearer\s+[a-z0-9._~+/-]{8,}", re.I),
    re.compile(r"-----BEGIN [A-Z ]+-----"),
    re.compile(r"\b[0-9a-f]{32,}\b", re.I),
    re.compile(r"[A-Za-z0-9+/_-]{40,}={0,2}"),
)


def secret_shapes(text: str) -> list[str]:
    """The secret-looking shapes `text` contains, by pattern (never the matched text)."""
    return [shape.pattern for shape in _SECRET_SHAPES if shape.search(text)]


class Reason(msgspec.Struct, frozen=True):
    """One reason code a provider may give with a finding, and what it means to a person.

    `suggests_tampering`: a conflict with this reason looks like forged or altered evidence
    (a bad signature, another action's digest); confirming such a case as succeeded then needs
    its own acknowledgement in the console."""

    code: str
    sentence: str
    suggests_tampering: bool = False

    def __post_init__(self) -> None:
        if not CAUSE_PATTERN.match(self.code):
            raise ValueError(f"reason code {self.code!r} must match [a-z0-9_]{{1,32}}")
        problem = _sentence_problem(self.sentence)
        if problem is not None:
            raise ValueError(f"reason {self.code}: the sentence {problem}")


def _sentence_problem(sentence: str) -> str | None:
    if not 0 < len(sentence) <= MAX_SENTENCE_CHARS:
        return f"must have 1 to {MAX_SENTENCE_CHARS} characters"
    if sentence != sentence.strip() or not _PRINTABLE_LINE.match(sentence):
        return "must be printable text on one line, without leading or trailing spaces"
    if sentence.endswith("."):
        return "is a clause the console completes: no final full stop"
    if secret_shapes(sentence):
        return "looks like it holds a secret (a credential, a token or a key)"
    return None


_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}\Z")
_PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


class RetainedTable(msgspec.Struct, frozen=True):
    """An evidence table whose rows go when their dispatch is pruned (`resolver prune`)."""

    table: str
    dispatch_column: str = "dispatch_id"

    def __post_init__(self) -> None:
        for name in (self.table, self.dispatch_column):
            if not _IDENTIFIER.match(name):
                raise ValueError(f"{name!r} is not a plain lower-case SQL identifier")


class ProviderSchema(msgspec.Struct, frozen=True):
    """What a provider keeps in the resolver's own database, as SQL files in a package of its
    own (`resolver migrate` applies them after the resolver's schema, providers in name order):

    - `migrations/NNNN_what.up.sql` and `.down.sql`: its tables, indexes and constraints,
      each applied once, in name order, recorded (a file changed after it was applied stops
      migrate: add a migration instead);
    - `definitions.sql` (optional): its functions and triggers, idempotent (`CREATE OR
      REPLACE`, `DROP TRIGGER IF EXISTS` then `CREATE TRIGGER`), applied after its migrations
      whenever it changed or the resolver's own definitions were applied again;
    - `grants.sql` (optional): what each role may do on its tables, applied by
      `resolver migrate --grants` after the resolver's;
    - `retained`: the tables whose rows `resolver prune` removes with their dispatch.
    """

    package: str
    retained: tuple[RetainedTable, ...] = ()

    def __post_init__(self) -> None:
        if not _PACKAGE.match(self.package):
            raise ValueError(f"{self.package!r} is not an importable package name")


class ProviderDeclaration(msgspec.Struct, frozen=True):
    """Everything a provider tells the resolver about itself, besides its findings."""

    reasons: tuple[Reason, ...] = ()
    # Per non-final finding kind, seconds until a case still answering it goes to a person;
    # an action type's `escalate_after_seconds` overrides these (a kind set to null: never).
    escalate_after_seconds: Mapping[FindingKind, float] = msgspec.field(default_factory=dict)
    # Its own tables in the resolver's database, if it keeps evidence there.
    schema: ProviderSchema | None = None

    def __post_init__(self) -> None:
        codes = [reason.code for reason in self.reasons]
        twice = sorted({code for code in codes if codes.count(code) > 1})
        if twice:
            raise ValueError(f"reason codes declared twice: {twice}")
        for kind, seconds in self.escalate_after_seconds.items():
            check_window(kind, seconds)

    @property
    def codes(self) -> frozenset[str]:
        return frozenset(reason.code for reason in self.reasons)


NOTHING_DECLARED = ProviderDeclaration()


def check_window(kind: object, seconds: object) -> None:
    """A window must be for a finding that can escalate and last (0, a year] seconds."""
    if not isinstance(kind, FindingKind) or kind not in ESCALATABLE:
        allowed = sorted(k.value for k in ESCALATABLE)
        raise ValueError(f"{kind}: not a finding that can escalate; use {allowed}")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ValueError(f"{kind.value}: must be a number of seconds")
    if not 0 < seconds <= MAX_WINDOW_SECONDS:
        raise ValueError(
            f"{kind.value}: must be more than 0 and at most {MAX_WINDOW_SECONDS} seconds"
        )


P_co = TypeVar("P_co", covariant=True)


class DeclaredFactory(Generic[P_co]):
    """A provider factory with its declaration: what a `resolver.providers` entry point names.

    Calling it builds the provider from an action type's settings, as before."""

    __slots__ = ("__name__", "_build", "declaration")

    def __init__(
        self, build: Callable[[Mapping[str, Any]], P_co], declaration: ProviderDeclaration
    ) -> None:
        self._build = build
        self.declaration = declaration
        self.__name__ = getattr(build, "__name__", type(self).__name__)

    def __call__(self, settings: Mapping[str, Any]) -> P_co:
        return self._build(settings)

    def __repr__(self) -> str:
        return f"<declared provider factory {self.__name__}>"


def declare(
    *,
    reasons: Iterable[Reason] = (),
    escalate_after_seconds: Mapping[FindingKind, float] | None = None,
    schema: ProviderSchema | None = None,
) -> Callable[[Callable[[Mapping[str, Any]], P_co]], DeclaredFactory[P_co]]:
    """Decorate a provider factory with what the provider declares about itself.

    @declare(reasons=(Reason("no_refund", "the ledger has no refund for it"),),
             escalate_after_seconds={FindingKind.MISSING: 3600})
    def create(settings: Mapping[str, Any]) -> RefundProvider: ...
    """
    windows = {FindingKind(k): seconds for k, seconds in (escalate_after_seconds or {}).items()}
    declaration = ProviderDeclaration(tuple(reasons), windows, schema)

    def wrap(build: Callable[[Mapping[str, Any]], P_co]) -> DeclaredFactory[P_co]:
        return DeclaredFactory(build, declaration)

    return wrap


def declaration_of(factory: object) -> ProviderDeclaration:
    """The factory's declaration; a plain callable (a provider written before declarations
    existed) declares nothing: its codes show raw and it has no default window."""
    declaration = getattr(factory, "declaration", None)
    return declaration if isinstance(declaration, ProviderDeclaration) else NOTHING_DECLARED


# What the resolver itself may record as a reason, whatever the provider: an unavailable
# finding's failure class stands in for a cause the provider did not give, and a conflict
# without a cause reads `unexplained` (`Finding.reason`).
CORE_REASONS = (
    Reason(UNEXPLAINED_CONFLICT, "the evidence conflicts and its provider gave no reason"),
    Reason(ProviderFailure.TIMEOUT.value, "the evidence source did not answer in time"),
    Reason(ProviderFailure.OUTAGE.value, "the evidence source is down"),
    Reason(ProviderFailure.CONFIGURATION.value, "the evidence source is misconfigured"),
    Reason(ProviderFailure.ERROR.value, "the evidence provider failed"),
)
# A source's own refusal passed through as a code (`http_403`, `sqlstate_42501`,
# `mysql_1142`): its shape
# is bounded, its values are the source's. A provider need not declare each one, though it
# may give the common ones a sentence.
SOURCE_REFUSAL_PATTERN = re.compile(r"^(http_[1-5][0-9]{2}|sqlstate_[0-9a-z]{5}|mysql_[0-9]{4})\Z")


class ReasonCatalogue(msgspec.Struct, frozen=True):
    """Every declared reason by code, merged from the resolver's own and the providers'."""

    reasons: Mapping[str, Reason]

    def get(self, code: str) -> Reason | None:
        return self.reasons.get(code)

    @property
    def tampering(self) -> frozenset[str]:
        """The codes whose conflict suggests forged or tampered evidence: `confirm_succeeded`
        on such a case needs the decision's acknowledgement (the API holds the rule)."""
        return frozenset(code for code, r in self.reasons.items() if r.suggests_tampering)

    def public_document(self) -> dict[str, dict[str, Any]]:
        """What the console is told: the sentence and the tampering flag of each code."""
        return {
            code: {"sentence": r.sentence, "suggests_tampering": r.suggests_tampering}
            for code, r in sorted(self.reasons.items())
        }


def reason_catalogue(declarations: Mapping[str, ProviderDeclaration]) -> ReasonCatalogue:
    """Merge the providers' reasons (by provider name) with the core's. One code means one
    thing: two providers may declare the same code only with the same sentence and flag
    (the toolkit's shared sets make that the easy path); anything else is a `ConfigError`."""
    merged: dict[str, tuple[str, Reason]] = {r.code: ("the resolver", r) for r in CORE_REASONS}
    for name, declaration in sorted(declarations.items()):
        for reason in declaration.reasons:
            seen = merged.get(reason.code)
            if seen is not None and seen[1] != reason:
                raise ConfigError(
                    f"reason code {reason.code!r} is declared differently by {seen[0]} and by "
                    f"provider {name}; one code has one meaning: rename one of them, or "
                    "declare it with the same sentence and tampering flag"
                )
            merged.setdefault(reason.code, (f"provider {name}", reason))
    return ReasonCatalogue({code: reason for code, (_, reason) in merged.items()})
