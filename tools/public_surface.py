"""The public surface (docs/versioning.md) as one flat, comparable record.

    python -m tools.public_surface                 # exit 1 when the snapshot is stale
    python -m tools.public_surface --write         # rewrite tests/snapshots/public_api.json
    python -m tools.public_surface --write --release   # also make it the released record

Each entry is `kind:name` -> a description that changes when the thing changes: a Python
name's signature, an HTTP operation's parameters and responses, an API schema's fields, a SQL
protocol function's arguments and result, a metric's type and labels, an alert, a chart value's
schema, an environment setting's type and default, a Node SDK export. The SQL entries are read
from the catalog of a freshly migrated database: `--database-url` names a server (any database
on it; a scratch database is created and dropped), else RESOLVER_TEST_DATABASE_URL, else the
test suite's embedded server.

`unexplained(released, current, changelog)` is the release check: every entry that differs
from the released record must be named in the changelog's Unreleased section.
"""

from __future__ import annotations

import argparse
import enum
import importlib
import inspect
import json
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "snapshots" / "public_api.json"
RELEASED = ROOT / "tests" / "snapshots" / "public_api.released.json"
CHANGELOG = ROOT / "CHANGELOG.md"
PYTHON_SURFACES = (
    "resolver.evidence",
    "resolver.executor",
    "resolver.evidence.contract",
    "resolver.outcomes",
    "resolver.integrations.langgraph",
)
REGENERATE = "python -m tools.public_surface --write"

Surface = dict[str, str]


# -- Python --------------------------------------------------------------------------------


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def _member(value: Any) -> str | None:
    if isinstance(value, property):
        return "property"
    if isinstance(value, classmethod | staticmethod):
        return f"{type(value).__name__} {_signature(value.__func__)}"
    if inspect.isfunction(value):
        return f"def {_signature(value)}"
    return None


def describe(obj: Any) -> str:
    """What a Python public name promises, as text that changes when the promise does."""
    if inspect.isclass(obj):
        bases = ", ".join(b.__qualname__ for b in obj.__bases__ if b is not object)
        if issubclass(obj, enum.Enum):
            return f"enum({bases}) " + ", ".join(f"{m.name}={m.value!r}" for m in obj)
        parts: list[str] = []
        if issubclass(obj, msgspec.Struct):
            hints = inspect.get_annotations(obj)
            for field in msgspec.structs.fields(obj):
                default = "" if field.required else f" = {field.default!r}"
                parts.append(f"{field.name}: {hints.get(field.name, '?')}{default}")
        else:
            hints = inspect.get_annotations(obj)
            parts += [f"{k}: {v}" for k, v in hints.items() if not k.startswith("_")]
            if "__init__" in vars(obj):
                parts.append(f"__init__{_signature(obj.__init__)}")
        for name, value in sorted(vars(obj).items()):
            if not name.startswith("_") and (text := _member(value)) is not None:
                parts.append(f"{name} {text}")
        return f"class({bases}) " + "; ".join(parts)
    if inspect.isfunction(obj):
        return f"def {_signature(obj)}"
    if isinstance(obj, int | str | float | bool):
        return f"{type(obj).__name__} {obj!r}"
    return repr(obj) if type(obj).__module__ == "typing" else type(obj).__name__


def python_surface() -> Surface:
    found: Surface = {}
    for module_name in PYTHON_SURFACES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            found[f"python:{module_name}.{name}"] = describe(getattr(module, name))
    return found


# -- HTTP API ------------------------------------------------------------------------------

_PROSE = frozenset({"description", "title", "summary", "example", "examples"})


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items()) if k not in _PROSE}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return value


def http_surface(document: Mapping[str, Any]) -> Surface:
    found: Surface = {}
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            shape = {
                "parameters": _shape(operation.get("parameters", [])),
                "requestBody": _shape(operation.get("requestBody")),
                "responses": _shape(operation.get("responses", {})),
            }
            found[f"http:{method.upper()} {path}"] = json.dumps(shape, sort_keys=True)
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        found[f"http-schema:{name}"] = json.dumps(_shape(schema), sort_keys=True)
    return found


# -- SQL protocol --------------------------------------------------------------------------


def protocol_function_names() -> list[str]:
    """The functions grants.sql gives the executor role: the SQL protocol."""
    grants = (ROOT / "resolver" / "db" / "grants.sql").read_text(encoding="utf-8")
    listed = re.search(r"p\.proname IN \(([^)]*)\)", grants)
    if listed is None:
        raise SystemExit("grants.sql: the executor's function list was not found")
    return re.findall(r"'(resolver_\w+)'", listed.group(1))


def sql_surface(database_url: str) -> Surface:
    import psycopg

    names = protocol_function_names()
    found: Surface = {}
    with psycopg.connect(database_url) as conn:
        for name, arguments, result in conn.execute(
            """
            SELECT p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid)
            FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
            WHERE p.proname = ANY(%s) ORDER BY 1, 2
            """,
            (names,),
        ):
            found[f"sql:{name}({arguments})"] = f"RETURNS {result}"
        bodies = conn.execute(
            "SELECT string_agg(prosrc, ' ') FROM pg_proc WHERE proname LIKE 'resolver%%'"
        ).fetchone()
    for code in sorted(set(re.findall(r"\bRS\d{3}\b", (bodies or [""])[0] or ""))):
        found[f"sqlstate:{code}"] = "raised"
    missing = set(names) - {key.split(":", 1)[1].split("(")[0] for key in found}
    if missing:
        raise SystemExit(f"not in the migrated database: {sorted(missing)}")
    return found


PROTOCOL_DOC = ROOT / "docs" / "executor-protocol.md"
_SIGNATURE = re.compile(r"(resolver_\w+)\((.*?)\)\s*RETURNS\s+(.+?)(?=\n\s*\n|\Z)", re.S)


def _normalized(text: str) -> str:
    """A signature as the catalog spells it, whatever the layout: casts of defaults gone
    (`NULL::text`), one space at most, none inside brackets."""
    text = re.sub(r"::[a-z ]+?(?=[,)]|$)", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"\s*([(),])\s*", r"\1", text).replace(",", ", ")


def documented_signatures(doc: Path = PROTOCOL_DOC) -> dict[str, str]:
    """Every `resolver_…(…) RETURNS …` of the page's Functions section, as surface entries."""
    text = doc.read_text(encoding="utf-8")
    section = text[text.index("\n## Functions") : text.index("\n## Versioning")]
    found: dict[str, str] = {}
    for block in re.findall(r"```sql\n(.*?)```", section, re.S):
        for name, arguments, result in _SIGNATURE.findall(block):
            found[f"sql:{name}({_normalized(arguments)})"] = f"RETURNS {_normalized(result)}"
    return found


OUTCOMES_DOC = ROOT / "docs" / "outcomes.md"


def documented_argument_lists(doc: Path = OUTCOMES_DOC) -> set[str]:
    """The public functions a page lists in a table by their arguments alone
    (a table row whose first cell is the call, e.g. `resolver_x(p_y text)`), as surface keys."""
    text = doc.read_text(encoding="utf-8")
    return {
        f"sql:{name}({_normalized(arguments)})"
        for name, arguments in re.findall(r"^\| `(resolver_\w+)\((.*?)\)` \|", text, re.M)
    }


def catalog_signatures(surface: Mapping[str, str]) -> dict[str, str]:
    """The SQL protocol entries of a surface, spelt the way `documented_signatures` is."""
    return {
        f"sql:{key[4:].split('(', 1)[0]}({_normalized(key.split('(', 1)[1][:-1])})": (
            f"RETURNS {_normalized(value.removeprefix('RETURNS '))}"
        )
        for key, value in surface.items()
        if key.startswith("sql:")
    }


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def droppable(released_version: str, doc: Path = PROTOCOL_DOC) -> frozenset[str]:
    """Functions the Versioning table kept beside their replacement in a release already out:
    only their old signatures may leave the surface now."""
    text = doc.read_text(encoding="utf-8")
    table = text[text.index("\n## Versioning") :]
    names = set()
    for name, since in re.findall(r"^\| `(resolver_\w+)`[^|]*\| [^|]*\| ([0-9.]+) \|", table, re.M):
        if _version(since) <= _version(released_version):
            names.add(name)
    return frozenset(names)


def removed_signatures(
    released: Mapping[str, str], current: Mapping[str, str], allowed: frozenset[str]
) -> list[str]:
    """SQL protocol signatures of the last release that are gone (changed in place, or
    dropped before their time): a function's signature never changes in place."""
    return sorted(
        key
        for key in released
        if key.startswith("sql:") and key not in current and key[4:].split("(", 1)[0] not in allowed
    )


@contextmanager
def migrated_database(server_url: str | None) -> Iterator[str]:
    from tests.helpers.postgres import DatabaseFactory, test_server

    @contextmanager
    def server() -> Iterator[str]:
        if server_url:
            yield server_url
        else:
            with test_server() as url:
                yield url

    with server() as url:
        factory = DatabaseFactory(url, prefix="resolver_surface")
        try:
            yield factory.create()
        finally:
            factory.close()


# -- metrics, alerts, chart, settings, Node SDK --------------------------------------------


def metric_surface() -> Surface:
    # The registries the alert tests build, with one sample of each labelled family.
    from tests.deploy.test_alert_rules import _api_registry, _registry

    found: Surface = {}
    for registry in (_registry(), _api_registry()):
        for family in registry.collect():
            labels = sorted({k for s in family.samples for k in s.labels} - {"le", "quantile"})
            found[f"metric:{family.name}"] = f"{family.type} {labels}"
    alerts = yaml.safe_load((ROOT / "deploy" / "prometheus" / "resolver-alerts.yml").read_text())
    for group in alerts["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                found[f"alert:{rule['alert']}"] = str(rule.get("labels", {}).get("severity"))
    return found


def _values(schema: Mapping[str, Any], path: str, found: Surface) -> None:
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for key, child in properties.items():
            _values(child, f"{path}.{key}" if path else key, found)
    elif path:
        found[f"chart:{path}"] = json.dumps(_shape(schema), sort_keys=True)


def chart_surface() -> Surface:
    found: Surface = {}
    schema = json.loads(
        (ROOT / "helm" / "approved-action-resolver" / "values.schema.json").read_text()
    )
    _values(schema, "", found)
    return found


def settings_surface() -> Surface:
    from resolver.app.config import OTHER_VARIABLES, Settings

    prefix = Settings.model_config.get("env_prefix", "")
    found: Surface = {}
    for name, field in Settings.model_fields.items():
        env = (field.alias or f"{prefix}{name}").upper()
        if field.default_factory is not None:
            default = "computed"
        else:
            default = "required" if field.is_required() else repr(field.get_default())
        annotation = field.annotation
        kind = annotation.__name__ if isinstance(annotation, type) else str(annotation)
        found[f"env:{env}"] = f"{kind} = {default}"
    for env in OTHER_VARIABLES:
        found[f"env:{env}"] = "read outside the settings"
    return found


def builtin_providers() -> dict[str, str]:
    """The product's own `resolver.providers` entry points (name -> module), from
    pyproject.toml: the test-support distribution's providers are not public."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    points: dict[str, str] = project["entry-points"]["resolver.providers"]
    return {name: target.split(":", 1)[0] for name, target in points.items()}


def provider_surface() -> Surface:
    """Each built-in provider's settings (docs/versioning.md: public): the keys its settings
    model takes, with their type and default."""
    from pydantic import BaseModel

    found: Surface = {}
    for name, module_name in sorted(builtin_providers().items()):
        module = importlib.import_module(module_name)
        models = [
            value
            for value in vars(module).values()
            if inspect.isclass(value)
            and issubclass(value, BaseModel)
            and value.__module__ == module_name
        ]
        if not models:
            found[f"provider:{name}"] = "no settings"
        for model in models:
            for key, field in model.model_fields.items():
                default = "required" if field.is_required() else repr(field.get_default())
                annotation = field.annotation
                kind = annotation.__name__ if isinstance(annotation, type) else str(annotation)
                found[f"provider:{name}.{key}"] = f"{kind} = {default}"
    return found


def node_surface() -> Surface:
    declared = (ROOT / "sdk" / "node" / "index.d.ts").read_text(encoding="utf-8")
    found: Surface = {}
    for kind, name in re.findall(
        r"^export (?:declare )?(class|function|interface|type|const|enum) (\w+)", declared, re.M
    ):
        found[f"node:{name}"] = kind
    return found


# -- the record and the checks -------------------------------------------------------------


def collect(database_url: str) -> Surface:
    document = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))
    surface = {
        **python_surface(),
        **http_surface(document),
        **sql_surface(database_url),
        **metric_surface(),
        **chart_surface(),
        **settings_surface(),
        **provider_surface(),
        **node_surface(),
    }
    return dict(sorted(surface.items()))


def differences(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """The keys added, removed or changed, sorted."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def mention(key: str) -> str:
    """What the changelog must name for a change of `key`: the name, not the kind."""
    kind, name = key.split(":", 1)
    if kind == "python":
        return name.rsplit(".", 1)[1]
    if kind == "http":
        return name.split(" ", 1)[1]
    if kind == "sql":
        return name.split("(", 1)[0]
    if kind == "provider":
        return name.split(".", 1)[0]  # the provider whose settings changed
    return name


def unreleased(changelog: str) -> str:
    """The text of the changelog's Unreleased section."""
    match = re.search(r"^## Unreleased\n(.*?)(?=^## |\Z)", changelog, re.M | re.S)
    return match.group(1) if match else ""


def unexplained(
    released: Mapping[str, str], current: Mapping[str, str], changelog: str
) -> list[str]:
    """Each change since the release whose name the Unreleased section does not mention."""
    text = unreleased(changelog)
    return [k for k in differences(released, current) if mention(k) not in text]


def load(path: Path) -> Surface:
    data: Surface = json.loads(path.read_text(encoding="utf-8"))["surface"]
    return data


def write(path: Path, surface: Surface, note: str) -> None:
    from resolver import __version__

    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"version": __version__, "note": note, "surface": surface}
    path.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.public_surface")
    parser.add_argument("--write", action="store_true", help="rewrite the snapshot")
    parser.add_argument(
        "--release", action="store_true", help="with --write: also the released record"
    )
    parser.add_argument(
        "--database-url", help="a PostgreSQL server to migrate a scratch database on"
    )
    args = parser.parse_args(argv)
    import os

    server = args.database_url or os.environ.get("RESOLVER_TEST_DATABASE_URL")
    with migrated_database(server) as url:
        surface = collect(url)
    if args.write:
        write(SNAPSHOT, surface, f"regenerate: {REGENERATE}")
        if args.release:
            write(RELEASED, surface, "the surface at the last release (--write --release)")
        print(f"wrote {SNAPSHOT.relative_to(ROOT)}")
    elif load(SNAPSHOT) != surface:
        print("\n".join(differences(load(SNAPSHOT), surface)))
        print(f"the snapshot is stale: {REGENERATE}", file=sys.stderr)
        return 1
    missing = unexplained(load(RELEASED), surface, CHANGELOG.read_text(encoding="utf-8"))
    for key in missing:
        print(f"CHANGELOG.md, Unreleased: name `{mention(key)}` ({key} changed)", file=sys.stderr)
    return 1 if missing and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
