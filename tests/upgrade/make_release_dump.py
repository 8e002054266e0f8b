"""Writes tests/upgrade/release-0.1.0.sql: a database migrated and filled by release 0.1.0's
own code, for the upgrade tests (every table holds rows, written the way that release writes
them). Run it with a checkout of that release first on the path, against an empty database:

    git worktree add --detach /tmp/release-0.1.0 c8daa64
    PYTHONPATH=/tmp/release-0.1.0 python tests/upgrade/make_release_dump.py \
        postgresql://postgres@127.0.0.1:5432/empty tests/upgrade/release-0.1.0.sql

(c8daa64 is the commit whose public surface tests/snapshots/public_api.released.json
recorded as 0.1.0.) It is not part of the suite: the dump it writes is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from release_dump import write_dump

from resolver.core.domain import (
    Completion,
    Decision,
    DispatchSpec,
    ManualDecision,
    Outcome,
    Principal,
    ProposalAction,
    action_digest,
)
from resolver.db import migrate, session
from resolver.db.repository import PostgresStore
from resolver.evidence.receipts import KeyRing
from resolver.executor.client import ExecutionClient
from resolver.executor.receipts import write_receipt
from resolver.human.manual import ManualResolutionService

INTERNAL, SHELL, RUN, PACKAGE = "db.mutation", "shell.exec", "run.create", "package.install"
PROJECT = "proj-upgrade"
KEYS = KeyRing({"k-upgrade": bytes(range(32))}, "k-upgrade")
# A key the replicas learn only later: its receipt is a conflict (unknown kid) until then.
LATER = KeyRing({"k-later": bytes(range(1, 33))}, "k-later")


def main(url: str, out: Path) -> None:
    if migrate.head_revision() != "0018_late_expire_index":
        raise SystemExit("put a checkout of release 0.1.0 first on PYTHONPATH")
    migrate.upgrade(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO recovery_projects VALUES (%s, 1)", (PROJECT,))
        for user in ("alice", "bob", "carol"):
            conn.execute(
                "INSERT INTO recovery_role_bindings VALUES (%s, %s, 'approval.recover', 1)",
                (PROJECT, user),
            )
        conn.execute(
            "INSERT INTO recovery_two_person_rules VALUES ('payments.*', 'confirm_succeeded')"
        )
    store = PostgresStore(url)
    store.open()
    client = ExecutionClient(store, owner="upgrade-executor", lease_seconds=0.3)

    # Settled long enough ago to be pruned with the audit chain they took part in.
    old_done = _started(client, INTERNAL)
    client.complete(old_done, Completion(Outcome.SUCCEEDED, "applied", f"m-{old_done.dispatch_id}"))
    old_manual = _started(client, SHELL)
    time.sleep(0.6)
    _run_once(url)  # the shell action goes to the manual queue
    _decide(store, old_manual.dispatch_id, Decision.ABANDON_UNKNOWN, "alice")
    time.sleep(1.5)

    # What stays: every state, every table.
    done = _started(client, INTERNAL)
    client.complete(done, Completion(Outcome.SUCCEEDED, "applied", f"m-{done.dispatch_id}"))
    leased = _created(client, INTERNAL)
    client.lease(leased)
    live = client.start(client.lease(_created(client, INTERNAL)))
    client.renew(live)
    crashed_ok = _started(client, INTERNAL)
    _receipt(url, crashed_ok, Outcome.SUCCEEDED)
    crashed_missing = _started(client, INTERNAL)
    crashed_shell = _started(client, SHELL)
    two_person = _started(client, "payments.refund")
    rejected = _started(client, "payments.charge")
    open_proposal = _started(client, "payments.capture")
    late = _started(client, INTERNAL)
    _receipt(url, late, Outcome.SUCCEEDED, LATER)
    run = _started(client, RUN)
    package = _started(client, PACKAGE)
    _platform_evidence(url, run, package)
    time.sleep(0.6)
    time.sleep(0.6)
    _run_once(url)  # settles crashed_ok, run and package; the rest go to people
    _decide(store, crashed_shell.dispatch_id, Decision.CONFIRM_FAILED, "alice")
    _decide(store, two_person.dispatch_id, Decision.CONFIRM_SUCCEEDED, "alice")
    _decide(store, two_person.dispatch_id, Decision.CONFIRM_SUCCEEDED, "bob")
    _decide(store, rejected.dispatch_id, Decision.CONFIRM_SUCCEEDED, "alice")
    service = ManualResolutionService(store)
    mutation = f"m-reject-{rejected.dispatch_id}"
    service.close_proposal(
        _principal("bob"), rejected.dispatch_id, ProposalAction.REJECT, mutation, "not_confirmed"
    )
    _decide(store, open_proposal.dispatch_id, Decision.CONFIRM_SUCCEEDED, "carol")
    _decide(store, late.dispatch_id, Decision.CONFIRM_FAILED, "bob")
    # Its provider now reads the receipt the executor left: evidence after the decision.
    _run_once(url, later_key=True)
    # The audit facts this prune removes are in its export: verify walks them with --export.
    export = out.with_suffix(".export.jsonl")
    export.unlink(missing_ok=True)
    _cli(url, "prune", "--older-than", "2s", "--include-audit", "--export", str(export))
    del crashed_missing
    store.close()
    write_dump(
        url,
        out,
        "A database release 0.1.0 migrated and filled (tests/upgrade/make_release_dump.py).",
    )


def _created(client: ExecutionClient, action_type: str) -> str:
    dispatch_id = f"u-{uuid.uuid4().hex[:10]}"
    client.create_dispatch(
        DispatchSpec(
            dispatch_id=dispatch_id,
            approval_request_id=f"ar-{dispatch_id}",
            project_id=PROJECT,
            action_type=action_type,
            action_digest=action_digest({"type": action_type, "id": dispatch_id}),
            idempotency_key=f"idem-{dispatch_id}",
        )
    )
    return dispatch_id


def _started(client: ExecutionClient, action_type: str):  # type: ignore[no-untyped-def]
    return client.start(client.lease(_created(client, action_type)))


def _receipt(url: str, lease, outcome: Outcome, keys: KeyRing = KEYS) -> None:  # type: ignore[no-untyped-def]
    with session.transaction(url, application_name="upgrade-executor") as conn:
        write_receipt(
            conn,
            lease,
            outcome=outcome,
            result_code="applied",
            receipt_id=f"r-{lease.dispatch_id}",
            keys=keys,
        )


def _platform_evidence(url: str, run, package) -> None:  # type: ignore[no-untyped-def]
    """What a run repository and a package installer record: a finished run bound to its
    dispatch, and an install's target, commit marker and record."""
    content = "c" * 64
    with psycopg.connect(url, autocommit=True) as conn:
        for lease in (run, package):
            row = conn.execute(
                "SELECT idempotency_key, action_digest FROM approved_action_dispatches"
                " WHERE dispatch_id = %s",
                (lease.dispatch_id,),
            ).fetchone()
            assert row is not None
            key, digest = row
            if lease is run:
                conn.execute(
                    "INSERT INTO run_origin_facts (run_id, dispatch_id, idempotency_key,"
                    " project_id, action_digest, attempt, state, result_code, finished_at_ms)"
                    " VALUES (%s, %s, %s, %s, %s, %s, 'succeeded', 'ok', 1)",
                    (
                        f"run-{lease.dispatch_id}",
                        lease.dispatch_id,
                        key,
                        PROJECT,
                        digest,
                        lease.attempt,
                    ),
                )
                continue
            conn.execute(
                "INSERT INTO package_install_targets (dispatch_id, installed_version, content_digest)"
                " VALUES (%s, '1.4.2', %s)",
                (lease.dispatch_id, content),
            )
            conn.execute(
                "INSERT INTO package_commit_markers (dispatch_id, content_digest) VALUES (%s, %s)",
                (lease.dispatch_id, content),
            )
            conn.execute(
                "INSERT INTO package_install_records (dispatch_id, idempotency_key, action_digest,"
                " attempt, target_version, content_digest, outcome, result_code)"
                " VALUES (%s, %s, %s, %s, '1.4.2', %s, 'succeeded', 'installed')",
                (lease.dispatch_id, key, digest, lease.attempt, content),
            )


def _principal(user: str) -> Principal:
    return Principal(user_id=user, auth_time_ms=int(time.time() * 1000), amr=("pwd", "mfa"))


def _version(store: PostgresStore, dispatch_id: str) -> int:
    view = store.get_execution(dispatch_id)
    assert view is not None
    return view.version


def _decide(store: PostgresStore, dispatch_id: str, decision: Decision, user: str) -> None:
    service = ManualResolutionService(store)
    service.decide(
        _principal(user),
        ManualDecision(
            dispatch_id=dispatch_id,
            decision=decision,
            mutation_id=f"m-{user}-{dispatch_id}",
            expected_execution_version=_version(store, dispatch_id),
            reason_code="operator_checked",
        ),
    )


def _config() -> str:
    path = Path(tempfile.mkdtemp()) / "providers.yaml"
    path.write_text(
        json.dumps(
            {
                "action_types": {
                    INTERNAL: {"provider": "internal_mutation"},
                    SHELL: {"provider": "manual_only"},
                    "payments.refund": {"provider": "manual_only"},
                    "payments.charge": {"provider": "manual_only"},
                    "payments.capture": {"provider": "manual_only"},
                    RUN: {"provider": "run_create"},
                    PACKAGE: {"provider": "package_install"},
                }
            }
        )
    )
    return str(path)


def _cli(url: str, *args: str, later_key: bool = False) -> None:
    keys = [KEYS, LATER] if later_key else [KEYS]
    env = dict(
        os.environ,
        RESOLVER_DATABASE_URL=url,
        RESOLVER_CONFIG=_config(),
        RESOLVER_RECEIPT_KEYS=",".join(
            f"{k.current_kid}={k.keys[k.current_kid].hex()}" for k in keys
        ),
        RESOLVER_LATE_EVIDENCE_CADENCE_SECONDS="1",
    )
    subprocess.run([sys.executable, "-m", "resolver", *args], check=True, env=env)


def _run_once(url: str, later_key: bool = False) -> None:
    _cli(url, "run", "--once", later_key=later_key)


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
