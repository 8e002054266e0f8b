"""A real Git server for tests: `git daemon` over bare repositories on loopback.

The daemon serves `upload-pack` (fetch, ls-remote) only: `receive-pack` (push) is disabled,
which is git daemon's own default and access rule, so the resolver's URL can only read. The
writers (the tests, the crashed executor) push to the same repositories through the file
system, as a forge's own push path would. `--verbose` logs every request the daemon serves
or refuses, which is how a test shows the resolver never pushed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "executor",
    "GIT_AUTHOR_EMAIL": "executor@example.invalid",
    "GIT_COMMITTER_NAME": "executor",
    "GIT_COMMITTER_EMAIL": "executor@example.invalid",
    "GIT_AUTHOR_DATE": "2026-12-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-12-01T00:00:00Z",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
}


def git(*args: str, cwd: Path, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=GIT_ENV,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


@dataclass(frozen=True)
class GitServer:
    root: Path
    port: int
    log: Path

    def url(self, repo: str) -> str:
        """The resolver's URL: the daemon, read-only."""
        return f"git://127.0.0.1:{self.port}/{repo}.git"

    def path(self, repo: str) -> Path:
        """The writers' way in: the bare repository itself."""
        return self.root / f"{repo}.git"

    def create(self, repo: str) -> Path:
        path = self.path(repo)
        git("init", "--bare", "--quiet", str(path), cwd=self.root)
        return path

    def commit(
        self,
        repo: str,
        *,
        files: dict[str, str],
        message: str,
        parents: Sequence[str] = (),
    ) -> tuple[str, str]:
        """A commit of `files` with `message`, written straight into the repository (not yet
        on any ref): (commit id, tree id)."""
        path = self.path(repo)
        entries = []
        for name, content in sorted(files.items()):
            blob = git("hash-object", "-w", "--stdin", cwd=path, stdin=content)
            entries.append(f"100644 blob {blob}\t{name}")
        tree = git("mktree", cwd=path, stdin="\n".join(entries) + "\n")
        argv = ["commit-tree", tree]
        for parent in parents:
            argv += ["-p", parent]
        return git(*argv, cwd=path, stdin=message), tree

    def tree_of(self, repo: str, files: dict[str, str]) -> str:
        """The tree id `files` would have, written into the repository."""
        path = self.path(repo)
        entries = []
        for name, content in sorted(files.items()):
            blob = git("hash-object", "-w", "--stdin", cwd=path, stdin=content)
            entries.append(f"100644 blob {blob}\t{name}")
        return git("mktree", cwd=path, stdin="\n".join(entries) + "\n")

    def set_ref(self, repo: str, ref: str, oid: str) -> None:
        git("update-ref", ref, oid, cwd=self.path(repo))

    def refs(self, repo: str) -> str:
        return git("for-each-ref", "--format=%(refname) %(objectname)", cwd=self.path(repo))

    def objects(self, repo: str) -> str:
        return git("count-objects", "-v", cwd=self.path(repo))

    def requests(self) -> list[str]:
        """What the daemon logged it served or refused, one line per request."""
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return [
            line.split("] ", 1)[-1] for line in lines if "Request " in line or "service" in line
        ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_git_server() -> Iterator[GitServer]:
    root = Path(tempfile.mkdtemp(prefix="resolver-git-server-"))
    repos, log = root / "repos", root / "daemon.log"
    repos.mkdir()
    port = _free_port()
    with log.open("w") as out:
        daemon = subprocess.Popen(
            [
                "git",
                "daemon",
                "--reuseaddr",
                "--verbose",
                "--export-all",
                f"--base-path={repos}",
                "--listen=127.0.0.1",
                f"--port={port}",
                str(repos),
            ],
            env=GIT_ENV,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if daemon.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("git daemon did not start: " + log.read_text()) from None
                time.sleep(0.05)
        yield GitServer(repos, port, log)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
