"""The `resolver` command run as a child process, the way an operator runs it."""

from __future__ import annotations

import subprocess
import sys

RESOLVER = [sys.executable, "-m", "resolver"]


def run(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RESOLVER, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
