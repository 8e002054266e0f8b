"""What a provider declares: the rules a declaration is built under, how the registry and the
catalogue read it, and that escalation defaults come from it and from nowhere else."""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.metadata import distribution
from pathlib import Path
from typing import Any

import pytest

from providers.manual_only import ManualOnlyProvider
from resolver.core.declarations import (
    CORE_REASONS,
    NOTHING_DECLARED,
    DeclaredFactory,
    ProviderDeclaration,
    Reason,
    declaration_of,
    declare,
    reason_catalogue,
)
from resolver.core.domain import FindingKind, ProviderFailure
from resolver.core.errors import ConfigError
from resolver.core.provider import (
    ENTRY_POINT_GROUP,
    Capability,
    build_registry,
    installed_declarations,
    installed_reasons,
)


@pytest.mark.parametrize(
    ("code", "sentence", "problem"),
    [
        ("Bad-Code", "a sentence", "must match"),
        ("x" * 33, "a sentence", "must match"),
        ("ok", "", "1 to 160 characters"),
        ("ok", "x" * 161, "1 to 160 characters"),
        ("ok", "two\nlines", "one line"),
        ("ok", " padded", "one line"),
        ("ok", "a whole sentence.", "no final full stop"),
        ("ok", "see https://reader:hunter2@ledger.internal", "secret"),
        ("ok", "the token=abc123 was refused", "secret"),
        ("ok", "key 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "secret"),
        ("ok", "-----BEGIN PRIVATE KEY----- inside", "secret"),
    ],
)
def test_a_reason_that_breaks_a_rule_is_refused_when_built(
    code: str, sentence: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        Reason(code, sentence)


def test_a_declaration_refuses_a_code_twice_and_windows_for_final_findings() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        ProviderDeclaration((Reason("a", "one thing"), Reason("a", "another thing")))
    for kind in (FindingKind.CONFLICT, FindingKind.VERIFIED_SUCCEEDED, FindingKind.UNSUPPORTED):
        with pytest.raises(ValueError, match="not a finding that can escalate"):
            ProviderDeclaration(escalate_after_seconds={kind: 60})
    for seconds in (0, -1, 367 * 86_400, True):
        with pytest.raises(ValueError, match="seconds"):
            ProviderDeclaration(escalate_after_seconds={FindingKind.MISSING: seconds})


def _ledger(_settings: Mapping[str, Any]) -> ManualOnlyProvider:
    return ManualOnlyProvider()


LEDGER = declare(
    reasons=(Reason("ledger_gap", "the ledger skips this entry"),),
    escalate_after_seconds={"still_running": 900, FindingKind.MISSING: 120},
)(_ledger)


def test_declare_keeps_the_factory_callable_and_a_plain_factory_declares_nothing() -> None:
    assert isinstance(LEDGER, DeclaredFactory)
    assert isinstance(LEDGER({}), ManualOnlyProvider)
    assert LEDGER.declaration.escalate_after_seconds == {
        FindingKind.STILL_RUNNING: 900,
        FindingKind.MISSING: 120,
    }
    assert declaration_of(LEDGER) is LEDGER.declaration
    assert declaration_of(_ledger) is NOTHING_DECLARED


def test_escalation_defaults_come_from_the_declaration_and_the_config_overrides_them() -> None:
    registry = build_registry(
        {
            "ledger.post": {"provider": "ledger"},
            "ledger.quiet": {"provider": "ledger", "escalate_after_seconds": {"missing": None}},
            "plain.call": {"provider": "plain"},
        },
        {"ledger": LEDGER, "plain": _ledger},
    )
    post = registry.escalation_for("ledger.post")
    assert (post.after_ms(FindingKind.MISSING), post.after_ms(FindingKind.STILL_RUNNING)) == (
        120_000,
        900_000,
    )
    assert registry.escalation_for("ledger.quiet").after_ms(FindingKind.MISSING) is None
    assert registry.escalation_for("plain.call").windows_ms == {}
    assert registry.declarations == {"ledger": LEDGER.declaration, "plain": NOTHING_DECLARED}


def test_one_code_has_one_meaning_across_providers() -> None:
    same = ProviderDeclaration((Reason("ledger_gap", "the ledger skips this entry"),))
    assert reason_catalogue({"a": LEDGER.declaration, "b": same}).get("ledger_gap") is not None
    other = ProviderDeclaration((Reason("ledger_gap", "the ledger skips it", True),))
    with pytest.raises(ConfigError, match="'ledger_gap' is declared differently by provider a"):
        reason_catalogue({"a": LEDGER.declaration, "b": other})
    # The resolver's own codes keep their meaning too.
    with pytest.raises(ConfigError, match="'timeout' is declared differently by the resolver"):
        reason_catalogue({"a": ProviderDeclaration((Reason("timeout", "it was slow"),))})
    twice = declare(reasons=(Reason("ledger_gap", "the ledger skips it", True),))(_ledger)
    with pytest.raises(ConfigError, match="ledger_gap"):
        build_registry({"x": {"provider": "a"}, "y": {"provider": "b"}}, {"a": LEDGER, "b": twice})


def test_the_installed_catalogue_holds_the_resolver_s_and_every_built_in_s_reasons() -> None:
    catalogue = installed_reasons()
    document = catalogue.public_document()
    for reason in CORE_REASONS:
        assert document[reason.code]["sentence"] == reason.sentence
    assert {c for c, r in document.items() if r["suggests_tampering"]} >= {
        "unknown_kid",
        "bad_signature",
        "digest_mismatch",
        "identity_mismatch",
    }
    assert document["no_install_record"] == {
        "sentence": "the package was staged or published, but the installer never wrote its "
        "install record",
        "suggests_tampering": False,
    }
    assert document[ProviderFailure.TIMEOUT.value]["suggests_tampering"] is False
    declared = installed_declarations()
    assert declared["package_install"].escalate_after_seconds == {FindingKind.MISSING: 3600}
    assert declared["internal_mutation"].escalate_after_seconds == {}


ROOT = Path(__file__).resolve().parents[2]
# The demo is an adopter of the built-ins: its providers.yaml names them as any installation's
# configuration does. Everything the resolver itself runs (core, database, API, console, SDK,
# toolkit) finds them by entry point and learns what they mean from their declarations.
ADOPTERS = ("resolver/demo/",)


def _built_in_names() -> set[str]:
    product = distribution("approved-action-resolver")
    return {ep.name for ep in product.entry_points if ep.group == ENTRY_POINT_GROUP}


def namings(root: Path, names: set[str]) -> list[str]:
    """`path:line: name` for every word in a text file under `root/resolver` that is a
    provider name; a name that is also a capability's value (`manual_only`) counts everywhere
    but where the capability is defined."""
    capabilities = {c.value for c in Capability}
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, names))) + r")\b")
    found = []
    for path in sorted((root / "resolver").rglob("*")):
        relative = path.relative_to(root).as_posix()
        if not path.is_file() or "__pycache__" in relative or relative.startswith(ADOPTERS):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in pattern.findall(line):
                if name in capabilities and relative == "resolver/core/provider.py":
                    continue
                found.append(f"{relative}:{number}: {name}")
    return found


def test_no_file_under_resolver_names_a_built_in_provider(tmp_path: Path) -> None:
    names = _built_in_names()
    assert {"internal_mutation", "package_install", "http_receipt", "manual_only"} <= names
    assert namings(ROOT, names) == []
    # The check sees a planted naming, in code or in a console script.
    planted = tmp_path / "resolver" / "human" / "console"
    planted.mkdir(parents=True)
    (planted / "app.js").write_text('const SLOW = {"http_receipt": 3600};\n')
    (tmp_path / "resolver" / "core").mkdir()
    (tmp_path / "resolver" / "core" / "escalation.py").write_text("X = 'package_install'\n")
    assert namings(tmp_path, names) == [
        "resolver/core/escalation.py:1: package_install",
        "resolver/human/console/app.js:1: http_receipt",
    ]
