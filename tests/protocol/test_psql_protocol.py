"""The executor protocol proven from outside Python: psql scripts against real PostgreSQL and
a real `resolver run` process. Python only orchestrates: every check is in the SQL files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from resolver.db.dsn import libpq_dsn

HERE = Path(__file__).resolve().parent
KID = "psql-k1"
SECRET = "5a" * 32

pytestmark = pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")


def psql(database_url: str, script: str, **variables: str) -> str:
    args = [
        "psql",
        libpq_dsn(database_url),
        "-X",
        "-v",
        "ON_ERROR_STOP=1",
        "-f",
        str(HERE / script),
    ]
    for name, value in variables.items():
        args[2:2] = ["-v", f"{name}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def resolver_run_once(database_url: str, config: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    env |= {
        "RESOLVER_DATABASE_URL": database_url,
        "RESOLVER_CONFIG": str(config),
        "RESOLVER_RECEIPT_KEYS": f"{KID}={SECRET}",
    }
    done = subprocess.run(
        [sys.executable, "-m", "resolver", "run", "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_lifecycle_and_every_refusal_with_psql_alone(database_url: str) -> None:
    out = psql(database_url, "01_lifecycle.sql", run=f"p{uuid.uuid4().hex[:8]}")
    assert "lifecycle: all checks passed" in out
    assert out.count("ok refused") == 13


def test_the_fewest_transactions_the_protocol_allows_with_psql_alone(database_url: str) -> None:
    out = psql(
        database_url, "04_two_transactions.sql", run=f"p{uuid.uuid4().hex[:8]}", kid=KID,
        secret=SECRET,
    )  # fmt: skip
    assert "two transactions: all checks passed" in out
    assert out.count("ok refused") == 1


def test_crash_recovery_by_resolver_run_then_late_completions(
    database_url: str, tmp_path: Path
) -> None:
    run = f"p{uuid.uuid4().hex[:8]}"
    config = tmp_path / "providers.yaml"
    config.write_text("action_types:\n  proto.internal: {provider: internal_mutation}\n")
    assert "crash: all checks passed" in psql(
        database_url, "02_crash.sql", run=run, kid=KID, secret=SECRET
    )
    log = resolver_run_once(database_url, config)
    assert '"verified_succeeded": 1' in log and '"missing": 1' in log
    assert "after recovery: all checks passed" in psql(
        database_url, "03_after_recovery.sql", run=run
    )
