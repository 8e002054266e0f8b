"""`git_ref`: a commit pushed to a Git server, found by ref, bound to the dispatch by a trailer.

The executor ends its commit message with `Resolver-Binding: v1 …`
(`resolver.executor.git_commit_trailer`), a token signed over the dispatch identity and the
commit's tree and parents, and pushes it to the ref the action names. This provider asks the
server for that ref (`git ls-remote`), fetches at most `depth` commits behind it (shallow,
without file contents) into a scratch repository it deletes afterwards, and accepts a commit
only if its trailer binds it to this dispatch. It runs the `git` program with an allow-list of
read-only commands: `ls-remote` and `fetch` against the server, `init` and `log` on the scratch
copy; it never pushes.

| what the server holds                                     | finding                         |
|-----------------------------------------------------------|---------------------------------|
| no such ref                                               | missing (`no_ref`)              |
| a commit within `depth` whose trailer binds this dispatch | verified_succeeded (`pushed`)   |
| that trailer altered, foreign-keyed, another attempt's    | conflict (receipt reasons)      |
| a per-dispatch ref whose commits bind another dispatch    | conflict (`identity_mismatch`)  |
| a per-dispatch ref whose commits carry no binding         | conflict (`ref_not_bound`)      |
| a shared ref (no placeholder) with no commit binding it   | missing (`no_bound_commit`)     |
| server unreachable, too slow, refusing                    | unavailable                     |

A push that failed leaves nothing, so this never answers `verified_failed`; nor
`still_running`.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from providers._declared import MISSING_FOR_AN_HOUR
from resolver.evidence import (
    RECEIPT_REASONS,
    Capability,
    ConfigError,
    DispatchIdentity,
    Finding,
    FindingKind,
    KeyRing,
    Outcome,
    ProviderFailure,
    Reason,
    ReceiptRejected,
    declare,
    parse_provider_settings,
)
from resolver.evidence.bindings import (
    GIT_COMMIT,
    GIT_TRAILER,
    binding_evidence_digest,
    git_subject,
    verify_binding,
)

NAME = "git_ref"
RESULT_CODE = "pushed"
PLACEHOLDERS = ("dispatch_id", "idempotency_key", "project_id")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_REF = re.compile(r"^refs/[A-Za-z0-9._/{}-]+\Z")
# Remote commands this provider may run: both only read from the server.
READ_ONLY_REMOTE = frozenset({"ls-remote", "fetch"})
LOCAL = frozenset({"init", "log", "cat-file"})

_NO_REF = Finding(FindingKind.MISSING, cause="no_ref")
_NO_BOUND_COMMIT = Finding(FindingKind.MISSING, cause="no_bound_commit")
_NOT_BOUND = Finding(FindingKind.CONFLICT, cause="ref_not_bound")
_OTHER_DISPATCH = Finding(FindingKind.CONFLICT, cause="identity_mismatch")


class GitRefSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="the repository: git://, https:// or http:// (loopback only)")
    ref: str = Field(
        description="the full ref the action pushes, e.g. refs/tags/deploy/{idempotency_key}; "
        f"placeholders {list(PLACEHOLDERS)}"
    )
    depth: int = Field(default=1, ge=1, le=50, description="use 1..50 commits behind the ref")
    token_env: str | None = Field(
        default=None, description="the variable holding a read-only bearer token (https only)"
    )
    timeout_seconds: float = Field(default=10.0, gt=0, le=60, description="use 0 < s <= 60")

    @field_validator("url")
    @classmethod
    def _a_network_url(cls, value: str) -> str:
        parts = urlsplit(value)
        loopback = parts.hostname in ("127.0.0.1", "::1", "localhost")
        if parts.scheme not in ("git", "https", "http") or not parts.hostname:
            raise ValueError("must be a git://, https:// or http:// URL")
        if parts.scheme == "http" and not loopback:
            raise ValueError("plain http:// only to a loopback address; use https://")
        if parts.password:
            raise ValueError("holds a password; give a read-only token with token_env instead")
        return value

    @field_validator("ref")
    @classmethod
    def _a_full_ref(cls, value: str) -> str:
        unknown = set(_PLACEHOLDER.findall(value)) - set(PLACEHOLDERS)
        if not _REF.match(value) or ".." in value or unknown:
            raise ValueError(
                f"must be a full ref (refs/…) naming only placeholders {list(PLACEHOLDERS)}"
            )
        return value

    @property
    def per_dispatch(self) -> bool:
        """Whether each dispatch has a ref of its own (the ref names a placeholder)."""
        return bool(_PLACEHOLDER.search(self.ref))


class GitUnavailable(Exception):
    def __init__(self, failure: ProviderFailure, cause: str) -> None:
        super().__init__(cause)
        self.failure = failure
        self.cause = cause


class ReadOnlyGit:
    """The `git` program, allowed to read from one server and nothing else.

    No user or system configuration is read, no credential helper or prompt runs, only the
    URL's own protocol is allowed, and a bearer token travels in the environment (never on the
    command line); a command outside the read-only allow-list raises before anything runs."""

    def __init__(self, url: str, timeout_seconds: float, token: str | None) -> None:
        program = shutil.which("git")
        if program is None:
            raise ConfigError("provider git_ref runs the git program; install git")
        self._program = program
        self._url = url
        self._timeout_seconds = timeout_seconds
        scheme = urlsplit(url).scheme
        config = [("protocol.allow", "never"), (f"protocol.{scheme}.allow", "always")]
        config += [("credential.helper", ""), ("core.askPass", ""), ("fetch.fsckObjects", "true")]
        if token is not None:
            config.append(("http.extraHeader", f"Authorization: Bearer {token}"))
        self._env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PROTOCOL_FROM_USER": "0",
            "LC_ALL": "C",
            "GIT_CONFIG_COUNT": str(len(config)),
            **{f"GIT_CONFIG_KEY_{i}": key for i, (key, _) in enumerate(config)},
            **{f"GIT_CONFIG_VALUE_{i}": value for i, (_, value) in enumerate(config)},
        }

    def remote(self, command: str, args: Sequence[str], deadline: float, cwd: Path | None) -> str:
        if command not in READ_ONLY_REMOTE:
            raise PermissionError(f"git {command} is not a read: this client only reads")
        return self._run([command, *args], deadline, cwd, remote=True)

    def local(
        self, command: str, args: Sequence[str], deadline: float, cwd: Path, stdin: str = ""
    ) -> str:
        if command not in LOCAL:
            raise PermissionError(f"git {command} is not allowed here")
        return self._run([command, *args], deadline, cwd, remote=False, stdin=stdin)

    def _run(
        self, argv: list[str], deadline: float, cwd: Path | None, *, remote: bool, stdin: str = ""
    ) -> str:
        left = deadline - time.monotonic()
        if left <= 0:
            raise GitUnavailable(ProviderFailure.TIMEOUT, "timeout")
        try:
            # The program is git found at start-up; the arguments are this class's own.
            done = subprocess.run(  # noqa: S603
                [self._program, *argv],
                cwd=cwd,
                env=self._env,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=left,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise GitUnavailable(ProviderFailure.TIMEOUT, "timeout") from None
        if done.returncode != 0:
            # git gives no error codes, and its text is never read: a server that does not
            # answer a connection is an outage, one that answers and refuses will not heal.
            if remote and not self._reachable(deadline):
                raise GitUnavailable(ProviderFailure.OUTAGE, "git_unreachable")
            raise GitUnavailable(ProviderFailure.CONFIGURATION, "git_refused")
        return done.stdout

    def _reachable(self, deadline: float) -> bool:
        parts = urlsplit(self._url)
        port = parts.port or {"git": 9418, "https": 443, "http": 80}[parts.scheme]
        try:
            with socket.create_connection(
                (parts.hostname or "", port), timeout=max(0.1, deadline - time.monotonic())
            ):
                return True
        except OSError:
            return False


@dataclass(frozen=True)
class Commit:
    oid: str
    tree: str
    parents: tuple[str, ...]
    tokens: tuple[str, ...]


class GitRefProvider:
    """A page: one `ls-remote` for its refs, one shallow `fetch` of those found, one `log`
    per ref, all within the page's timeout."""

    capability = Capability.AUTOMATIC
    bounds_own_time = True

    def __init__(self, settings: GitRefSettings, git: ReadOnlyGit, keys: KeyRing) -> None:
        self._settings = settings
        self._git = git
        self._keys = keys
        self.timeout_seconds = settings.timeout_seconds

    def inspect(self, identity: DispatchIdentity) -> Finding:
        return self.inspect_page([identity])[identity.dispatch_id]

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        deadline = time.monotonic() + self.timeout_seconds
        refs = {i.dispatch_id: self._ref(i) for i in identities}
        try:
            commits = self._read(sorted(set(refs.values())), deadline)
        except GitUnavailable as exc:
            unavailable = Finding(FindingKind.UNAVAILABLE, failure=exc.failure, cause=exc.cause)
            return dict.fromkeys(refs, unavailable)
        return {i.dispatch_id: self._judge(i, commits.get(refs[i.dispatch_id])) for i in identities}

    def _ref(self, identity: DispatchIdentity) -> str:
        return _PLACEHOLDER.sub(lambda m: str(getattr(identity, m[1])), self._settings.ref)

    def _read(self, refs: list[str], deadline: float) -> dict[str, list[Commit]]:
        listed = self._git.remote("ls-remote", [self._settings.url, *refs], deadline, None)
        found = [
            ref for ref in refs if any(line.endswith(f"\t{ref}") for line in listed.splitlines())
        ]
        if not found:
            return {}
        with tempfile.TemporaryDirectory(prefix="resolver-git-") as scratch:
            work = Path(scratch)
            self._git.local("init", ["--bare", "--quiet", "."], deadline, work)
            specs = [f"+{ref}:refs/resolver/{n}" for n, ref in enumerate(found)]
            self._git.remote(
                "fetch",
                [
                    "--quiet",
                    "--no-tags",
                    "--no-write-fetch-head",
                    f"--depth={self._settings.depth}",
                    self._settings.url,
                    *specs,
                ],
                deadline,
                work,
            )
            return {
                ref: self._log(f"refs/resolver/{n}", deadline, work) for n, ref in enumerate(found)
            }

    def _log(self, ref: str, deadline: float, work: Path) -> list[Commit]:
        fields = f"%H%x00%T%x00%(trailers:key={GIT_TRAILER},valueonly,separator=%x1f)%x1e"
        count = f"--max-count={self._settings.depth}"
        out = self._git.local("log", [count, f"--format={fields}", ref], deadline, work)
        found = []
        for record in out.split("\x1e"):
            record = record.strip("\n")
            if record:
                oid, tree, tokens = record.split("\x00")
                found.append((oid, tree, tuple(t for t in tokens.split("\x1f") if t)))
        parents = {oid: self._parents(oid, deadline, work) for oid, _, _ in found}
        return [Commit(oid, tree, parents[oid], tokens) for oid, tree, tokens in found]

    def _parents(self, oid: str, deadline: float, work: Path) -> tuple[str, ...]:
        """The commit's parents as its object names them: a shallow copy shows its oldest
        commit without parents, but the binding covers the real ones."""
        raw = self._git.local("cat-file", ["commit", oid], deadline, work)
        header = raw.split("\n\n", 1)[0]
        return tuple(
            line.split(" ", 1)[1] for line in header.splitlines() if line.startswith("parent ")
        )

    def _judge(self, identity: DispatchIdentity, commits: list[Commit] | None) -> Finding:
        if commits is None:
            return _NO_REF
        bound_elsewhere = False
        for commit in commits:
            for token in commit.tokens:
                if f" dispatch={identity.dispatch_id} " not in f" {token} ":
                    bound_elsewhere = True
                    continue
                return self._verify(identity, commit, token.strip())
        if not self._settings.per_dispatch:
            return _NO_BOUND_COMMIT
        return _OTHER_DISPATCH if bound_elsewhere else _NOT_BOUND

    def _verify(self, identity: DispatchIdentity, commit: Commit, token: str) -> Finding:
        subject = git_subject(commit.tree, commit.parents)
        try:
            verify_binding(token, identity, kind=GIT_COMMIT, subject=subject, keys=self._keys)
        except ReceiptRejected as exc:
            return Finding(FindingKind.CONFLICT, cause=exc.reason)
        digest = binding_evidence_digest(GIT_COMMIT, commit.oid, token)
        return Finding.verified(Outcome.SUCCEEDED, digest, RESULT_CODE)


def _token(settings: GitRefSettings) -> str | None:
    if settings.token_env is None:
        return None
    if urlsplit(settings.url).scheme == "git":
        raise ConfigError("token_env: git:// carries no credentials; use an https:// URL")
    token = os.environ.get(settings.token_env)
    if not token:
        raise ConfigError(f"token_env: environment variable {settings.token_env} is not set")
    return token


@declare(
    reasons=(
        Reason("no_ref", "the repository has no such ref: the push has not landed"),
        Reason(
            "no_bound_commit",
            "no commit near the ref's tip carries this dispatch's binding trailer",
        ),
        Reason(
            "ref_not_bound",
            "the dispatch's ref exists but its commit carries no binding trailer",
        ),
        Reason("git_unreachable", "the Git server could not be reached"),
        Reason("git_refused", "the Git server refused the read (repository, access or protocol)"),
        *RECEIPT_REASONS,
    ),
    escalate_after_seconds=MISSING_FOR_AN_HOUR,
)
def create(settings: Mapping[str, Any]) -> GitRefProvider:
    """The `resolver.providers` entry point: settings from the YAML config."""
    parsed = parse_provider_settings(GitRefSettings, settings, NAME)
    keys = KeyRing.from_environment().require_keys(NAME)
    git = ReadOnlyGit(parsed.url, parsed.timeout_seconds, _token(parsed))
    return GitRefProvider(parsed, git, keys)
