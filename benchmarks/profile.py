"""`--profile-seconds`: where one replica's CPU goes during a drain, from py-spy.

py-spy samples the replica from outside (`--gil`: only the thread holding the GIL, so the
samples are CPU, not waiting; `--nonblocking`: the process is never paused), writes the
collapsed stacks, and the summary is each frame's share of the samples it appears in. A
profiled run costs the profiled replica a little CPU: read its figures beside an unprofiled
run, not instead of one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SAMPLES_PER_SECOND = 200
# "func (path/to/file.py:123)" -> "func (file.py)": one entry per function, not per line.
_LOCATION = re.compile(r" \((?:[^()]*/)?([^/()]+?)(?::\d+)?\)$")


def py_spy() -> str | None:
    """py-spy next to this interpreter (a venv's bin is often not on PATH), else on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


@dataclass(slots=True)
class Profile:
    """One py-spy recording of one process, started once the drain's first resolution
    appears."""

    seconds: float
    out: Path
    proc: subprocess.Popen[bytes] | None = field(default=None)

    def start(self, pid: int) -> None:
        command = py_spy()
        if command is None or self.proc is not None:
            return
        self.proc = subprocess.Popen(
            [
                command,
                "record",
                "--gil",
                "--nonblocking",
                "--rate",
                str(SAMPLES_PER_SECOND),
                "--duration",
                str(max(1, round(self.seconds))),
                "--pid",
                str(pid),
                "--format",
                "raw",
                "--output",
                str(self.out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def finish(self, top: int = 30) -> list[tuple[float, str]]:
        """Wait for the recording (the drain may end first: py-spy stops when the process
        does) and summarise it."""
        if self.proc is None:
            return []
        try:
            self.proc.wait(timeout=self.seconds + 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return summarise(self.out, top) if self.out.exists() else []


def summarise(raw: Path, top: int) -> list[tuple[float, str]]:
    """(share of samples, frame) for the frames found in the most samples (inclusive)."""
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        for frame in {_LOCATION.sub(r" (\1)", f) for f in stack.split(";")}:
            inclusive[frame] += n
    if total == 0:
        return []
    return [(n / total, frame) for frame, n in inclusive.most_common(top)]
