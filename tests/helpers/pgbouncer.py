"""A real PgBouncer in front of the test server: started on a free loopback port with its
config in a temporary directory, as CloudNativePG's pooler configures it."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

BINARY = "/usr/sbin/pgbouncer"
APT_PACKAGE = "pgbouncer"


@dataclass(frozen=True)
class Bouncer:
    port: int
    mode: str
    directory: Path

    def url(self, server_url: str) -> str:
        """`server_url` (user, password, database kept) reached through this PgBouncer."""
        parts = urlsplit(server_url)
        userinfo = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        netloc = f"{userinfo}127.0.0.1:{self.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))

    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def binary() -> str:
    """The PgBouncer binary; in CI (.ci/run installs it) a missing one fails, else skips."""
    found = shutil.which("pgbouncer") or (BINARY if Path(BINARY).exists() else None)
    if found:
        return found
    reason = f"pgbouncer is not installed; run `apt-get install {APT_PACKAGE}` (bash .ci/run does)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
DOC_MARKER = "; pgbouncer.ini [pgbouncer] settings for the resolver\n"


def documented_settings() -> dict[str, str]:
    """The [pgbouncer] settings docs/deployment.md gives operators: the tests run with them."""
    text = DOC.read_text(encoding="utf-8")
    block = text[text.index(DOC_MARKER) :].split("```", 1)[0]
    settings = {}
    for line in block.splitlines():
        if line.strip() and not line.lstrip().startswith(";"):
            name, value = (part.strip() for part in line.split("=", 1))
            settings[name] = value
    return settings


def _config(
    server_url: str, port: int, mode: str, directory: Path, aliases: Mapping[str, int]
) -> str:
    server = urlsplit(server_url)
    dbname = server.path.lstrip("/") or "postgres"
    routes = "".join(
        f"{alias} = host=127.0.0.1 port={upstream} dbname={dbname}\n"
        for alias, upstream in aliases.items()
    )
    settings = {
        **documented_settings(),
        "pool_mode": mode,
        "listen_addr": "127.0.0.1",
        "listen_port": str(port),
        "unix_socket_dir": "",
        "auth_type": "trust",
        "auth_file": str(directory / "userlist.txt"),
        "logfile": str(directory / "pgbouncer.log"),
        "pidfile": str(directory / "pgbouncer.pid"),
    }
    lines = "".join(f"{name} = {value}\n" for name, value in settings.items())
    server_route = f"* = host={server.hostname or '127.0.0.1'} port={server.port or 5432}"
    return f"[databases]\n{routes}{server_route}\n\n[pgbouncer]\n{lines}"


@contextmanager
def pgbouncer(
    server_url: str, mode: str, users: Iterable[str], aliases: Mapping[str, int] | None = None
) -> Iterator[Bouncer]:
    """PgBouncer in `mode` (transaction or session) in front of `server_url`'s server; every
    name in `users` may log in (trust: the server checks passwords, if it asks). `aliases`
    adds databases routed to other loopback ports (`server_url`'s database behind them)."""
    exe = binary()
    directory = Path(tempfile.mkdtemp(prefix=f"pgbouncer-{mode}-"))
    port = free_port()
    config = _config(server_url, port, mode, directory, aliases or {})
    if os.geteuid() == 0:
        # PgBouncer refuses to run as root: it drops to the server's own account.
        config += "user = postgres\n"
    (directory / "pgbouncer.ini").write_text(config, encoding="utf-8")
    userlist = "".join(f'"{name}" ""\n' for name in sorted(set(users)))
    (directory / "userlist.txt").write_text(userlist, encoding="utf-8")
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        for path in (directory, *directory.iterdir()):
            os.chown(path, account.pw_uid, account.pw_gid)
    # PgBouncer logs to its logfile and to stderr: a pipe nobody reads would fill and stop it.
    process = subprocess.Popen(
        [exe, str(directory / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    bouncer = Bouncer(port, mode, directory)
    try:
        _wait_accepting(bouncer, server_url, process)
        yield bouncer
    finally:
        process.send_signal(signal.SIGINT)  # immediate shutdown
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(directory, ignore_errors=True)


def _wait_accepting(bouncer: Bouncer, server_url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 15
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"pgbouncer exited: {process.stderr.read() if process.stderr else ''}"
            )
        try:
            with psycopg.connect(bouncer.url(server_url), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"pgbouncer did not accept connections:\n{bouncer.log()}"
                ) from exc
            time.sleep(0.05)  # polling a port that is not open yet
