"""The share settled without a person: one realistic mix of approved actions, the same crashes,
recovered with the providers a platform had before (no provider for the calls, pushes and
registry uploads: a person decides each) and with those it has now, against real PostgreSQL,
MariaDB, git daemon and OCI registry servers.

Run it as a test (it checks what each crash must become) or print the table:

    python -m tests.integration.test_manual_share [--dispatches 400] [--seed 7]

The mix, out of 100 approved actions: 40 internal database mutations, 25 calls to services
that keep idempotency records (payments, refunds, tickets), 15 pushes to Git repositories,
10 image pushes to a registry, 10 shell commands. Half of each kind crashes after its side
effect landed (the evidence exists), half before (nothing landed). Every crash is inspected
once when its lease ends, then again after an hour and a minute: what is still not settled
then is waiting (recovery-required, no window) or in the manual queue.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from resolver.core.domain import DispatchIdentity, Outcome
from resolver.core.provider import build_registry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.evidence.receipts import KeyRing, sign_receipt
from resolver.executor import git_commit_trailer, idempotency_binding, oci_annotations
from resolver.executor.client import ExecutionClient
from tests.helpers import postgres
from tests.helpers.database import EXEC_LEASE_MS, T0, new_spec
from tests.helpers.downstream import QUERY, STATUSES, MariaDbService
from tests.helpers.git_server import GitServer, running_git_server
from tests.helpers.mariadb import MariaDb, running_mariadb
from tests.helpers.postgres import DatabaseFactory
from tests.helpers.registry import Registry, image, layer_digests, running_registry
from tests.helpers.registry import available as registry_available
from tests.helpers.stores import Storage

KEYS = KeyRing({"mix-k1": bytes.fromhex("2c" * 32)}, signing_kid="mix-k1")
MIX = {  # action type: (weight out of 100, what it is)
    "db.mutation": (40, "internal database mutation"),
    "refunds.create": (25, "call to a service with idempotency records"),
    "deploy.release": (15, "push to a Git repository"),
    "image.push": (10, "image push to a registry"),
    "shell.exec": (10, "shell command"),
}
REPO = "releases"
IMAGES = "platform/images"
IMAGE_CONFIG = json.dumps({"architecture": "amd64", "os": "linux"}).encode()
HOUR_AND_A_MINUTE_MS = 3_660_000


@dataclass(frozen=True)
class Crash:
    action_type: str
    landed: bool  # the side effect happened before the executor died


def crashes(count: int, seed: int) -> list[Crash]:
    """The same crashes for every configuration: the mix by weight, half landed."""
    rng = random.Random(seed)
    kinds = [t for t, (weight, _) in MIX.items() for _ in range(weight)]
    return [Crash(rng.choice(kinds), rng.random() < 0.5) for _ in range(count)]


@dataclass(frozen=True)
class Landing:
    """Where the side effects land: the service's database, the Git server, the registry."""

    service: MariaDbService
    git: GitServer
    registry: Registry


def before(url: str, landing: Landing) -> dict[str, dict[str, Any]]:
    """Out of the box before: receipts for internal mutations, nothing for the rest."""
    del landing
    manual = {"provider": "manual_only"}
    return {
        "db.mutation": {"provider": "internal_mutation", "database_url": url},
        "refunds.create": manual,
        "deploy.release": manual,
        "image.push": manual,
        "shell.exec": manual,
    }


def after(url: str, landing: Landing) -> dict[str, dict[str, Any]]:
    """Now: the service's own records, the repository's commits and the registry's manifests
    answer for themselves; a shell command never has a question to ask."""
    manual = {"provider": "manual_only"}
    return {
        "db.mutation": {"provider": "internal_mutation", "database_url": url},
        "refunds.create": {
            "provider": "idempotency_record",
            "dialect": "mariadb",
            "database_url_env": "MIX_SERVICE_URL",
            "query": QUERY,
            "statuses": STATUSES,
        },
        "deploy.release": {
            "provider": "git_ref",
            "url": landing.git.url(REPO),
            "ref": "refs/tags/deploy/{idempotency_key}",
        },
        "image.push": {
            "provider": "oci_artifact",
            "repository": IMAGES,
            **landing.registry.settings(),
        },
        "shell.exec": manual,
    }


class World:
    """One resolver database with the crashes, and the places their side effects land."""

    def __init__(self, url: str, landing: Landing) -> None:
        self.url = url
        self.service = landing.service
        self.git = landing.git
        self.registry = landing.registry

    def crash(self, store: Storage, run: str, number: int, crash: Crash) -> str:
        spec = new_spec(crash.action_type, dispatch_id=f"mix-{run}-{number:05d}")
        executor = ExecutionClient(store, owner="mixed", lease_seconds=EXEC_LEASE_MS / 1000)
        executor.create_dispatch(spec)
        executor.at(T0).start(executor.at(T0).lease(spec.dispatch_id))
        if crash.landed:
            self.land(self.identity(spec.dispatch_id), crash.action_type)
        return spec.dispatch_id

    def identity(self, dispatch_id: str) -> DispatchIdentity:
        with psycopg.connect(self.url, row_factory=dict_row) as conn:
            row = conn.execute(
                "SELECT d.schema_version, d.dispatch_id, d.approval_request_id, d.project_id,"
                " d.action_type, d.action_digest, e.attempt, e.started_at_ms, d.idempotency_key"
                " FROM approved_action_dispatches d JOIN approved_action_executions e"
                " USING (dispatch_id) WHERE d.dispatch_id = %s",
                (dispatch_id,),
            ).fetchone()
        assert row is not None
        return DispatchIdentity(**row)

    def land(self, identity: DispatchIdentity, action_type: str) -> None:
        """The evidence the side effect left where it landed, as its writer leaves it."""
        if action_type == "db.mutation":
            receipt = sign_receipt(
                identity,
                outcome=Outcome.SUCCEEDED,
                result_code="applied",
                finished_at_ms=T0 + 5,
                receipt_id=f"m-{identity.dispatch_id}",
                keys=KEYS,
            )
            with psycopg.connect(self.url) as conn:
                conn.execute(
                    "INSERT INTO action_receipts (dispatch_id, receipt) VALUES (%s, %s)",
                    (identity.dispatch_id, psycopg.types.json.Jsonb(receipt)),
                )
        elif action_type == "refunds.create":
            token = idempotency_binding(identity, KEYS)
            self.service.record(identity.idempotency_key, token, "completed", "refunded")
        elif action_type == "deploy.release":
            files = {"release.txt": f"release {identity.dispatch_id}\n"}
            tree = self.git.tree_of(REPO, files)
            trailer = git_commit_trailer(identity, KEYS, tree=tree, parents=[])
            commit, _ = self.git.commit(REPO, files=files, message=f"Release\n\n{trailer}\n")
            self.git.set_ref(REPO, f"refs/tags/deploy/{identity.idempotency_key}", commit)
        elif action_type == "image.push":
            content = f"image {identity.dispatch_id}".encode()
            config_digest, layer_digest = layer_digests(IMAGE_CONFIG, content)
            annotations = oci_annotations(
                identity, KEYS, config_digest=config_digest, layer_digests=[layer_digest]
            )
            manifest = image(self.registry, IMAGES, annotations, content)
            self.registry.push_manifest(IMAGES, identity.idempotency_key, manifest)
        # A shell command leaves nothing any provider can read.


def recover(url: str, config: Mapping[str, Mapping[str, Any]], store: Storage) -> Counter[str]:
    """Inspect every crash when its lease ends and again after the windows; count where each
    one is: settled automatically, waiting (recovery-required) or in the manual queue."""
    registry = build_registry(config)
    settings = ReconcilerSettings(
        owner="mix", page_size=64, recovery_lease_ms=30_000, backoff_base_ms=1_000
    )
    reconciler = Reconciler(store, registry, settings, Runtime(rng=random.Random(1)))
    try:
        for at in (T0 + EXEC_LEASE_MS, T0 + EXEC_LEASE_MS + HOUR_AND_A_MINUTE_MS):
            while reconciler.at(at).run_cycle().accepted:
                pass
    finally:
        registry.close()
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT d.action_type, c.status FROM approved_action_recovery_controls c"
            " JOIN approved_action_dispatches d USING (dispatch_id)"
        ).fetchall()
    words = {"resolved": "settled", "armed": "waiting", "manual": "manual"}
    return Counter(f"{action_type}:{words[status]}" for action_type, status in rows)


def measure(
    databases: DatabaseFactory, landing: Landing, count: int, seed: int
) -> dict[str, Counter[str]]:
    """The same crashes under both configurations, each in a database of its own."""
    mix = crashes(count, seed)
    results = {}
    run = uuid.uuid4().hex[:6]
    for name, configure in (("before", before), ("after", after)):
        url = databases.create()
        with Storage(url, max_connections=4) as store:
            world = World(url, landing)
            for number, crash in enumerate(mix):
                world.crash(store, f"{run}{name[0]}", number, crash)
            results[name] = recover(url, configure(url, landing), store)
    return results


def table(results: Mapping[str, Counter[str]], count: int) -> str:
    """The figures as docs/providers.md shows them."""
    lines = [
        "| action | crashes | before: manual | after: settled | after: waiting | after: manual |",
        "|---|---|---|---|---|---|",
    ]
    before_, after_ = results["before"], results["after"]
    totals: Counter[str] = Counter()
    for action_type, (_, words) in MIX.items():
        cells = {
            "n": sum(v for k, v in after_.items() if k.startswith(f"{action_type}:")),
            "before": before_[f"{action_type}:manual"],
            **{key: after_[f"{action_type}:{key}"] for key in ("settled", "waiting", "manual")},
        }
        totals.update(cells)
        lines.append(
            f"| {words} | {cells['n']} | {cells['before']} | {cells['settled']} |"
            f" {cells['waiting']} | {cells['manual']} |"
        )
    share = {key: f"{100 * totals[key] / count:.0f} %" for key in ("before", "manual")}
    lines.append(
        f"| **all** | {totals['n']} | {totals['before']} ({share['before']}) |"
        f" {totals['settled']} | {totals['waiting']} | {totals['manual']} ({share['manual']}) |"
    )
    return "\n".join(lines)


@pytest.fixture(scope="module")
def oci_registry() -> Iterator[Registry]:
    if not registry_available():
        pytest.skip("Debian's docker-registry is needed")
    with running_registry() as registry:
        yield registry


@pytest.fixture(scope="module")
def git_server() -> Iterator[GitServer]:
    with running_git_server() as server:
        server.create(REPO)
        yield server


def test_the_same_crashes_reach_a_person_only_where_no_evidence_can_answer(
    databases: DatabaseFactory,
    mariadb: MariaDb,
    git_server: GitServer,
    oci_registry: Registry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = MariaDbService(mariadb)
    monkeypatch.setenv("MIX_SERVICE_URL", service.reader_url())
    monkeypatch.setenv("REGISTRY_READER_PASSWORD", "reader-pw")
    monkeypatch.setenv("RESOLVER_RECEIPT_KEYS", f"mix-k1={'2c' * 32}")
    try:
        count = 100
        mix = crashes(count, seed=7)
        results = measure(databases, Landing(service, git_server, oci_registry), count, seed=7)
    finally:
        service.close()
    landed = Counter(c.action_type for c in mix if c.landed)
    lost = Counter(c.action_type for c in mix if not c.landed)
    b, a = results["before"], results["after"]
    for action_type in ("refunds.create", "deploy.release", "image.push", "shell.exec"):
        assert b[f"{action_type}:manual"] == landed[action_type] + lost[action_type]
    for action_type in ("refunds.create", "deploy.release", "image.push"):
        # Bound and authentic: settled; never landed: missing past the window, to a person.
        assert a[f"{action_type}:settled"] == landed[action_type]
        assert a[f"{action_type}:manual"] == lost[action_type]
    assert a["shell.exec:manual"] == b["shell.exec:manual"]
    for side in (b, a):  # internal mutations: settled from receipts, else recovery-required
        assert side["db.mutation:settled"] == landed["db.mutation"]
        assert side["db.mutation:waiting"] == lost["db.mutation"]
    assert sum(v for k, v in a.items() if k.endswith(":manual")) < sum(
        v for k, v in b.items() if k.endswith(":manual")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dispatches", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    with ExitStack() as stack:
        server = stack.enter_context(postgres.test_server())
        databases = DatabaseFactory(server)
        stack.callback(databases.close)
        maria = stack.enter_context(running_mariadb())
        git = stack.enter_context(running_git_server())
        git.create(REPO)
        registry = stack.enter_context(running_registry())
        service = MariaDbService(maria)
        stack.callback(service.close)
        os.environ |= {
            "REGISTRY_READER_PASSWORD": "reader-pw",
            "MIX_SERVICE_URL": service.reader_url(),
            "RESOLVER_RECEIPT_KEYS": f"mix-k1={'2c' * 32}",
        }
        results = measure(databases, Landing(service, git, registry), args.dispatches, args.seed)
    print(table(results, args.dispatches))
    return 0


if __name__ == "__main__":
    sys.exit(main())
