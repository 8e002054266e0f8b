"""A primary with a streaming standby (private clusters), failed over the hard way.

The failover is what a managed service or an operator (Patroni, CloudNativePG, RDS Multi-AZ)
does when the primary's host dies: every process of the primary is killed with SIGKILL (no
shutdown checkpoint, no last WAL sent), the standby is promoted, and the old primary's data
directory is thrown away and rebuilt as the new standby by a fresh base backup, ready for the
next failover. Under asynchronous replication the standby may not have received the last
commits the primary acknowledged; under synchronous replication (`synchronous_standby_names`
= '*', `synchronous_commit` = on) it has every one of them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from resolver.demo import localpg
from tests.helpers.fault_proxy import FaultProxy

STREAM_LATENCY_SECONDS = 0.02
"""Each chunk of the replication stream waits this long in its proxy: a standby in another
zone, not on the same host."""
STREAM_CUT_SECONDS = 1.0
"""Before the primary dies, its standby is cut off this long (the network trouble that often
comes first). Asynchronous replication keeps acknowledging commits the standby never gets;
synchronous replication makes them wait, and they fail with the primary."""


@dataclass(frozen=True, slots=True)
class FailoverRecord:
    """One failover: when the primary died (host wall clock, ns, the histories' clock) and
    how far the promoted standby had received and replayed its WAL."""

    killed_at_ns: int
    received_lsn: str | None
    replayed_lsn: str | None
    seconds_to_promote: float
    seconds_to_rejoin: float


class ReplicatedPostgres:
    """Two nodes, `node0` and `node1`; `primary` is the index of the read-write one.

    The harness reaches each node through its own proxy pair, so it asks for `ports` after
    every change of topology (a node restarted on a new free port).
    """

    def __init__(self, workdir: Path, *, synchronous: bool) -> None:
        self.synchronous = synchronous
        self._dirs = (workdir / "node0", workdir / "node1")
        self._slots = 0
        primary = localpg.start(self._dirs[0], durable=False)
        # The standby streams through this proxy (its primary_conninfo names the proxy).
        self._stream = FaultProxy(primary.port)
        self.failovers: list[FailoverRecord] = []
        self.nodes: list[localpg.Cluster] = [primary, primary]
        self.primary = 0
        with _admin(primary.url) as conn:
            # See PrivatePostgres: the throwaway cluster turns synchronous_commit off on its
            # command line; the role setting (replicated with the catalog) turns it back on.
            conn.execute("ALTER ROLE postgres SET synchronous_commit = on")
            if synchronous:
                # In postgresql.auto.conf, which every base backup copies: each promoted
                # standby is a synchronous primary in turn.
                conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
                conn.execute("SELECT pg_reload_conf()")
        self.nodes[1] = self._rebuild_standby(1)

    # -- what the harness reads -----------------------------------------------------------

    @property
    def cluster(self) -> localpg.Cluster:
        """The current primary (the single-node harness's `cluster`)."""
        return self.nodes[self.primary]

    @property
    def ports(self) -> tuple[int, int]:
        return (self.nodes[0].port, self.nodes[1].port)

    def admin(self) -> psycopg.Connection[dict[str, Any]]:
        return _admin(self.cluster.url)

    # -- the failover ---------------------------------------------------------------------

    def failover(self) -> FailoverRecord:
        """Cut the standby off for a moment, kill the primary's every process, promote the
        standby, rebuild the old primary as the new standby. Returns what happened."""
        old, new = self.primary, 1 - self.primary
        self._stream.set_blackhole(True)
        time.sleep(STREAM_CUT_SECONDS)  # the fault itself: the standby falls behind
        kill_cluster(self.nodes[old])
        self._stream.reset_all()  # the standby's stream died with the primary
        self._stream.set_blackhole(False)
        killed_at_ns = time.time_ns()
        started = time.monotonic()
        received, replayed = _standby_position(self.nodes[new])
        localpg.run_tool(self.nodes[new], ["pg_ctl", "-D", str(self._dirs[new]), "-w", "promote"])
        _wait_read_write(self.nodes[new])
        self.primary = new
        promoted = time.monotonic()
        self.nodes[old] = self._rebuild_standby(old)
        record = FailoverRecord(
            killed_at_ns, received, replayed, promoted - started, time.monotonic() - promoted
        )
        self.failovers.append(record)
        return record

    def _rebuild_standby(self, index: int) -> localpg.Cluster:
        """A fresh base backup of the primary in `index`'s directory, started as a standby
        streaming from the primary through its own replication slot."""
        primary = self.cluster
        self._stream.set_latency(0)  # the base backup itself at full speed
        self._stream.upstream_port = primary.port
        data_dir = self._dirs[index]
        shutil.rmtree(data_dir, ignore_errors=True)
        data_dir.mkdir(parents=True)
        if primary.run_as:
            shutil.chown(data_dir, primary.run_as, primary.run_as)
            data_dir.chmod(0o700)
        self._slots += 1
        localpg.run_tool(
            primary,
            [
                "pg_basebackup",
                "-h",
                "127.0.0.1",
                "-p",
                str(self._stream.port),
                "-U",
                "postgres",
                "-D",
                str(data_dir),
                "-X",
                "stream",
                "-R",  # standby.signal and primary_conninfo
                "-C",
                "-S",
                f"standby_{self._slots}",
                "--no-sync",  # the host does not crash in this suite; fsync is off anyway
                "-c",
                "fast",
            ],
        )
        standby = localpg.start(data_dir, durable=False)
        _wait_streaming(primary, f"standby_{self._slots}")
        self._stream.set_latency(STREAM_LATENCY_SECONDS)
        return standby

    def stop(self) -> None:
        self._stream.close()
        for node in {n.data_dir: n for n in self.nodes}.values():
            node.stop()


def kill_cluster(cluster: localpg.Cluster) -> None:
    """SIGKILL the postmaster and every child, as a host crash would: frozen first (SIGSTOP),
    so that it cannot fork, and no backend outlives it to answer one more commit."""
    pid_file = cluster.data_dir / "postmaster.pid"
    postmaster = int(pid_file.read_text().splitlines()[0])
    os.kill(postmaster, signal.SIGSTOP)
    for child in _children(postmaster):
        _kill(child)
    _kill(postmaster)
    deadline = time.monotonic() + 10
    while _alive(postmaster) or any(_alive(c) for c in _children(postmaster)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"postmaster {postmaster} survived SIGKILL")
        time.sleep(0.05)  # the kernel tears the processes down


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has already released everything


def _admin(url: str) -> psycopg.Connection[dict[str, Any]]:
    return psycopg.connect(url, autocommit=True, row_factory=dict_row, connect_timeout=5)


def _standby_position(standby: localpg.Cluster) -> tuple[str | None, str | None]:
    with _admin(standby.url) as conn:
        row = conn.execute(
            "SELECT pg_last_wal_receive_lsn()::text AS received,"
            " pg_last_wal_replay_lsn()::text AS replayed"
        ).fetchone()
    assert row is not None
    return row["received"], row["replayed"]


def _wait_read_write(node: localpg.Cluster, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with _admin(node.url) as conn:
            row = conn.execute("SELECT pg_is_in_recovery() AS standby").fetchone()
        if row is not None and not row["standby"]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the promoted standby stayed read-only")
        time.sleep(0.1)  # bounded wait for the promotion to finish


def _wait_streaming(primary: localpg.Cluster, slot: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with _admin(primary.url) as conn:
            row = conn.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
        if row is not None and row["active"]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the standby never streamed through slot {slot}")
        time.sleep(0.1)  # bounded wait for the walreceiver to connect
