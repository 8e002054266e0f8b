"""A hostile but running database: other clients and the server's own limits, as faults.

Each fault is what an operator or a neighbour does to a shared PostgreSQL, not a crash:
every connection slot taken by other clients, a forgotten `SELECT ... FOR UPDATE` in psql,
a session idle in a transaction for the whole run (vacuum cannot remove a dead row version),
the WAL volume full. Each returns one line saying what it did and what happened meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from resolver.demo import localpg

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


class IdleInTransaction:
    """A session with a transaction id, idle for the whole run: the xmin horizon stays put,
    so no dead row version written after it can be vacuumed away. `ensure` opens it again
    after the server restarted (a full WAL volume crashes it)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._conn: psycopg.Connection[dict[str, Any]] | None = None

    def ensure(self) -> None:
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return
        self._conn = _connect(self._url)
        self._conn.execute("SELECT txid_current()")

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()


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


WAL_VOLUME_MB = 48
WAL_SETTINGS = {
    # 1 MB segments on a 48 MB volume: a new segment is needed every megabyte of WAL, and
    # checkpoints keep the volume mostly free until the suite fills it.
    "min_wal_size": "4MB",
    "max_wal_size": "16MB",
    # Every slot can be taken by other clients (the suite's clients are all superusers).
    "superuser_reserved_connections": "0",
}


class WalVolume:
    """`pg_wal` of a new private cluster on a small tmpfs, so that the suite can fill it."""

    def __init__(self, data_dir: Path, mount: Path) -> None:
        self.mount = mount
        self._ballast = mount / "ballast"
        bin_dir = localpg.find_bin_dir()
        assert bin_dir is not None
        run_as = "postgres" if os.geteuid() == 0 else None
        mount.mkdir(parents=True, exist_ok=True)
        size = f"size={WAL_VOLUME_MB}m,mode=0700"
        _sh(["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(mount)])
        data_dir.mkdir(parents=True, exist_ok=True)
        workdir = data_dir.parent
        workdir.chmod(workdir.stat().st_mode | 0o001)  # the server's user passes through
        if run_as:
            _sh(["chown", f"{run_as}:{run_as}", str(mount), str(data_dir)])
        cluster = localpg.Cluster(data_dir, 0, bin_dir, run_as)
        localpg.run_tool(
            cluster,
            [
                "initdb",
                "-D",
                str(data_dir),
                "--waldir",
                str(mount / "pg_wal"),
                "--wal-segsize=1",
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-instructions",
            ],
        )
        with (data_dir / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{k} = '{v}'\n" for k, v in WAL_SETTINGS.items())

    @staticmethod
    def available() -> bool:
        """Mounting a tmpfs needs CAP_SYS_ADMIN (root in a privileged container)."""
        status = Path("/proc/self/status").read_text()
        cap_eff = next(line for line in status.splitlines() if line.startswith("CapEff"))
        return bool(int(cap_eff.split()[1], 16) & (1 << 21))

    def fill(self) -> None:
        # dd stops at ENOSPC: the volume is then full to the last block.
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={self._ballast}", "bs=256k"],
            capture_output=True,
            check=False,
        )

    def free(self) -> None:
        self._ballast.unlink(missing_ok=True)

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount)], capture_output=True, check=False)


def wal_full(volume: WalVolume, url: str, seconds: float, revive: Callable[[], None]) -> str:
    """Fill the WAL volume, write until PostgreSQL refuses (a probe table of our own), keep
    it full `seconds`, give the space back and `revive` the server if it stopped."""
    volume.fill()
    started = time.monotonic()
    refused: str | None = None
    while refused is None and time.monotonic() - started < 30:
        try:
            with _connect(url, autocommit=True) as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS wal_probe (x int)")
                conn.execute("INSERT INTO wal_probe SELECT generate_series(1, 20000)")
        except psycopg.Error as exc:
            refused = type(exc).__name__
    failed_after = time.monotonic() - started
    time.sleep(seconds)  # the fault itself: the volume stays full
    volume.free()
    revive()
    return (
        f"WAL volume full: a write failed after {failed_after:.1f}s ({refused or 'never'}), "
        f"volume kept full {seconds:.1f}s, space returned"
    )


def _sh(argv: list[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True)
