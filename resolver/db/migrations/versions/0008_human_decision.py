"""The human decision: bounded finding statistics, escalation in the page commit, the audit chain.

Revision ID: 0008_human_decision
Revises: 0006_page_commit
Create Date: 2026-12-01

The SQL is in ../sql/0008_human_decision.up.sql and .down.sql (read and reviewed as SQL).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import op

revision = "0008_human_decision"
down_revision = "0006_page_commit"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent.parent / "sql"


def upgrade() -> None:
    op.execute((_SQL / "0008_human_decision.up.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    op.execute((_SQL / "0008_human_decision.down.sql").read_text(encoding="utf-8"))
    # The page commit as 0006 defined it.
    spec = importlib.util.spec_from_file_location(
        "page_commit_0006", Path(__file__).with_name("0006_page_commit.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.upgrade()
