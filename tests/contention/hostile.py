"""A hostile but running database: other clients and the server's own limits, as faults.

Each fault is what an operator or a neighbour does to a shared PostgreSQL, not a crash:
every connection slot taken by other clients, a forgotten `SELECT ... FOR UPDATE` in psql,
a session idle in a transaction for the whole run (vacuum cannot remove a dead row version),
the WAL volume full. Each returns one line saying what it did and what happened meanwhile.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from resolver import localpg

HOSTILE_APP = "hostile-client"
"""application_name of every hostile session (never `resolver%`: the suite's own
terminations leave them alone)."""


def _connect(url: str, **kwargs: Any) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(
        url, row_factory=dict_row, connect_timeout=3, application_name=HOSTILE_APP, **kwargs
    )


def settled_between(url: str, since_ms: int) -> int:
    """Dispatches settled (resolution or completion) since `since_ms` (database clock)."""
    with _connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM approved_action_recovery_controls"
            " WHERE status = 'resolved' AND closed_at_ms >= %s",
            (since_ms,),
        ).fetchone()
    assert row is not None
    return int(row["n"])


def db_now_ms(url: str) -> int:
    with _connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT resolver_now_ms(NULL) AS n").fetchone()
    assert row is not None
    return int(row["n"])


def hold_row_locks(url: str, seconds: float, stop: threading.Event, count: int = 8) -> str:
    """An operator's forgotten `SELECT ... FOR UPDATE`: the executions of some armed
    dispatches and the controls of others, locked for `seconds`, then rolled back."""
    since = db_now_ms(url)
    with _connect(url) as conn:
        executions = conn.execute(
            "SELECT e.dispatch_id FROM approved_action_executions AS e"
            " JOIN approved_action_recovery_controls AS c USING (dispatch_id)"
            " WHERE c.status = 'armed' ORDER BY c.next_scan_at_ms LIMIT %s FOR UPDATE OF e",
            (count,),
        ).fetchall()
        controls = conn.execute(
            "SELECT dispatch_id FROM approved_action_recovery_controls"
            " WHERE status = 'armed' AND dispatch_id <> ALL(%s)"
            " ORDER BY next_scan_at_ms LIMIT %s FOR UPDATE",
            ([r["dispatch_id"] for r in executions], count),
        ).fetchall()
        stop.wait(seconds)  # the operator went to lunch
        conn.rollback()
    settled = settled_between(url, since)
    return (
        f"row locks: {len(executions)} executions and {len(controls)} controls held "
        f"{seconds:.1f}s; {settled} other dispatches settled meanwhile"
    )


@contextmanager
def idle_in_transaction(url: str) -> Iterator[None]:
    """A session with a transaction id, idle for the whole run: the xmin horizon stays put,
    so no dead row version written after it can be vacuumed away."""
    with _connect(url) as conn:
        conn.execute("SELECT txid_current()")
        yield
        conn.rollback()


def dead_rows(url: str) -> int:
    with _connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(n_dead_tup), 0) AS n FROM pg_stat_user_tables"
            " WHERE relname IN ('approved_action_recovery_controls', 'approved_action_executions')"
        ).fetchone()
    assert row is not None
    return int(row["n"])


def exhaust_connections(url: str, seconds: float, stop: threading.Event) -> str:
    """Every free connection slot taken by other clients for `seconds`; slots that free up
    (a terminated or closed resolver connection) are taken again at once."""
    held: list[psycopg.Connection[Any]] = []
    refused = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not stop.is_set():
            try:
                held.append(_connect(url, autocommit=True))
            except psycopg.OperationalError:
                refused += 1
                stop.wait(0.05)  # full: look again for a slot that freed up
        return f"connections: {len(held)} slots held by other clients {seconds:.1f}s"
    finally:
        for conn in held:
            with contextlib.suppress(psycopg.Error):
                conn.close()


class WalVolume:
    """`pg_wal` of a private cluster on a small tmpfs, so that the suite can fill it."""

    def __init__(self, cluster: localpg.Cluster, mount: Path, size_mb: int) -> None:
        self.mount = mount
        mount.mkdir(parents=True, exist_ok=True)
        _sh(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(mount)])
        wal = cluster.data_dir / "pg_wal"
        target = mount / "pg_wal"
        _sh(["cp", "-a", str(wal), str(target)])
        _sh(["rm", "-rf", str(wal)])
        wal.symlink_to(target)
        if cluster.run_as:
            _sh(["chown", "-R", f"{cluster.run_as}:{cluster.run_as}", str(mount)])
        self._ballast = mount / "ballast"

    @staticmethod
    def available() -> bool:
        probe = Path("/proc/self/status").read_text()
        cap_eff = next(line for line in probe.splitlines() if line.startswith("CapEff"))
        cap_sys_admin = 1 << 21
        return bool(int(cap_eff.split()[1], 16) & cap_sys_admin)

    def fill(self) -> None:
        # dd stops at ENOSPC: the volume is then full to the last block.
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={self._ballast}", "bs=1M"],
            capture_output=True,
            check=False,
        )

    def free(self) -> None:
        self._ballast.unlink(missing_ok=True)

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount)], capture_output=True, check=False)


def _sh(argv: list[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True)
