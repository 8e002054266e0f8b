"""docs/deployment.md stays true to the files it describes."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deployment.md"
GRANTS = ROOT / "resolver" / "db" / "grants.sql"


def statements(sql: str) -> set[str]:
    """Top-level GRANT/REVOKE statements, whitespace-normalised (DO blocks excluded)."""
    without_comments = re.sub(r"--[^\n]*", "", sql)
    without_blocks = re.sub(r"DO \$\$.*?\$\$;", "", without_comments, flags=re.S)
    found = (" ".join(s.split()) for s in without_blocks.split(";"))
    return {s for s in found if s.startswith(("GRANT", "REVOKE"))}


def doc_sql_blocks() -> str:
    return "\n".join(re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S))


def test_the_doc_shows_exactly_the_grants_the_file_runs() -> None:
    # The resolver's grants.sql and the built-in providers' own, which --grants applies after.
    files = [GRANTS, *sorted((ROOT / "providers").glob("*/grants.sql"))]
    in_doc = statements(doc_sql_blocks())
    in_file = set().union(*(statements(path.read_text("utf-8")) for path in files))
    assert in_doc, "the doc lists no GRANT statement"
    assert in_doc == in_file, {"only in doc": in_doc - in_file, "only in file": in_file - in_doc}


def test_relative_links_of_the_doc_resolve() -> None:
    links = re.findall(r"\]\((\.\./[^)#]+)\)", DOC.read_text(encoding="utf-8"))
    assert links
    missing = [link for link in links if not (DOC.parent / link).resolve().exists()]
    assert not missing, missing


def test_readme_lists_the_deployment_doc() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/deployment.md)" in readme


def test_the_doc_names_every_role_the_sql_creates() -> None:
    roles = set(
        re.findall(r"CREATE ROLE (\w+)", (ROOT / "deploy/sql/roles.sql").read_text("utf-8"))
    )
    assert roles and all(f"`{role}`" in DOC.read_text(encoding="utf-8") for role in roles)


def test_the_install_section_gives_each_face_its_own_role() -> None:
    """Section 3 says which role each face logs in as, as the chart wires it
    (tests/deploy/test_chart_api.py): the replicas as resolver_runtime, the API as
    resolver_api, with a Secret of each to create; the API never with the runtime role."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## 3. Install with Helm") : text.index("\n## 4.")]
    secrets = dict(
        re.findall(
            r"create secret generic (\S+) \\\n\s+--from-literal=url='postgresql://(\w+):", section
        )
    )
    assert secrets.get("resolver-runtime-db") == "resolver_runtime"
    assert secrets.get("resolver-api-db") == "resolver_api"
    api = section[section.index("**The manual-resolution API**") :].split("\n\n", 1)[0]
    assert "`resolver_api`" in api and "api.database.existingSecret" in api
    assert "runtime role:" not in api and "uses the runtime role" not in api
