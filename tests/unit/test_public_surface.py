"""The public surface against its committed record (docs/versioning.md): a change is either
recorded (`python -m tools.public_surface --write`) and named in CHANGELOG.md's Unreleased
section, or this fails. The version lives in one place."""

from __future__ import annotations

import importlib.metadata
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

import resolver
from tools import public_surface as ps

ROOT = Path(__file__).resolve().parents[2]


def test_the_surface_is_the_committed_snapshot(database_url: str) -> None:
    current = ps.collect(database_url)
    changed = ps.differences(ps.load(ps.SNAPSHOT), current)
    assert changed == [], (
        f"the public surface changed ({len(changed)}: {changed[:10]}); review it, name each "
        f"change in CHANGELOG.md's Unreleased section, and regenerate: {ps.REGENERATE}"
    )


def test_every_change_since_the_release_is_in_the_changelog() -> None:
    missing = ps.unexplained(
        ps.load(ps.RELEASED), ps.load(ps.SNAPSHOT), ps.CHANGELOG.read_text(encoding="utf-8")
    )
    assert missing == [], "CHANGELOG.md's Unreleased section must name: " + ", ".join(
        f"`{ps.mention(key)}` ({key})" for key in missing
    )


def test_the_record_sees_every_kind_of_surface() -> None:
    kinds = {key.split(":", 1)[0] for key in ps.load(ps.SNAPSHOT)}
    assert kinds == {
        "python",
        "http",
        "http-schema",
        "sql",
        "sqlstate",
        "metric",
        "alert",
        "chart",
        "env",
        "provider",
        "node",
    }
    assert "sql:resolver_receipt_write" in " ".join(ps.load(ps.SNAPSHOT))


CHANGELOG_WITHOUT = "# Changelog\n\n## Unreleased\n\n### Upgrading\n\n## 0.1.0\n\n- `Finding`\n"


@pytest.mark.parametrize(
    ("plant", "name"),
    [
        # a changed signature, a removed name, an added one, in each kind of surface
        (
            lambda s: s.__setitem__("python:resolver.evidence.receipt_finding", "def (x)"),
            "receipt_finding",
        ),
        (lambda s: s.pop("python:resolver.evidence.Finding"), "Finding"),
        (
            lambda s: s.__setitem__("python:resolver.executor.run_everything", "def ()"),
            "run_everything",
        ),
        (
            lambda s: s.__setitem__("http:POST /v1/dispatches/{dispatch_id}/notes", "{}"),
            "/v1/dispatches/{dispatch_id}/notes",
        ),
        (
            lambda s: s.__setitem__("sql:resolver_receipt_write(p_receipt json)", "RETURNS void"),
            "resolver_receipt_write",
        ),
        (lambda s: s.pop("sqlstate:RS002"), "RS002"),
        (lambda s: s.__setitem__("metric:resolver_cycles", "gauge []"), "resolver_cycles"),
        (lambda s: s.__setitem__("chart:api.replicas", '{"type": "string"}'), "api.replicas"),
        (lambda s: s.__setitem__("env:RESOLVER_PAGE_SIZE", "int = 1"), "RESOLVER_PAGE_SIZE"),
        (lambda s: s.__setitem__("node:verifyEverything", "function"), "verifyEverything"),
    ],
)
def test_a_planted_change_fails_until_the_changelog_names_it(plant, name: str) -> None:
    released = ps.load(ps.RELEASED)
    planted = dict(released)
    plant(planted)
    # Not named: the check fails and says what to name. A mention in an older release's
    # section does not count.
    (key,) = ps.unexplained(released, planted, CHANGELOG_WITHOUT.replace("`Finding`", f"`{name}`"))
    assert ps.mention(key) == name
    # One line naming it under Unreleased, and it passes.
    named = CHANGELOG_WITHOUT.replace("### Upgrading\n", f"### Upgrading\n\n- `{name}` changed\n")
    assert ps.unexplained(released, planted, named) == []


def test_an_unchanged_surface_needs_no_line() -> None:
    released = ps.load(ps.RELEASED)
    assert ps.unexplained(released, dict(released), CHANGELOG_WITHOUT) == []


def test_no_released_protocol_signature_changed_in_place() -> None:
    """A protocol function's signature of the last release is still there, unless the
    Versioning table of docs/executor-protocol.md kept it beside its `_v2` for a release."""
    released = json.loads(ps.RELEASED.read_text())
    allowed = ps.droppable(released["version"])
    assert ps.removed_signatures(released["surface"], ps.load(ps.SNAPSHOT), allowed) == []


def test_an_in_place_change_of_a_released_signature_is_caught() -> None:
    released = ps.load(ps.RELEASED)
    (old,) = [k for k in released if k.startswith("sql:resolver_execution_renew(")]
    changed = {k: v for k, v in released.items() if k != old}
    changed[old.replace("p_lease_ms bigint", "p_lease_ms integer")] = released[old]
    assert ps.removed_signatures(released, changed, frozenset()) == [old]
    # Named in the changelog or not: that is no excuse for a signature.
    assert ps.removed_signatures(released, changed, ps.droppable("0.1.0")) == [old]
    # Kept beside its replacement for a release already out, it may go.
    assert ps.removed_signatures(released, changed, frozenset({"resolver_execution_renew"})) == []


def test_the_docs_spell_every_protocol_signature_as_the_database() -> None:
    """docs/executor-protocol.md's code blocks are the catalog's signatures (arguments,
    defaults, results), docs/outcomes.md's table the feed's arguments, and every function
    the executor may call is in one of them, spelt as the database has it."""
    catalog = ps.catalog_signatures(ps.load(ps.SNAPSHOT))
    protocol = ps.documented_signatures()
    assert {k: catalog.get(k) for k in protocol} == protocol
    assert set(protocol) | ps.documented_argument_lists() == set(catalog)
    named = {key[4:].split("(", 1)[0] for key in catalog}
    assert named == set(ps.protocol_function_names())


def test_the_version_lives_in_one_place() -> None:
    version = resolver.__version__
    assert importlib.metadata.version("approved-action-resolver") == version
    chart = yaml.safe_load((ROOT / "helm" / "approved-action-resolver" / "Chart.yaml").read_text())
    assert chart["appVersion"] == version
    node = json.loads((ROOT / "sdk" / "node" / "package.json").read_text())
    assert node["version"] == version
    kustomize = (ROOT / "deploy" / "kustomize" / "base" / "kustomization.yaml").read_text()
    assert re.search(rf"newTag: {re.escape(version)}\b", kustomize)
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert re.search(rf"^ARG VERSION={re.escape(version)}$", dockerfile, re.M)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "resolver.__version__"}
    assert ps.load(ps.SNAPSHOT) and json.loads(ps.SNAPSHOT.read_text())["version"] == version
