"""What each settling path appends to the outcome feed, read back through the feed's own reads:
a contradicting late finding, a bulk decision through the real API, and the project filter.

Every read waits for its records to pass the horizon (the cluster's: the fixture copies the
next test database in the background), then checks the whole feed, so a record appended twice,
or by a path that settled nothing, fails the test as surely as a missing one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.app.composition import build_telemetry
from resolver.core.domain import (
    Completion,
    Decision,
    DispatchState,
    FindingKind,
    ManualDecision,
    ManualResult,
    Outcome,
    OutcomeKind,
    OutcomeRecord,
    Principal,
    SettledBy,
)
from resolver.core.late_evidence import LateEvidenceSettings, LateEvidenceWatcher
from resolver.core.provider import ProviderRegistry
from resolver.core.runtime import Runtime
from resolver.executor.client import ExecutionClient
from resolver.human.api import RateLimiter, create_app
from resolver.human.auth import TokenVerifier
from resolver.human.manual import ManualResolutionService
from resolver.outcomes import OutcomeFeed
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World, new_spec
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.outcomes import feed_of
from tests.helpers.providers import ScriptedProvider, fixed, reconciler
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

NOW = T0 + EXEC_LEASE_MS + 60_000
ALICE = Principal(
    "alice", auth_time_ms=NOW - 60_000, amr=("pwd", "mfa"), issuer=TEST_ISSUER, token_kid="test-kid"
)


@pytest.fixture
def alice_decides(store: Storage, sql: SQL) -> ManualResolutionService:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    return ManualResolutionService(store, signer=TEST_SIGNER).at(NOW)


def _watcher(store: Storage, finding: FindingKind) -> LateEvidenceWatcher:
    settings = LateEvidenceSettings(
        owner="r1", window_ms=3_600_000, cadence_ms=60_000, lease_ms=30_000
    )
    registry = ProviderRegistry({"test.action": ScriptedProvider(fixed(finding))})
    return LateEvidenceWatcher(
        store, registry, settings, Runtime(subscribers=build_telemetry().subscribers)
    )


@pytest.mark.parametrize(
    ("late", "contradicts"),
    [(FindingKind.VERIFIED_SUCCEEDED, True), (FindingKind.VERIFIED_FAILED, False)],
)
def test_late_evidence_that_contradicts_a_decision_appends_contradicted_and_agreement_nothing(
    world: World,
    store: Storage,
    database_url: str,
    alice_decides: ManualResolutionService,
    late: FindingKind,
    contradicts: bool,
) -> None:
    (lease,) = world.crashed(1)
    decision = ManualDecision(
        lease.dispatch_id, Decision.CONFIRM_FAILED, "op-1", lease.version, "vendor_says_no"
    )
    assert alice_decides.decide(ALICE, decision) is ManualResult.COMMITTED
    report = _watcher(store, late).at(NOW + 1).run_cycle()
    assert [(r.recorded, r.agrees) for r in report.records] == [(True, not contradicts)]

    records = feed_of(database_url)
    assert all(r.dispatch_id == lease.dispatch_id for r in records)
    settled = records[0]
    assert (settled.kind, settled.state, settled.settled_by) == (
        OutcomeKind.SETTLED,
        DispatchState.FAILED,
        SettledBy.PERSON,
    )
    assert (settled.actors, settled.reason_code, settled.mutation_id) == (
        ("alice",),
        "vendor_says_no",
        "op-1",
    )
    if not contradicts:
        assert len(records) == 1
        return
    (contradicted,) = records[1:]
    # What the evidence says beside what the person decided; the state stays theirs.
    assert (contradicted.kind, contradicted.state, contradicted.settled_by) == (
        OutcomeKind.CONTRADICTED,
        DispatchState.FAILED,
        SettledBy.RESOLVER,
    )
    assert (contradicted.finding, contradicted.mutation_id, contradicted.occurred_at_ms) == (
        "verified_succeeded",
        "op-1",
        NOW + 1,
    )
    assert contradicted.evidence_digest is not None
    assert contradicted.cloud_event()["type"] == "approved-action-resolver.outcome.contradicted"
    with OutcomeFeed(database_url) as feed:
        status = feed.status(lease.dispatch_id)
        history = feed.history(lease.dispatch_id)
    assert status is not None and status.state is DispatchState.FAILED
    assert [h.kind for h in history] == ["created", "started", "settled", "contradicted"]


@pytest.fixture
def bulk_api(store: Storage, jwks_file: Path, sql: SQL) -> Iterator[httpx.Client]:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1), ('proj-2', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    app = create_app(store, verifier, limiter=RateLimiter(per_minute=5), signer=TEST_SIGNER)
    with Server(app) as client:
        yield client


def test_a_bulk_decision_appends_one_record_per_item_it_settled(
    world: World,
    store: Storage,
    database_url: str,
    bulk_api: httpx.Client,
    signing_key: rsa.RSAPrivateKey,
) -> None:
    leases = [world.started(now_ms=1_000_000) for _ in range(3)]
    spec = world.executor.create_dispatch(new_spec(project_id="proj-2"))
    other = world.executor.at(1_000_000).start(world.executor.at(1_000_000).lease(spec.dispatch_id))
    reconciler(store, ScriptedProvider(fixed(FindingKind.UNSUPPORTED))).run_cycle()
    a, b, c = leases

    def item(lease: object, version: int, mutation_id: str) -> dict[str, object]:
        return {
            "dispatch_id": lease.dispatch_id,  # type: ignore[attr-defined]
            "expected_execution_version": version,
            "mutation_id": mutation_id,
        }

    request = {
        "decision": "abandon_unknown",
        "reason_code": "node_pool_lost",
        "items": [
            item(a, a.version, "bulk-a"),
            item(b, b.version + 1, "bulk-b"),  # stale: its fence holds, nothing settles
            item(c, c.version, "bulk-c"),
            item(other, other.version, "bulk-o"),  # not alice's project
            item(a, a.version, "bulk-a"),  # an exact replay settles nothing again
        ],
    }
    answer = bulk_api.post(
        "/v1/resolutions/bulk",
        json=request,
        headers={"Authorization": f"Bearer {token(signing_key)}"},
    )
    assert answer.status_code == 200, answer.text
    assert [r["result"] for r in answer.json()["results"]] == [
        "committed",
        "conflict",
        "committed",
        "not_found",
        "replayed",
    ]
    records = feed_of(database_url)
    assert len(records) == 2
    assert {r.dispatch_id for r in records} == {a.dispatch_id, c.dispatch_id}
    for record in records:
        assert (record.kind, record.state, record.settled_by) == (
            OutcomeKind.SETTLED,
            DispatchState.BLOCKED,
            SettledBy.PERSON,
        )
        assert (record.actors, record.reason_code) == (("alice",), "node_pool_lost")
    assert {r.mutation_id for r in records} == {"bulk-a", "bulk-c"}


def test_the_project_filter_and_a_filtered_follower_miss_nothing_of_their_project(
    store: Storage, database_url: str
) -> None:
    client = ExecutionClient(store, owner="exec", lease_seconds=60)
    projects = ["proj-a", "proj-b", "proj-a", "proj-c", "proj-a", "proj-b"]
    settled: list[tuple[str, str]] = []
    for project in projects:
        spec = client.create_dispatch(new_spec(project_id=project))
        lease = client.start(client.lease(spec.dispatch_id))
        client.complete(lease, Completion(Outcome.SUCCEEDED, "ok", f"m-{spec.dispatch_id}"))
        settled.append((project, spec.dispatch_id))
    everything = feed_of(database_url)
    assert [(r.project_id, r.dispatch_id) for r in everything] == settled
    only_a = feed_of(database_url, project_id="proj-a")
    assert [r.dispatch_id for r in only_a] == [d for p, d in settled if p == "proj-a"]
    # Paging with the filter: a page's last cursor is a position in the whole feed, and the
    # next page after it holds the project's next record, whatever lies between.
    with OutcomeFeed(database_url) as feed:
        first = feed.read(limit=1, project_id="proj-a")
        second = feed.read(first[-1].cursor, limit=1, project_id="proj-a")
        assert [r.dispatch_id for r in first + second] == [r.dispatch_id for r in only_a[:2]]
        assert feed.read(only_a[-1].cursor, project_id="proj-a") == []
        # A consumer following one project, one record per batch, sees exactly its records.
        stop = threading.Event()
        seen: list[str] = []

        def handle(record: OutcomeRecord) -> None:
            seen.append(record.dispatch_id)
            if len(seen) == 3:
                stop.set()

        feed.follow("proj-a-follower", handle, stop=stop, batch=1, project_id="proj-a")
        assert seen == [r.dispatch_id for r in only_a]
        assert feed.consumer_cursor("proj-a-follower") == only_a[-1].cursor


@pytest.mark.parametrize(
    "listening", ["registered", "not registered", "lapsed", "unregistered", "switched off"]
)
def test_a_settling_commit_notifies_with_its_transaction_id_only_while_a_listener_is_registered(
    store: Storage, database_url: str, listening: str
) -> None:
    """A NOTIFY makes the cluster's notifying commits flush one after another: a settling
    commit notifies only while a listener's registration is live (and the switch is not off).
    The record is appended either way."""
    client = ExecutionClient(store, owner="exec", lease_seconds=60)
    spec = client.create_dispatch(new_spec())
    lease = client.start(client.lease(spec.dispatch_id))
    with (
        psycopg.connect(database_url, autocommit=True) as listener,
        psycopg.connect(database_url) as settling,
    ):
        listener.execute("LISTEN resolver_outcomes")
        if listening != "not registered":
            listener.execute("SELECT resolver_outcome_listen()")
        if listening == "lapsed":
            # A registration not renewed within its minute (the owner moves its end back).
            listener.execute("UPDATE recovery_outcome_listeners SET listening_until_ms = 0")
        if listening == "unregistered":
            assert listener.execute("SELECT resolver_outcome_unlisten()").fetchone() == (True,)
        if listening == "switched off":
            settling.execute("SET resolver.outcomes_notify = off")
        row = settling.execute("SELECT pg_current_xact_id()::text").fetchone()
        assert row is not None
        settling.execute(
            "SELECT * FROM resolver_execution_complete(%s, %s, %s::uuid, %s, 'succeeded', 'ok',"
            " 'm-1')",
            (lease.dispatch_id, lease.owner, lease.token, lease.version),
        )
        settling.commit()
        # A later notifying commit marks the end of what the listener waits for.
        listener.execute("NOTIFY resolver_outcomes, 'end'")
        # Notifications arrive in commit order: the settling one (if any) before the end.
        expected = [row[0], "end"] if listening == "registered" else ["end"]
        payloads = [n.payload for n in listener.notifies(timeout=30, stop_after=len(expected))]
    assert payloads == expected
    # Appended either way.
    (record,) = feed_of(database_url)
    assert record.dispatch_id == lease.dispatch_id


def test_a_listener_registers_for_its_own_session_only_and_lapsed_ones_are_removed(
    database_url: str,
) -> None:
    with (
        psycopg.connect(database_url, autocommit=True) as one,
        psycopg.connect(database_url, autocommit=True) as other,
    ):
        (until,) = one.execute("SELECT resolver_outcome_listen()").fetchone()  # type: ignore[misc]
        (now,) = one.execute("SELECT resolver_now_ms(NULL)").fetchone()  # type: ignore[misc]
        assert now < until <= now + 60_000
        other.execute("SELECT resolver_outcome_listen()")
        rows = one.execute("SELECT pid FROM recovery_outcome_listeners ORDER BY pid").fetchall()
        assert sorted(r[0] for r in rows) == sorted([one.info.backend_pid, other.info.backend_pid])
        # Another session's lapsed registration goes with the next registration.
        one.execute(
            "UPDATE recovery_outcome_listeners SET listening_until_ms = 0 WHERE pid = %s",
            (other.info.backend_pid,),
        )
        one.execute("SELECT resolver_outcome_listen()")
        rows = one.execute("SELECT pid FROM recovery_outcome_listeners").fetchall()
        assert rows == [(one.info.backend_pid,)]
        # Ending a registration ends only the caller's.
        assert other.execute("SELECT resolver_outcome_unlisten()").fetchone() == (False,)
        assert one.execute("SELECT resolver_outcome_unlisten()").fetchone() == (True,)
        assert one.execute("SELECT count(*) FROM recovery_outcome_listeners").fetchone() == (0,)


def test_only_the_appends_write_the_feed_not_even_the_owner_by_hand(
    store: Storage, database_url: str
) -> None:
    client = ExecutionClient(store, owner="exec", lease_seconds=60)
    spec = client.create_dispatch(new_spec())
    lease = client.start(client.lease(spec.dispatch_id))
    client.complete(lease, Completion(Outcome.SUCCEEDED, "ok", "m-1"))
    # The tests connect as the schema's owner (a superuser): every privilege check passes, the
    # guard still refuses a hand-written insert, and the immutability trigger a rewrite.
    with psycopg.connect(database_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="outcome appends"):
            conn.execute(
                "INSERT INTO recovery_outcomes (kind, dispatch_id, approval_request_id,"
                " project_id, action_type, state, settled_by, occurred_at_ms)"
                " VALUES ('settled', 'x', 'x', 'x', 'x', 'succeeded', 'executor', 0)"
            )
        for statement in (
            "UPDATE recovery_outcomes SET state = 'failed'",
            "DELETE FROM recovery_outcomes",
        ):
            with pytest.raises(psycopg.errors.RestrictViolation, match="insert-only"):
                conn.execute(statement)  # type: ignore[call-overload]
    (record,) = feed_of(database_url)
    assert (record.dispatch_id, record.state) == (spec.dispatch_id, DispatchState.SUCCEEDED)
