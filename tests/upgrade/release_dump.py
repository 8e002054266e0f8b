"""The one way a release's database becomes a file the upgrade tests restore: pg_dump's plain
SQL with INSERTs, every check spelled as that release's migrations wrote it, and a first line
saying what made it. Used by the scripts beside it, each run with a checkout of its release
first on the path; not part of the suite."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import psycopg

from resolver.db import migrate

_CHECK = re.compile(r"CONSTRAINT (\w+)\s+CHECK \(")
_NO_SEARCH_PATH = "SELECT pg_catalog.set_config('search_path', '', false);"
_SEARCH_PATH = "SELECT pg_catalog.set_config('search_path', 'public', false);"


def write_dump(url: str, out: Path, heading: str) -> None:
    """Dump `url` into `out` under a `-- heading` line, then print each table's row count."""
    dump = subprocess.run(
        ["pg_dump", "--inserts", "--no-owner", "--no-comments", url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # Plain SQL a driver can send as one script: no psql meta-command (\\restrict), no COPY.
    lines = [line for line in dump.splitlines() if not line.startswith("\\")]
    # Checks as that release's migrations wrote them: pg_dump prints each check's parsed form,
    # which PostgreSQL parses back into a different (equivalent) tree.
    text = _source_checks("\n".join(lines))
    # Those checks name the functions they call as the migrations did, unqualified: the
    # script resolves them in the schema it restores into, as the migrations did.
    text = text.replace(_NO_SEARCH_PATH, _SEARCH_PATH, 1)
    out.write_text(f"-- {heading}\n{text}\n", encoding="utf-8")
    with psycopg.connect(url) as conn:
        for (table,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        ).fetchall():
            count = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
            assert count is not None
            print(f"{table}: {count[0]}")


def _source_checks(dump: str) -> str:
    source: dict[str, str] = {}
    for path in sorted((Path(migrate.__file__).parent / "migrations" / "sql").glob("*.up.sql")):
        text = path.read_text(encoding="utf-8")
        for match in _CHECK.finditer(text):
            source[match.group(1)] = text[match.end() - 1 : _closing(text, match.end() - 1)]
    out, pos = [], 0
    while (match := _CHECK.search(dump, pos)) is not None:
        end = _closing(dump, match.end() - 1)
        name = match.group(1)
        out.append(dump[pos : match.end() - 1] + source.get(name, dump[match.end() - 1 : end]))
        pos = end
    return "".join(out) + dump[pos:]


def _closing(text: str, start: int) -> int:
    """The index after the parenthesis that closes the one at `start` (quotes skipped)."""
    depth, i = 0, start
    while True:
        ch = text[i]
        if ch == "'":
            i = text.index("'", i + 1)
            while text.startswith("''", i):
                i = text.index("'", i + 2)
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
