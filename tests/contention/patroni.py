"""A three-member Patroni cluster on one etcd, all on loopback, for the `patroni-failover`
profile: the failovers are Patroni's own (a switchover, the leader SIGKILLed, the leader cut
off from etcd), not a promotion the suite performs itself.

Each member reaches etcd through its own fault proxy, so one member can be cut off from the
DCS while PostgreSQL keeps serving. Patroni and PostgreSQL run as the `postgres` account
when the suite runs as root (PostgreSQL refuses root).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import yaml
from psycopg.rows import dict_row

from tests.helpers.fault_proxy import FaultProxy

from .replication import _children, _kill

MEMBERS = 3
SCOPE = "resolver-contention"
BIN_DIR = Path("/usr/lib/postgresql/15/bin")
# Short DCS timings so a run sees three failovers in about a minute; Patroni's minimums.
TTL, LOOP_WAIT, RETRY_TIMEOUT = 20, 2, 5
FAULTS = ("switchover", "sigkill_leader", "etcd_cut")


def available() -> str | None:
    """Why the profile cannot run here, or None."""
    for tool in ("patroni", "etcd"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install patroni etcd-server)"
    if not (BIN_DIR / "postgres").exists():
        return f"PostgreSQL 15 server binaries are not in {BIN_DIR}"
    return None


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    port: int
    rest_port: int
    data_dir: Path

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


@dataclass(frozen=True, slots=True)
class PatroniFailover:
    """One fault: which, when it struck (host wall clock, ns), how long until a new leader
    accepted writes, and until all three members streamed again."""

    kind: str
    killed_at_ns: int
    old_leader: str
    new_leader: str
    seconds_to_promote: float
    seconds_to_rejoin: float


class PatroniCluster:
    """Three Patroni members (`m0`..`m2`) on one etcd; `failover()` runs the next fault."""

    def __init__(self, workdir: Path, *, synchronous: bool) -> None:
        self.synchronous = synchronous
        self.failovers: list[PatroniFailover] = []
        self._workdir = workdir
        workdir.mkdir(parents=True)
        self._account = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        self._etcd_port, etcd_peer = _free_port(), _free_port()
        self._etcd = subprocess.Popen(
            [
                "etcd",
                "--name=e0",
                f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{self._etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self._etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=e0=http://127.0.0.1:{etcd_peer}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(workdir / "etcd.log").open("wb"),
        )
        self._dcs = [FaultProxy(self._etcd_port) for _ in range(MEMBERS)]
        self.members = [
            Member(f"m{i}", _free_port(), _free_port(), workdir / f"m{i}") for i in range(MEMBERS)
        ]
        self._procs: list[subprocess.Popen[bytes] | None] = [None] * MEMBERS
        self._faults = 0
        self._cut: int | None = None  # the member cut off from etcd: its view is stale
        self._own(workdir)
        for index in range(MEMBERS):
            self._write_config(index)
        self._start(0)  # the first member bootstraps; the others clone it
        self._wait(lambda: self._leader() is not None, "a bootstrapped leader", 120)
        for index in range(1, MEMBERS):
            self._start(index)
        self._wait(self._all_streaming, "three members streaming", 180)
        with self.admin() as conn:
            # Replicated with the catalog: every member's sessions commit synchronously when
            # Patroni names a synchronous standby.
            conn.execute("ALTER ROLE postgres SET synchronous_commit = on")

    # -- what the harness reads -----------------------------------------------------------

    @property
    def cluster(self) -> Member:
        """The current leader (the single-node harness's `cluster`)."""
        leader = self._wait(self._leader, "a leader", 120)
        return next(m for m in self.members if m.name == leader)

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(m.port for m in self.members)

    def admin(self) -> psycopg.Connection[dict[str, Any]]:
        return psycopg.connect(
            self.cluster.url, autocommit=True, row_factory=dict_row, connect_timeout=5
        )

    # -- the faults -----------------------------------------------------------------------

    def failover(self) -> PatroniFailover:
        kind = FAULTS[self._faults % len(FAULTS)]
        self._faults += 1
        old = self._wait(self._leader, "a leader", 120)
        index = int(old[1:])
        killed_at_ns = time.time_ns()
        started = time.monotonic()
        if kind == "switchover":
            self._post(index, "switchover", {"leader": old, "candidate": self._candidate()})
        elif kind == "sigkill_leader":
            self._sigkill(index)
        else:
            self._cut = index
            self._dcs[index].set_blackhole(True)
        new = self._wait(lambda: _other(self._leader(), old), "a new leader", 120)
        self._wait(lambda: self._writable(new), "the new leader writable", 60)
        promoted = time.monotonic()
        if kind == "sigkill_leader":
            self._start(index)
        elif kind == "etcd_cut":
            self._dcs[index].set_blackhole(False)
            self._cut = None
        self._wait(self._all_streaming, "three members streaming again", 180)
        record = PatroniFailover(
            kind, killed_at_ns, old, new, promoted - started, time.monotonic() - promoted
        )
        self.failovers.append(record)
        return record

    def stop(self) -> None:
        for index, proc in enumerate(self._procs):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # Patroni stops its PostgreSQL
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self._sigkill(index)
        for proxy in self._dcs:
            proxy.close()
        self._etcd.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._etcd.wait(timeout=10)
        if self._etcd.poll() is None:
            self._etcd.kill()

    # -- plumbing -------------------------------------------------------------------------

    def _write_config(self, index: int) -> None:
        member = self.members[index]
        config = {
            "scope": SCOPE,
            "name": member.name,
            "restapi": {
                "listen": f"127.0.0.1:{member.rest_port}",
                "connect_address": f"127.0.0.1:{member.rest_port}",
            },
            # use_proxies: talk to etcd only through this member's own proxy, never to the
            # member URLs etcd advertises (which would bypass the proxy and its cut).
            "etcd3": {"hosts": [f"127.0.0.1:{self._dcs[index].port}"], "use_proxies": True},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL,
                    "loop_wait": LOOP_WAIT,
                    "retry_timeout": RETRY_TIMEOUT,
                    "synchronous_mode": self.synchronous,
                    # Fail a crashed primary over at once instead of restarting it in place.
                    "primary_start_timeout": 0,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "max_connections": 200,
                            "wal_level": "replica",
                            "hot_standby": "on",
                            "wal_log_hints": "on",
                            "max_wal_senders": 10,
                            "max_replication_slots": 10,
                            # The host does not crash (processes are killed): no fsync needed.
                            "fsync": "off",
                            "synchronous_commit": "on",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
                "pg_hba": [
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                    "local all all trust",
                ],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{member.port}",
                "connect_address": f"127.0.0.1:{member.port}",
                "data_dir": str(member.data_dir),
                "bin_dir": str(BIN_DIR),
                "pgpass": str(self._workdir / f"pgpass-{member.name}"),
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "postgres"},
                    "rewind": {"username": "postgres"},
                },
                "parameters": {"unix_socket_directories": str(self._workdir)},
            },
        }
        path = self._workdir / f"{member.name}.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        self._own(path)

    def _own(self, path: Path) -> None:
        if self._account is not None:
            os.chown(path, self._account.pw_uid, self._account.pw_gid)
            path.chmod(0o700 if path.is_dir() else 0o600)

    def _start(self, index: int) -> None:
        member = self.members[index]
        command = ["patroni", str(self._workdir / f"{member.name}.yml")]
        if self._account is not None:
            command = ["runuser", "-u", "postgres", "--", *command]
        log = (self._workdir / f"{member.name}.log").open("ab")
        self._procs[index] = subprocess.Popen(command, stdout=log, stderr=log)

    def _sigkill(self, index: int) -> None:
        """Patroni and its PostgreSQL, every process, as a host crash would."""
        proc = self._procs[index]
        pid_file = self.members[index].data_dir / "postmaster.pid"
        postmaster = int(pid_file.read_text().splitlines()[0]) if pid_file.exists() else None
        if proc is not None:
            for pid in (*_descendants(proc.pid), proc.pid):
                _kill(pid)
            proc.wait()
        if postmaster is not None:
            for pid in (*_children(postmaster), postmaster):
                _kill(pid)

    def _get(self, index: int, path: str) -> tuple[int, Any]:
        url = f"http://127.0.0.1:{self.members[index].rest_port}/{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, None

    def _post(self, index: int, path: str, body: dict[str, Any]) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.members[index].rest_port}/{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as resp:
            resp.read()

    def _cluster_view(self) -> list[dict[str, Any]]:
        for index in range(MEMBERS):
            if index == self._cut:
                continue
            with contextlib.suppress(OSError, ValueError):
                status, body = self._get(index, "cluster")
                if status == 200 and body:
                    return list(body.get("members", []))
        return []

    def _candidate(self) -> str:
        """The standby a switchover hands over to: the synchronous one when there is one."""
        view = self._cluster_view()
        wanted = "sync_standby" if self.synchronous else "replica"
        return next(str(m["name"]) for m in view if m.get("role") == wanted)

    def _leader(self) -> str | None:
        for m in self._cluster_view():
            if m.get("role") == "leader" and m.get("state") == "running":
                return str(m["name"])
        return None

    def _all_streaming(self) -> bool | None:
        """Both standbys stream from the leader (one of them synchronously, when asked)."""
        leader = self._leader()
        if leader is None:
            return None
        member = next(m for m in self.members if m.name == leader)
        try:
            with psycopg.connect(member.url, autocommit=True, connect_timeout=2) as conn:
                rows = conn.execute(
                    "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'"
                ).fetchall()
        except psycopg.OperationalError:
            return None
        # Patroni has also recorded the synchronous standby in etcd (a switchover needs it).
        synced = any(r[0] in ("sync", "quorum") for r in rows) and any(
            m.get("role") == "sync_standby" for m in self._cluster_view()
        )
        if len(rows) == MEMBERS - 1 and (synced or not self.synchronous):
            return True
        return None

    def _writable(self, name: str) -> bool | None:
        member = next(m for m in self.members if m.name == name)
        try:
            with psycopg.connect(member.url, autocommit=True, connect_timeout=2) as conn:
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        except psycopg.OperationalError:
            return None
        return True if row is not None and not row[0] else None

    def _wait(self, probe: Any, what: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value is not None:
                return value
            if time.monotonic() > deadline:
                raise RuntimeError(f"patroni: no {what} within {timeout:g}s ({self._workdir})")
            time.sleep(0.2)  # polling Patroni's REST API between its own loop iterations


def _other(leader: str | None, old: str) -> str | None:
    return leader if leader is not None and leader != old else None


def _descendants(pid: int) -> list[int]:
    found, queue = [], [pid]
    while queue:
        for child in _children(queue.pop()):
            found.append(child)
            queue.append(child)
    return found
