"""A real Ceph radosgw on loopback for the object-storage tests: one monitor, one OSD on
memstore and one gateway, from Debian's packages, in a temporary directory, without
cephx. Users are made with `radosgw-admin`; access is granted with bucket policies, as
docs/object-storage.md gives them for radosgw.

Skips with the reason when the binaries are missing (CI installs them: .ci/run)."""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.pgbouncer import free_port
from tests.helpers.s3 import REGION, Credentials

APT_PACKAGES = "ceph-mon ceph-osd radosgw"
BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph")
START_SECONDS = 180.0

_CONF = """[global]
fsid = {fsid}
mon host = v1:127.0.0.1:{mon_port}
ms bind msgr2 = false
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
osd objectstore = memstore
memstore device bytes = 536870912
osd max object name len = 460
osd max object namespace len = 64
run dir = {d}/run
admin socket = {d}/run/$name.asok
log file = {d}/log/$name.log
pid file = {d}/run/$name.pid
mon data = {d}/mon
osd data = {d}/osd
keyring = /dev/null
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:{rgw_port}
rgw data = {d}/rgw
"""


@dataclass(frozen=True)
class Radosgw:
    endpoint: str
    directory: Path
    admin: Credentials

    def user(self, uid: str) -> Credentials:
        """A gateway user with its own keys (granted nothing but what policies give it)."""
        keys = Credentials(f"AK{uuid.uuid4().hex[:16].upper()}", uuid.uuid4().hex)
        self.admin_command(
            "user", "create", f"--uid={uid}", f"--display-name={uid}",
            f"--access-key={keys.access_key}", f"--secret={keys.secret_key}",
        )  # fmt: skip
        return keys

    def admin_command(self, *args: str) -> str:
        return _run(self.directory, "radosgw-admin", "-n", "client.rgw", *args)


def binaries_or_skip() -> None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        reason = f"{', '.join(missing)} not installed; run `apt-get install {APT_PACKAGES}`"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def _run(directory: Path, exe: str, *args: str, timeout: float = 60) -> str:
    done = subprocess.run(
        [exe, "-c", str(directory / "ceph.conf"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{exe} {' '.join(args)}: {done.stderr[-2000:]}")
    return done.stdout


def _daemon(directory: Path, exe: str, *args: str) -> None:
    # Each daemon forks into the background and writes its pid file; as root it keeps root.
    _run(directory, exe, *args, "--setuser", "root", "--setgroup", "root")


@contextmanager
def running_radosgw() -> Iterator[Radosgw]:
    binaries_or_skip()
    directory = Path(tempfile.mkdtemp(prefix="radosgw-"))
    for sub in ("mon", "osd", "run", "log", "rgw"):
        (directory / sub).mkdir()
    mon_port, rgw_port = free_port(), free_port()
    fsid = str(uuid.uuid4())
    (directory / "ceph.conf").write_text(
        _CONF.format(fsid=fsid, mon_port=mon_port, rgw_port=rgw_port, d=directory)
    )
    try:
        monmap = str(directory / "monmap")
        subprocess.run(
            ["monmaptool", "--create", "--addv", "a", f"[v1:127.0.0.1:{mon_port}]",
             "--fsid", fsid, monmap],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        _daemon(directory, "ceph-mon", "--mkfs", "-i", "a", "--monmap", monmap)
        _daemon(directory, "ceph-mon", "-i", "a")
        _until_the_monitor_answers(directory)
        # The OSD is registered under a uuid of ours and made with the same one, as Ceph's
        # manual deployment does.
        osd_uuid = str(uuid.uuid4())
        _run(directory, "ceph", "osd", "create", osd_uuid, "0", "--connect-timeout", "60",
             timeout=90)  # fmt: skip
        _daemon(directory, "ceph-osd", "-i", "0", "--mkfs", "--osd-uuid", osd_uuid)
        _start_osd(directory)
        _daemon(directory, "radosgw", "-n", "client.rgw")
        endpoint = f"http://127.0.0.1:{rgw_port}"
        _wait_answering(rgw_port)
        admin = Credentials(f"AK{uuid.uuid4().hex[:16].upper()}", uuid.uuid4().hex)
        gateway = Radosgw(endpoint, directory, admin)
        gateway.admin_command(
            "user", "create", "--uid=admin", "--display-name=admin",
            f"--access-key={admin.access_key}", f"--secret={admin.secret_key}",
        )  # fmt: skip
        yield gateway
    finally:
        _stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


OSD_START_ATTEMPTS = 5


def _start_osd(directory: Path) -> None:
    """Start the OSD, again if its start failed: on a loaded machine it may send its first
    command before its monitor client has the cluster's fsid from the monmap, and the monitor
    refuses a command on a zero fsid ('wrong fsid'); the OSD then exits before it forks,
    leaving nothing behind, so starting it again is clean. A start also failed once with
    nothing on stderr but a warning (a fresh-clone run; what it met went to its log, which the
    rig did not read then), so every failed start is tried again, and the last one's error
    carries the log."""
    log = directory / "log" / "osd.0.log"
    for attempt in range(1, OSD_START_ATTEMPTS + 1):
        try:
            _daemon(directory, "ceph-osd", "-i", "0")
            return
        except RuntimeError as exc:
            if attempt == OSD_START_ATTEMPTS:
                tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                raise RuntimeError(f"{exc}\nits log ends:\n{tail}") from exc


def _until_the_monitor_answers(directory: Path) -> None:
    """Until the monitor has formed its quorum and answers commands (on a loaded machine a
    first command may be refused while it is still starting)."""
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            _run(directory, "ceph", "quorum_status", "--connect-timeout", "10", timeout=30)
            return
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            if time.monotonic() > deadline:
                log = (directory / "log" / "mon.a.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the monitor never answered: {exc}\n{log}") from exc
            time.sleep(0.5)  # polling a daemon that is still starting


def _wait_answering(port: int) -> None:
    """Until the gateway answers HTTP (it creates its pools first)."""
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"radosgw did not answer on {port}") from None
            time.sleep(0.2)  # polling a port that is not open yet


def _stop(directory: Path) -> None:
    """Each daemon this rig started, by the pid its own pid file names."""
    for name in ("client.rgw", "osd.0", "mon.a"):
        pid_file = directory / "run" / f"{name}.pid"
        with suppress(FileNotFoundError, ValueError, ProcessLookupError):
            pid = int(pid_file.read_text().strip())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                os.kill(pid, 0)
                time.sleep(0.1)  # waiting for a daemon's own exit
            os.kill(pid, signal.SIGKILL)


__all__ = ["REGION", "Radosgw", "running_radosgw"]
