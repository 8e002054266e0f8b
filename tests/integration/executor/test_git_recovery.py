"""A push to a Git server as evidence, end to end: a real executor (the Python SDK) SIGKILLed
at each point of its push to a real git daemon, settled by a real `resolver run --once` through
`git_ref` reading the daemon's read-only URL; a tampered or mis-bound commit goes to a person
with its reason; a push that never landed stays missing, then escalates; the daemon's log shows
the resolver only ever read.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from resolver.evidence.receipts import KeyRing
from resolver.executor import git_commit_trailer
from tests.helpers.crashes import (
    MISSING_WINDOW,
    crash,
    identity_of,
    lease_expired,
    missing_then_escalated,
    run_once,
    wait_until,
)
from tests.helpers.crashes import dispatch as new_dispatch
from tests.helpers.database import SQL
from tests.helpers.git_server import GitServer, git, running_git_server
from tests.helpers.stores import Storage

KEYS = KeyRing({"git-e2e": bytes.fromhex("3f" * 32)}, signing_kid="git-e2e")
RECEIPT_ENV = {
    "RESOLVER_RECEIPT_KEYS": f"git-e2e={'3f' * 32}",
    "RESOLVER_RECEIPT_SIGNING_KID": "git-e2e",
}
ACTION = "deploy.release"
REPO = "releases"
CRASHER = Path(__file__).with_name("git_crash_executor.py")


@pytest.fixture(scope="module")
def server() -> Iterator[GitServer]:
    with running_git_server() as running:
        path = running.create(REPO)
        first, _ = running.commit(REPO, files={"README": "releases\n"}, message="start\n")
        running.set_ref(REPO, "refs/heads/main", first)
        git("symbolic-ref", "HEAD", "refs/heads/main", cwd=path)
        yield running


def dispatch(store: Storage) -> str:
    return new_dispatch(store, ACTION, "gr")


def resolver_run_once(server: GitServer, database_url: str, tmp_path: Path, **more: Any) -> None:
    settings = {
        "provider": "git_ref",
        "url": server.url(REPO),
        "ref": "refs/tags/deploy/{idempotency_key}",
        "timeout_seconds": 10,
        **more,
    }
    run_once(database_url, tmp_path, ACTION, settings, RECEIPT_ENV)


def crash_executor(server: GitServer, database_url: str, dispatch_id: str, point: str) -> None:
    crash(CRASHER, RECEIPT_ENV, database_url, dispatch_id, point, str(server.path(REPO)))


def recovered(
    server: GitServer, database_url: str, sql: SQL, tmp_path: Path, dispatch_id: str, **more: Any
) -> None:
    wait_until(lambda: lease_expired(sql, dispatch_id), "the crashed executor's lease to end")
    resolver_run_once(server, database_url, tmp_path, **more)


CRASH_POINTS = {
    # point: (execution state after recovery, the control's last finding, resolved by)
    "before_commit": ("executing", "missing", []),
    "before_push": ("executing", "missing", []),
    "after_push": ("succeeded", None, ["automatic"]),
    "after_complete": ("succeeded", None, []),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_crash_at_every_point_of_the_push_settles_from_the_server(
    server: GitServer, store: Storage, database_url: str, sql: SQL, tmp_path: Path, point: str
) -> None:
    state, finding, sources = CRASH_POINTS[point]
    dispatch_id = dispatch(store)
    crash_executor(server, database_url, dispatch_id, point)
    refs, seen = server.refs(REPO), len(server.requests())
    if point != "after_complete":
        assert sql.execution(dispatch_id)["state"] == "executing"
        recovered(server, database_url, sql, tmp_path, dispatch_id)
    execution = sql.execution(dispatch_id)
    assert execution["state"] == state
    assert [r["source"] for r in sql.resolutions(dispatch_id)] == sources
    if state != "succeeded":
        assert sql.control(dispatch_id)["last_finding"] == finding
    elif sources:
        assert execution["result_code"] == "pushed"
    # The resolver read and wrote nothing to the server.
    assert server.refs(REPO) == refs
    assert all(r.startswith("Request upload-pack") for r in server.requests()[seen:])


@pytest.mark.parametrize(
    ("tamper", "reason"), [("altered", "bad_signature"), ("other", "identity_mismatch")]
)
def test_a_tampered_or_mis_bound_commit_goes_to_a_person_with_its_reason(
    server: GitServer,
    store: Storage,
    database_url: str,
    sql: SQL,
    tmp_path: Path,
    tamper: str,
    reason: str,
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(server, database_url, dispatch_id, "before_commit")
    identity = identity_of(sql, dispatch_id)
    files = {"release.txt": f"release {dispatch_id}\n"}
    tree = server.tree_of(REPO, files)
    if tamper == "altered":
        # This dispatch's genuine trailer, signed for the approved tree, on other content.
        trailer = git_commit_trailer(identity, KEYS, tree=tree, parents=[])
        files = {"release.txt": "not what was approved\n"}
    else:
        other = dispatch(store)
        crash_executor(server, database_url, other, "before_commit")
        trailer = git_commit_trailer(identity_of(sql, other), KEYS, tree=tree, parents=[])
    commit, _ = server.commit(REPO, files=files, message=f"Release\n\n{trailer}\n")
    server.set_ref(REPO, f"refs/tags/deploy/{identity.idempotency_key}", commit)
    recovered(server, database_url, sql, tmp_path, dispatch_id)
    control = sql.control(dispatch_id)
    assert (control["status"], control["last_finding"], control["last_reason"]) == (
        "manual",
        "conflict",
        reason,
    )
    assert sql.execution(dispatch_id)["state"] == "executing"


def test_a_push_that_never_landed_is_missing_then_escalates(
    server: GitServer, store: Storage, database_url: str, sql: SQL, tmp_path: Path
) -> None:
    dispatch_id = dispatch(store)
    crash_executor(server, database_url, dispatch_id, "before_push")
    run = partial(resolver_run_once, server, database_url, tmp_path, **MISSING_WINDOW)
    missing_then_escalated(
        sql, dispatch_id, run, "no_ref", "the missing push to outlast its window"
    )
