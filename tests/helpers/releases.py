"""Databases as an earlier release left them, for the upgrade and downgrade tests.

tests/upgrade/release-0.1.0.sql is a database release 0.1.0's own code migrated and filled
(tests/upgrade/make_release_dump.py says how): its tables, functions, triggers and privileges,
and rows in every table, stamped with the revision id that release used.
tests/upgrade/release-0.2.0.sql and release-0.3.0.sql are each one that release's own
`resolver migrate` built and its demo filled (tests/upgrade/make_demo_dump.py): the schema
every installation of it has, with the rows a crash recovery writes.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
UPGRADE_DIR = Path(__file__).parents[1] / "upgrade"
RELEASE_0_1_0 = UPGRADE_DIR / "release-0.1.0.sql"
# The audit facts its prune removed with `--include-audit`: `audit verify --export` walks them.
RELEASE_0_1_0_EXPORT = UPGRADE_DIR / "release-0.1.0.export.jsonl"
RELEASE_0_1_0_STAMP = "0018_late_expire_index"
RELEASE_0_2_0 = UPGRADE_DIR / "release-0.2.0.sql"
RELEASE_0_2_0_STAMP = "0002_schema_0_2_0"
# The commit whose public surface was recorded as 0.2.0's (tests/snapshots/public_api.released.json).
RELEASE_0_2_0_COMMIT = "67d83c4"
RELEASE_0_3_0 = UPGRADE_DIR / "release-0.3.0.sql"
RELEASE_0_3_0_STAMP = "0003_schema_0_3_0"
# The commit that released 0.3.0 (its version everywhere, its surface recorded as released).
RELEASE_0_3_0_COMMIT = "dfc6356"


def load_release_0_1_0(url: str, schema: str = "public") -> None:
    """Restore the 0.1.0 database into `url`'s `schema` (which must exist and be empty)."""
    load_release(RELEASE_0_1_0, url, schema)


def load_release(dump: Path, url: str, schema: str = "public") -> None:
    """Restore a release's database from its `dump` into `url`'s `schema` (which must exist
    and be empty)."""
    script = dump.read_text(encoding="utf-8")
    if schema != "public":
        script = script.replace("public.", f"{schema}.")
        script = script.replace("'search_path', 'public'", f"'search_path', '{schema}'")
    with psycopg.connect(url) as conn:
        conn.execute(script)  # type: ignore[call-overload]


def table_rows(url: str, tables: list[str] | None = None) -> dict[str, list[Any]]:
    """Each table's rows as JSON, in a stable order (the columns a table had in 0.1.0 compare
    equal across an upgrade when `tables` names only those)."""
    with psycopg.connect(url) as conn:
        names = tables or [
            name
            for (name,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                " AND tablename NOT IN ('alembic_version', 'resolver_definitions') ORDER BY 1"
            ).fetchall()
        ]
        return {
            name: [
                row
                for (row,) in conn.execute(
                    psycopg.sql.SQL("SELECT to_jsonb(t) FROM {} AS t ORDER BY 1").format(
                        psycopg.sql.Identifier(name)
                    )
                ).fetchall()
            ]
            for name in names
        }


def release_files(commit: str, paths: Sequence[str], into: Path) -> Path:
    """`paths` as the release at `commit` shipped them, extracted under `into` from this
    repository's own history. Skips, saying why, without git or without that history (a
    shallow clone)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    known = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if known.returncode != 0:
        pytest.skip(f"this checkout has no history back to the release's commit {commit}")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, *paths], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into
