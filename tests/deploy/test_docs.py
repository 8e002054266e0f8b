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
