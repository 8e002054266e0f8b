"""`git_ref` against a real Git server (git daemon): the contract kit, what each ref and
trailer means, a client that can only read, and a server whose URL refuses every push."""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from providers.git_ref import GitRefProvider, GitRefSettings, ReadOnlyGit, create
from resolver.core.domain import DispatchIdentity, FindingKind, ProviderFailure, action_digest
from resolver.core.errors import ConfigError
from resolver.evidence.contract import NotApplicable, ProviderContract, ProviderHarness, Scenario
from resolver.evidence.receipts import KeyRing
from resolver.executor import git_commit_evidence_digest, git_commit_trailer
from tests.helpers.git_server import GIT_ENV, GitServer, running_git_server

KEYS = KeyRing({"git-k1": bytes.fromhex("4e" * 32)}, signing_kid="git-k1")
REF = "refs/tags/deploy/{idempotency_key}"
REPO = "deploys"


@pytest.fixture(scope="module")
def server() -> Iterator[GitServer]:
    with running_git_server() as running:
        running.create(REPO)
        yield running


def new_identity(attempt: int = 1) -> DispatchIdentity:
    dispatch_id = f"g-{uuid.uuid4().hex[:16]}"
    return DispatchIdentity(
        schema_version=1,
        dispatch_id=dispatch_id,
        approval_request_id=f"ar-{dispatch_id}",
        project_id="proj-git",
        action_type="deploy.tag",
        action_digest=action_digest({"deploy": dispatch_id}),
        attempt=attempt,
        started_at_ms=1_800_000_000_000,
        idempotency_key=f"idem-{dispatch_id}",
    )


def provider(server: GitServer, **settings: Any) -> GitRefProvider:
    parsed = GitRefSettings(
        **{"url": server.url(REPO), "ref": REF, "timeout_seconds": 10} | settings
    )
    return GitRefProvider(parsed, ReadOnlyGit(parsed.url, parsed.timeout_seconds, None), KEYS)


def push_bound(
    server: GitServer,
    identity: DispatchIdentity,
    *,
    ref: str | None = None,
    bound_to: DispatchIdentity | None = None,
    parents: tuple[str, ...] = (),
) -> str:
    """What the executor pushes: a commit whose last line is its binding trailer."""
    files = {"release.txt": f"release for {identity.dispatch_id}\n"}
    tree = server.tree_of(REPO, files)
    trailer = git_commit_trailer(bound_to or identity, KEYS, tree=tree, parents=list(parents))
    commit, _ = server.commit(
        REPO, files=files, message=f"Deploy {identity.dispatch_id}\n\n{trailer}\n", parents=parents
    )
    server.set_ref(REPO, ref or f"refs/tags/deploy/{identity.idempotency_key}", commit)
    return commit


class GitHarness:
    entry_point = "git_ref"

    def __init__(self, server: GitServer) -> None:
        self.server = server

    def provider(self) -> GitRefProvider:
        return provider(self.server)

    def unavailable_provider(self) -> GitRefProvider:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        parsed = GitRefSettings(
            url=f"git://127.0.0.1:{port}/{REPO}.git", ref=REF, timeout_seconds=5
        )
        return GitRefProvider(parsed, ReadOnlyGit(parsed.url, 5, None), KEYS)

    def identity(self) -> DispatchIdentity:
        return new_identity()

    def plant(self, scenario: Scenario, identity: DispatchIdentity) -> None:
        if scenario is Scenario.SUCCEEDED:
            push_bound(self.server, identity)
        elif scenario is Scenario.TAMPERED:
            # The genuine trailer of this dispatch, on other content: signed for another tree.
            files = {"release.txt": "something else entirely\n"}
            other_tree = self.server.tree_of(REPO, {"release.txt": "the approved release\n"})
            trailer = git_commit_trailer(identity, KEYS, tree=other_tree, parents=[])
            commit, _ = self.server.commit(REPO, files=files, message=f"Deploy\n\n{trailer}\n")
            self.server.set_ref(REPO, f"refs/tags/deploy/{identity.idempotency_key}", commit)
        elif scenario is Scenario.IDENTITY_DRIFT:
            other = msgspec.structs.replace(identity, attempt=identity.attempt + 1)
            push_bound(self.server, identity, bound_to=other)
        elif scenario is Scenario.OVERSIZE:
            commit, _ = self.server.commit(
                REPO,
                files={"x": "x\n"},
                message=f"Deploy\n\nResolver-Binding: v1 dispatch={identity.dispatch_id} {'x' * 600}\n",
            )
            self.server.set_ref(REPO, f"refs/tags/deploy/{identity.idempotency_key}", commit)
        elif scenario is Scenario.FAILED:
            raise NotApplicable("a push that failed leaves nothing on the server")
        elif scenario is Scenario.STILL_RUNNING:
            raise NotApplicable("a push lands whole or not at all")
        else:
            raise NotApplicable("a trailer is one token: no field can be added")

    def snapshot(self) -> object:
        return (self.server.refs(REPO), self.server.objects(REPO))


class TestGitRefContract(ProviderContract):
    @pytest.fixture
    def provider_harness(self, server: GitServer) -> ProviderHarness:
        return GitHarness(server)  # type: ignore[return-value]


def test_what_each_ref_and_trailer_means(server: GitServer) -> None:
    git_ref = provider(server)
    absent = new_identity()
    assert git_ref.inspect(absent).cause == "no_ref"

    bound = new_identity()
    commit = push_bound(server, bound)
    finding = git_ref.inspect(bound)
    assert finding.kind is FindingKind.VERIFIED_SUCCEEDED and finding.result_code == "pushed"
    trailer = git_commit_trailer(
        bound,
        KEYS,
        tree=server.tree_of(REPO, {"release.txt": f"release for {bound.dispatch_id}\n"}),
        parents=[],
    )
    # The executor's helper gives the same evidence digest: a racing completion replays.
    assert finding.evidence_digest == git_commit_evidence_digest(commit, trailer)

    unbound = new_identity()
    plain, _ = server.commit(REPO, files={"a": "a\n"}, message="no trailer here\n")
    server.set_ref(REPO, f"refs/tags/deploy/{unbound.idempotency_key}", plain)
    assert git_ref.inspect(unbound).cause == "ref_not_bound"

    foreign = new_identity()
    push_bound(server, foreign, bound_to=new_identity())
    assert git_ref.inspect(foreign).cause == "identity_mismatch"


def test_a_shared_branch_is_searched_to_its_depth_and_absent_binding_is_missing(
    server: GitServer,
) -> None:
    first, second = new_identity(), new_identity()
    base = push_bound(server, first, ref="refs/heads/main")
    push_bound(server, second, ref="refs/heads/main", parents=(base,))
    shallow = provider(server, ref="refs/heads/main", depth=1)
    deep = provider(server, ref="refs/heads/main", depth=2)
    assert shallow.inspect(second).kind is FindingKind.VERIFIED_SUCCEEDED
    assert shallow.inspect(first).cause == "no_bound_commit"  # beyond the depth looked at
    assert deep.inspect(first).kind is FindingKind.VERIFIED_SUCCEEDED
    page = deep.inspect_page([first, second, new_identity()])
    assert [f.kind for f in page.values()] == [
        FindingKind.VERIFIED_SUCCEEDED,
        FindingKind.VERIFIED_SUCCEEDED,
        FindingKind.MISSING,
    ]


def test_the_client_runs_nothing_but_reads() -> None:
    git = ReadOnlyGit("git://127.0.0.1:1/x.git", 5, None)
    for command in ("push", "send-pack", "receive-pack", "update-ref", "config"):
        with pytest.raises(PermissionError):
            git.remote(command, [], deadline=0, cwd=None)
        with pytest.raises(PermissionError):
            git.local(command, [], deadline=0, cwd=Path("."))


def test_the_server_refuses_a_push_through_the_resolver_s_url_and_logs_only_reads(
    server: GitServer, tmp_path: Path
) -> None:
    identity = new_identity()
    push_bound(server, identity)
    before, seen = server.refs(REPO), len(server.requests())
    assert provider(server).inspect(identity).kind is FindingKind.VERIFIED_SUCCEEDED
    # What the resolver asked the server: reads only (ls-remote and fetch are upload-pack).
    by_resolver = server.requests()[seen:]
    assert by_resolver and all(r.startswith("Request upload-pack for") for r in by_resolver)
    # And its URL refuses a write: a push through it is turned down by the server itself.
    clone = tmp_path / "clone"
    run = {"env": GIT_ENV, "check": True, "capture_output": True}
    subprocess.run(["git", "clone", "--quiet", str(server.path(REPO)), str(clone)], **run)
    (clone / "evil.txt").write_text("rewritten\n")
    subprocess.run(["git", "add", "."], cwd=clone, **run)
    subprocess.run(["git", "commit", "--quiet", "-m", "evil"], cwd=clone, **run)
    seen = len(server.requests())
    pushed = subprocess.run(
        ["git", "push", server.url(REPO), f"HEAD:refs/tags/deploy/{identity.idempotency_key}"],
        cwd=clone,
        env=GIT_ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert pushed.returncode != 0
    assert server.refs(REPO) == before
    assert any("'receive-pack': service not enabled" in r for r in server.requests()[seen:])


def test_a_refusing_server_is_a_configuration_error_never_evidence(server: GitServer) -> None:
    parsed = GitRefSettings(url=server.url("no-such-repo"), ref=REF, timeout_seconds=5)
    finding = GitRefProvider(parsed, ReadOnlyGit(parsed.url, 5, None), KEYS).inspect(new_identity())
    assert (finding.kind, finding.failure, finding.cause) == (
        FindingKind.UNAVAILABLE,
        ProviderFailure.CONFIGURATION,
        "git_refused",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"url": "ssh://git@example.com/x.git"}, "git://, https://"),
        ({"url": "http://git.example.com/x.git"}, "loopback"),
        ({"url": "https://reader:pw@git.example.com/x.git"}, "password"),
        ({"ref": "main"}, "full ref"),
        ({"ref": "refs/tags/{secret}"}, "full ref"),
        ({"depth": 0}, "depth"),
        ({"url": "git://git.example.com/x.git", "token_env": "T"}, "carries no credentials"),
    ],
)
def test_bad_settings_are_a_clear_start_up_error(
    change: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESOLVER_RECEIPT_KEYS", f"git-k1={'4e' * 32}")
    monkeypatch.setenv("T", "token")
    with pytest.raises(ConfigError, match=message):
        create({"url": "git://127.0.0.1:9/x.git", "ref": REF, **change})
