"""A private MariaDB server for tests, from Debian's `mariadb-server` binaries.

Users are server-wide, so each test session starts its own server on a free loopback port
with a throwaway data directory (no shared server's users collide), with the general query
log on: every statement any login sent is in `general_log` (table), which is how a test
shows the resolver's reader never wrote.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql
import pymysql.cursors

MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
START_SECONDS = 60.0


def available() -> bool:
    return Path(MARIADBD).exists() and Path(INSTALL_DB).exists()


@dataclass(frozen=True)
class MariaDb:
    host: str
    port: int
    socket_path: str

    def url(self, user: str, password: str, database: str) -> str:
        return f"mysql://{user}:{password}@{self.host}:{self.port}/{database}"

    def connect(self, user: str = "root", password: str = "", database: str | None = None) -> Any:
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=user,
            password=password,
            database=database,
            autocommit=True,
            cursorclass=pymysql.cursors.DictCursor,
        )

    def execute(self, statement: str, args: Any = None, database: str | None = None) -> list[Any]:
        """One statement as root; its rows."""
        conn = self.connect(database=database)
        try:
            with conn.cursor() as cursor:
                cursor.execute(statement, args)
                return list(cursor.fetchall())
        finally:
            conn.close()

    def statements_by(self, user: str) -> list[str]:
        """Every statement `user` sent since the server started (the general log)."""
        rows = self.execute(
            "SELECT CONVERT(argument USING utf8mb4) AS statement FROM mysql.general_log"
            " WHERE command_type IN ('Query', 'Execute')"
            " AND thread_id IN (SELECT thread_id FROM mysql.general_log"
            "   WHERE command_type = 'Connect' AND CONVERT(argument USING utf8mb4) LIKE %s)",
            (f"{user}@%",),
        )
        return [row["statement"] for row in rows]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_mariadb() -> Iterator[MariaDb]:
    """A MariaDB server of its own for the test session; stopped and deleted after."""
    root = Path(tempfile.mkdtemp(prefix="resolver-mariadb-"))
    data, sock = root / "data", str(root / "mysqld.sock")
    installed = subprocess.run(
        [
            INSTALL_DB,
            "--no-defaults",
            f"--datadir={data}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--user=root",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if installed.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(
            f"mariadb-install-db exited {installed.returncode}: "
            + (installed.stderr or installed.stdout)[-2000:]
        )
    port = _free_port()
    server = subprocess.Popen(
        [
            MARIADBD,
            "--no-defaults",
            f"--datadir={data}",
            f"--socket={sock}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={root / 'mysqld.pid'}",
            "--user=root",
            "--skip-name-resolve",
            "--general-log=1",
            "--log-output=TABLE",
            "--innodb-buffer-pool-size=16M",
            "--skip-log-bin",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(root / "error.log").open("w"),
    )
    instance = MariaDb("127.0.0.1", port, sock)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                instance.execute("SELECT 1")
                break
            except pymysql.err.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "mariadbd did not start: " + (root / "error.log").read_text()[-2000:]
                    ) from None
                time.sleep(0.1)
        yield instance
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(root, ignore_errors=True)
