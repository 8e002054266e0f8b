"""An executor on the Python SDK that pushes a release commit bound to its dispatch, and
SIGKILLs itself at one point of the push.

    python git_crash_executor.py <database_url> <dispatch_id> <point> <repository path>

The commit's last line is the binding trailer (`git_commit_trailer`), signed over its tree and
parent; it is pushed to `refs/tags/deploy/<idempotency key>` through the writers' path (the
bare repository on disk). Points: `before_commit`, `before_push` (the commit exists only in the
executor's clone), `after_push` (before the completion), `after_complete`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from resolver.core.domain import Outcome
from resolver.evidence.receipts import KeyRing
from resolver.executor import (
    PostgresExecutionStore,
    PostgresHandle,
    git_commit_evidence_digest,
    git_commit_trailer,
)
from resolver.executor.side_effects import SideEffectRunner

ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "executor",
    "GIT_AUTHOR_EMAIL": "executor@example.invalid",
    "GIT_COMMITTER_NAME": "executor",
    "GIT_COMMITTER_EMAIL": "executor@example.invalid",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
}


def crash() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def git(*args: str, cwd: Path, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=ENV, input=stdin, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def main(database_url: str, dispatch_id: str, point: str, repository: str) -> None:
    keys = KeyRing.from_environment()
    clone = Path(tempfile.mkdtemp(prefix="executor-clone-"))
    git("clone", "--quiet", repository, str(clone), cwd=clone.parent)
    with PostgresExecutionStore(PostgresHandle(database_url)) as store:
        runner = SideEffectRunner(
            store, database_url=database_url, owner="git-crasher", keys=keys, lease_seconds=6
        )
        with runner.run(dispatch_id) as effect:
            identity = effect.identity()
            if point == "before_commit":
                crash()
            (clone / "release.txt").write_text(f"release {identity.dispatch_id}\n")
            git("add", "release.txt", cwd=clone)
            tree = git("write-tree", cwd=clone)
            parent = git("rev-parse", "HEAD", cwd=clone)
            trailer = git_commit_trailer(identity, keys, tree=tree, parents=[parent])
            message = f"Release for {identity.dispatch_id}\n\n{trailer}\n"
            commit = git("commit-tree", tree, "-p", parent, cwd=clone, stdin=message)
            if point == "before_push":
                crash()
            git(
                "push",
                "--quiet",
                "origin",
                f"{commit}:refs/tags/deploy/{identity.idempotency_key}",
                cwd=clone,
            )
            if point == "after_push":
                crash()
            effect.record(
                Outcome.SUCCEEDED,
                "pushed",
                evidence_digest=git_commit_evidence_digest(commit, trailer),
            )
    if point == "after_complete":
        crash()


if __name__ == "__main__":
    main(*sys.argv[1:5])
