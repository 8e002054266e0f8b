"""Two people where it matters: a proposal, a second person's confirmation, and everything that
must leave the execution untouched in between (same person twice, a different decision, a
withdrawal, a completion, a renew, an expiry), on real PostgreSQL, races included."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import httpx
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.core.domain import (
    Completion,
    Decision,
    ExecutionLease,
    FindingKind,
    ManualDecision,
    ManualResult,
    Outcome,
    Principal,
    ProposalAction,
    ProposalResult,
)
from resolver.core.errors import FenceConflict, ProposalConflict
from resolver.db.retention import PostgresRetention
from resolver.human.api import RateLimiter, create_app
from resolver.human.audit import exported_links, verify_chain
from resolver.human.auth import TokenVerifier
from resolver.human.manual import ManualResolutionService
from resolver.retention import pruning
from tests.helpers.api import auth
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.oidc import AUDIENCE, ISSUER, Server, token
from tests.helpers.providers import ScriptedProvider, fixed, reconciler, verified
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

NOW = T0 + EXEC_LEASE_MS + 60_000
ALICE = Principal(
    "alice", auth_time_ms=NOW - 60_000, amr=("pwd", "mfa"), issuer=TEST_ISSUER, token_kid="test-kid"
)
BOB = Principal(
    "bob", auth_time_ms=NOW - 60_000, amr=("pwd", "hwk"), issuer=TEST_ISSUER, token_kid="test-kid"
)
CAROL = Principal(
    "carol", auth_time_ms=NOW - 60_000, amr=("otp",), issuer=TEST_ISSUER, token_kid="test-kid"
)
PAYMENT = "payments.charge"
TTL_MS = 10 * 60_000


@pytest.fixture
def policy(sql: SQL) -> SQL:
    """Three people with the permission; `confirm_succeeded` on payments.* needs two."""
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    for user in ("alice", "bob", "carol"):
        sql.all(
            "INSERT INTO recovery_role_bindings VALUES ('proj-1', %s, 'approval.recover', 1)", user
        )
    sql.all("INSERT INTO recovery_two_person_rules VALUES ('payments.*', 'confirm_succeeded')")
    return sql


@pytest.fixture
def service(store: Storage) -> ManualResolutionService:
    return ManualResolutionService(store, proposal_ttl_ms=TTL_MS, signer=TEST_SIGNER)


def _decision(
    lease: ExecutionLease,
    mutation_id: str,
    decision: Decision = Decision.CONFIRM_SUCCEEDED,
    reason: str = "vendor_console_paid",
) -> ManualDecision:
    return ManualDecision(lease.dispatch_id, decision, mutation_id, lease.version, reason, "c" * 64)


def _untouched(sql: SQL, lease: ExecutionLease) -> None:
    execution = sql.execution(lease.dispatch_id)
    assert (execution["state"], execution["version"]) == ("executing", lease.version)
    assert sql.resolutions(lease.dispatch_id) == []
    assert sql.control(lease.dispatch_id)["status"] != "resolved"


def _proposals(sql: SQL, dispatch_id: str) -> list[tuple[Any, ...]]:
    rows = sql.all(
        "SELECT proposed_by, closed_as, closed_by, close_reason_code FROM recovery_proposals"
        " WHERE dispatch_id = %s ORDER BY proposal_id",
        dispatch_id,
    )
    return [tuple(r.values()) for r in rows]


def test_a_second_person_confirms_and_both_authorizations_commit_with_the_resolution(
    world: World, store: Storage, policy: SQL, service: ManualResolutionService
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    assert service.at(NOW).decide(ALICE, _decision(lease, "op-a")) is ManualResult.PROPOSED
    _untouched(policy, lease)
    proposal = service.at(NOW + 1).open_proposal(lease.dispatch_id)
    assert proposal is not None and proposal.proposed_by == "alice"
    assert (proposal.proposed_at_ms, proposal.expires_at_ms) == (NOW, NOW + TTL_MS)
    # The proposer resending its own request is the same proposal, not a second one.
    assert service.at(NOW + 1).decide(ALICE, _decision(lease, "op-a")) is ManualResult.PROPOSED

    assert service.at(NOW + 2).decide(BOB, _decision(lease, "op-b")) is ManualResult.COMMITTED
    execution = policy.execution(lease.dispatch_id)
    assert (execution["state"], execution["version"]) == ("succeeded", lease.version + 1)
    (resolution,) = policy.resolutions(lease.dispatch_id)
    assert (resolution["actor_user_id"], resolution["mutation_id"]) == ("alice", "op-b")
    facts = policy.all(
        "SELECT user_id, authorized_at_ms FROM recovery_authorizations WHERE mutation_id = 'op-b'"
        " ORDER BY user_id"
    )
    assert [(f["user_id"], f["authorized_at_ms"]) for f in facts] == [
        ("alice", NOW),
        ("bob", NOW + 2),
    ]
    assert _proposals(policy, lease.dispatch_id) == [
        ("alice", "confirmed", "bob", "vendor_console_paid")
    ]
    # Replays by either person answer the one fact; nothing more is written.
    assert service.at(NOW + 3).decide(BOB, _decision(lease, "op-b")) is ManualResult.REPLAYED
    assert service.at(NOW + 3).decide(ALICE, _decision(lease, "op-a")) is ManualResult.REPLAYED
    # The audit link carries both authorizations, and the chain still verifies.
    (link,) = policy.all("SELECT content FROM recovery_audit_chain")
    assert link["content"].count('"user_id"') == 2
    assert verify_chain(store).broken is None


def test_the_same_person_twice_never_commits(
    world: World, policy: SQL, service: ManualResolutionService
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    service.at(NOW).decide(ALICE, _decision(lease, "op-a"))
    with pytest.raises(ProposalConflict) as refused:
        service.at(NOW + 1).decide(ALICE, _decision(lease, "op-a2"))
    assert refused.value.code == "second_person_required"
    assert refused.value.current == {
        "state": "executing",
        "version": lease.version,
        "control_status": "armed",
    }
    _untouched(policy, lease)
    assert _proposals(policy, lease.dispatch_id) == [("alice", None, None, None)]


def test_a_different_second_decision_rejects_the_proposal_and_commits_nothing(
    world: World, policy: SQL, service: ManualResolutionService
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    service.at(NOW).decide(ALICE, _decision(lease, "op-a"))
    with pytest.raises(ProposalConflict) as refused:
        service.at(NOW + 1).decide(
            BOB, _decision(lease, "op-b", Decision.CONFIRM_FAILED, "declined")
        )
    assert refused.value.code == "proposal_rejected"
    _untouched(policy, lease)
    assert _proposals(policy, lease.dispatch_id) == [("alice", "rejected", "bob", "declined")]
    # A different evidence digest is a different decision too.
    service.at(NOW + 2).decide(ALICE, _decision(lease, "op-a3"))
    other = ManualDecision(
        lease.dispatch_id, Decision.CONFIRM_SUCCEEDED, "op-c", lease.version, "paid", "d" * 64
    )
    with pytest.raises(ProposalConflict, match="rejected"):
        service.at(NOW + 3).decide(CAROL, other)
    _untouched(policy, lease)


def test_the_proposer_withdraws_and_only_the_proposer_can(
    world: World, policy: SQL, service: ManualResolutionService
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    service.at(NOW).decide(ALICE, _decision(lease, "op-a"))
    with pytest.raises(ProposalConflict) as refused:
        service.at(NOW + 1).close_proposal(
            BOB, lease.dispatch_id, ProposalAction.WITHDRAW, "w-b", "oops"
        )
    assert refused.value.code == "not_proposer"
    with pytest.raises(ProposalConflict) as refused:
        service.at(NOW + 1).close_proposal(
            ALICE, lease.dispatch_id, ProposalAction.REJECT, "r-a", "oops"
        )
    assert refused.value.code == "own_proposal"
    withdrawn = service.at(NOW + 2).close_proposal(
        ALICE, lease.dispatch_id, ProposalAction.WITHDRAW, "w-a", "typo"
    )
    assert withdrawn is ProposalResult.WITHDRAWN
    again = service.at(NOW + 3).close_proposal(
        ALICE, lease.dispatch_id, ProposalAction.WITHDRAW, "w-a", "typo"
    )
    assert again is ProposalResult.REPLAYED
    # Bob's same decision now is a proposal of its own, not a confirmation.
    assert service.at(NOW + 4).decide(BOB, _decision(lease, "op-b")) is ManualResult.PROPOSED
    _untouched(policy, lease)
    assert _proposals(policy, lease.dispatch_id) == [
        ("alice", "withdrawn", "alice", "typo"),
        ("bob", None, None, None),
    ]
    rejected = service.at(NOW + 5).close_proposal(
        CAROL, lease.dispatch_id, ProposalAction.REJECT, "r-c", "no"
    )
    assert rejected is ProposalResult.REJECTED
    with pytest.raises(ProposalConflict) as refused:
        service.at(NOW + 6).close_proposal(
            CAROL, lease.dispatch_id, ProposalAction.REJECT, "r-c2", "no"
        )
    assert refused.value.code == "no_proposal"
    _untouched(policy, lease)


@pytest.mark.parametrize("step", ["completion", "renew", "automatic_resolution"])
def test_a_new_execution_version_in_between_voids_the_proposal(
    world: World, store: Storage, policy: SQL, service: ManualResolutionService, step: str
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    service.at(NOW).decide(ALICE, _decision(lease, "op-a"))
    if step == "completion":  # the executor was only slow: its late completion lands
        world.executor.at(NOW).complete(lease, Completion(Outcome.FAILED, "declined", "late-1"))
    elif step == "renew":  # ... or it renews, late
        world.executor.at(NOW).renew(lease)
    else:  # verified evidence arrives: the page commit resolves it
        recon = reconciler(store, ScriptedProvider(verified), action_type=PAYMENT)
        recon.at(NOW).run_cycle()
        assert policy.resolutions(lease.dispatch_id)[0]["source"] == "automatic"
    assert _proposals(policy, lease.dispatch_id) == [("alice", "voided", None, "execution_changed")]
    before = policy.execution(lease.dispatch_id), policy.resolutions(lease.dispatch_id)
    with pytest.raises(FenceConflict):
        service.at(NOW + 1).decide(BOB, _decision(lease, "op-b"))
    assert (policy.execution(lease.dispatch_id), policy.resolutions(lease.dispatch_id)) == before
    assert not policy.all("SELECT 1 FROM recovery_authorizations WHERE user_id = 'bob'")


def test_an_expired_proposal_cannot_be_confirmed(
    world: World, policy: SQL, service: ManualResolutionService
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    service.at(NOW).decide(ALICE, _decision(lease, "op-a"))
    late = NOW + TTL_MS
    bob = Principal(
        "bob", auth_time_ms=late - 1000, amr=("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
    )
    assert service.at(late).open_proposal(lease.dispatch_id) is None
    # Bob's same decision after the TTL starts a proposal of his own.
    assert service.at(late).decide(bob, _decision(lease, "op-b")) is ManualResult.PROPOSED
    _untouched(policy, lease)
    assert _proposals(policy, lease.dispatch_id) == [
        ("alice", "expired", None, None),
        ("bob", None, None, None),
    ]


def test_decisions_the_rules_do_not_name_need_one_person(
    world: World, policy: SQL, service: ManualResolutionService
) -> None:
    payment, other = world.crashed(1, PAYMENT)[0], world.crashed(1, "test.action")[0]
    failed = _decision(payment, "op-f", Decision.CONFIRM_FAILED, "declined")
    assert service.at(NOW).decide(ALICE, failed) is ManualResult.COMMITTED
    assert service.at(NOW).decide(ALICE, _decision(other, "op-o")) is ManualResult.COMMITTED
    assert policy.all("SELECT * FROM recovery_proposals") == []


def test_the_database_refuses_a_single_person_resolution_however_it_is_written(
    world: World, policy: SQL, database_url: str
) -> None:
    """The settle function called directly (around resolver_commit_manual), even by the owner:
    refused by the write guard; with the guards disabled (DDL only the owner can run), the
    rule at commit still refuses a second person who is not bound or whose fact is unsigned."""
    (lease,) = world.crashed(1, PAYMENT)
    signed = f'"issuer": "i", "token_kid": "k", "signing_kid": "s", "signature": "{"ab" * 64}"'
    alice = (
        '{"user_id": "alice", "project_id": "proj-1", "project_version": 1,'
        f' "role_binding_version": 1, "auth_time_ms": 1, "amr": ["mfa"],'
        f' "authorized_at_ms": {NOW}, {signed}}}'
    )
    other = alice.replace("ab" * 64, "cd" * 64)
    invented = other.replace('"alice"', '"mallory"')
    unsigned = alice.replace('"alice"', '"bob"').replace(f", {signed}", "")
    copied = alice.replace('"alice"', '"bob"')  # alice's signature again, in bob's name
    settle = (
        "SELECT * FROM resolver_settle_manual(%s, 'op-x', 'succeeded', NULL, 'r', %s,"
        " 'alice', %s, %s::json)"
    )
    with (
        psycopg.connect(database_url) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="only through"),
    ):
        conn.execute(settle, (lease.dispatch_id, lease.version, NOW, f"[{alice}]"))
    for second in (None, invented, unsigned):
        people = f"[{alice}]" if second is None else f"[{alice}, {second}]"
        with psycopg.connect(database_url) as conn:
            for table, trigger in GUARDS:
                conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
            conn.execute(settle, (lease.dispatch_id, lease.version, NOW, people))
            # Deferred to the commit: the authorization facts come after the resolution.
            with pytest.raises(psycopg.errors.CheckViolation, match="needs 2 people"):
                conn.commit()
    # A signature counts once: the same one twice is refused at once, by its unique index.
    with psycopg.connect(database_url) as conn:
        for table, trigger in GUARDS:
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
        with pytest.raises(psycopg.errors.UniqueViolation, match="signature"):
            conn.execute(settle, (lease.dispatch_id, lease.version, NOW, f"[{alice}, {copied}]"))
    _untouched(policy, lease)


GUARDS = [
    ("approved_action_recovery_resolutions", "approved_action_recovery_resolutions_definer_write"),
    ("recovery_authorizations", "recovery_authorizations_definer_write"),
    ("recovery_audit_chain", "recovery_audit_chain_definer_write"),
    ("recovery_audit_head", "recovery_audit_head_definer_write"),
]


def test_a_proposal_is_closed_once_and_never_edited(
    world: World, policy: SQL, service: ManualResolutionService
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    service.at(NOW).decide(ALICE, _decision(lease, "op-a"))
    with pytest.raises(psycopg.errors.RestrictViolation):
        policy.all("UPDATE recovery_proposals SET proposed_by = 'bob'")
    service.at(NOW).close_proposal(ALICE, lease.dispatch_id, ProposalAction.WITHDRAW, "w", "x")
    with pytest.raises(psycopg.errors.RestrictViolation):
        policy.all("UPDATE recovery_proposals SET closed_as = 'confirmed', closed_by = 'bob'")


# -- races: history recorded, invariant checked over it ---------------------------------------

Attempt = Callable[[], str]


def _race(attempts: dict[str, Attempt]) -> dict[str, str]:
    """Run every attempt at once; each answers its result or the name of what it raised."""
    history: dict[str, str] = {}
    barrier = threading.Barrier(len(attempts))

    def run(name: str, attempt: Attempt) -> None:
        barrier.wait()
        try:
            history[name] = attempt()
        except Exception as exc:  # the history records every answer
            history[name] = getattr(exc, "code", type(exc).__name__)

    threads = [threading.Thread(target=run, args=item) for item in attempts.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return history


def _settled_once(sql: SQL, lease: ExecutionLease) -> str:
    """The invariant: exactly one terminal transition; a manual one carries two people."""
    execution = sql.execution(lease.dispatch_id)
    assert execution["state"] in ("succeeded", "failed")
    assert execution["version"] == lease.version + 1
    resolutions = sql.resolutions(lease.dispatch_id)
    assert len(resolutions) <= 1
    if resolutions and resolutions[0]["source"] == "manual":
        people = sql.all(
            "SELECT DISTINCT user_id FROM recovery_authorizations WHERE mutation_id = %s",
            resolutions[0]["mutation_id"],
        )
        assert len(people) == 2
        return "manual"
    assert sql.control(lease.dispatch_id)["closed_by"] == "completion"
    return "completion"


@pytest.mark.parametrize("round_", range(4))
def test_two_confirmers_and_a_completion_race_and_exactly_one_transition_wins(
    world: World, policy: SQL, store: Storage, round_: int
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    service = ManualResolutionService(store, proposal_ttl_ms=TTL_MS, signer=TEST_SIGNER)
    service.at(NOW).decide(ALICE, _decision(lease, "op-a"))
    history = _race(
        {
            "bob": lambda: service.at(NOW + 1).decide(BOB, _decision(lease, "op-b")).value,
            "carol": lambda: service.at(NOW + 1).decide(CAROL, _decision(lease, "op-c")).value,
            "completion": lambda: (
                world.executor.at(NOW + 1)
                .complete(lease, Completion(Outcome.SUCCEEDED, "paid", f"late-{round_}"))
                .value
            ),
        }
    )
    winner = _settled_once(policy, lease)
    committed = [name for name, result in history.items() if result == "committed"]
    assert len(committed) == 1, history
    assert (winner == "completion") == (committed == ["completion"]), history
    # Every loser learned it lost; none of them wrote.
    assert all(result != "proposed" for result in history.values()), history
    assert verify_chain(store).broken is None


@pytest.mark.parametrize("round_", range(3))
def test_a_confirmation_racing_a_renew_commits_only_on_the_version_it_saw(
    world: World, policy: SQL, store: Storage, round_: int
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    service = ManualResolutionService(store, proposal_ttl_ms=TTL_MS, signer=TEST_SIGNER)
    service.at(NOW).decide(ALICE, _decision(lease, "op-a"))
    history = _race(
        {
            "bob": lambda: service.at(NOW + 1).decide(BOB, _decision(lease, "op-b")).value,
            "renew": lambda: str(world.executor.at(NOW + 1).renew(lease).version),
        }
    )
    execution = policy.execution(lease.dispatch_id)
    if history["bob"] == "committed":
        assert execution["state"] == "succeeded" and history["renew"] != str(lease.version + 1)
        _settled_once(policy, lease)
    else:
        # The renew won: the proposal is void and nothing settled.
        assert history["renew"] == str(lease.version + 1), history
        assert execution["state"] == "executing" and policy.resolutions(lease.dispatch_id) == []
        assert _proposals(policy, lease.dispatch_id)[0][1] == "voided"


@pytest.mark.parametrize("round_", range(3))
def test_a_withdrawal_racing_a_confirmation_has_one_winner(
    world: World, policy: SQL, store: Storage, round_: int
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    service = ManualResolutionService(store, proposal_ttl_ms=TTL_MS, signer=TEST_SIGNER)
    service.at(NOW).decide(ALICE, _decision(lease, "op-a"))
    withdraw = ProposalAction.WITHDRAW
    history = _race(
        {
            "bob": lambda: service.at(NOW + 1).decide(BOB, _decision(lease, "op-b")).value,
            "alice": lambda: (
                service.at(NOW + 1)
                .close_proposal(
                    ALICE,
                    lease.dispatch_id,
                    withdraw,
                    f"w-{round_}",
                    "changed_mind",
                )
                .value
            ),
        }
    )
    proposals = _proposals(policy, lease.dispatch_id)
    if history["bob"] == "committed":
        assert history["alice"] == "no_proposal", history
        assert proposals == [("alice", "confirmed", "bob", "vendor_console_paid")]
        _settled_once(policy, lease)
    else:
        # The withdrawal won: Bob's same decision is then a proposal of his own.
        assert (history["alice"], history["bob"]) == ("withdrawn", "proposed"), history
        assert proposals == [
            ("alice", "withdrawn", "alice", "changed_mind"),
            ("bob", None, None, None),
        ]
        _untouched(policy, lease)


# -- over HTTP --------------------------------------------------------------------------------


@pytest.fixture
def api(store: Storage, jwks_file: Any, policy: SQL) -> Any:
    verifier = TokenVerifier.from_jwks_file(jwks_file, issuer=ISSUER, audience=AUDIENCE)
    service = ManualResolutionService(store, proposal_ttl_ms=TTL_MS, signer=TEST_SIGNER)
    app = create_app(store, verifier, service=service, limiter=RateLimiter(per_minute=50))
    with Server(app) as client:
        yield client


def test_over_http_propose_confirm_and_the_case_lists_and_decisions_show_it(
    api: httpx.Client, world: World, signing_key: rsa.RSAPrivateKey, sql: SQL
) -> None:
    lease = world.started(PAYMENT, now_ms=1_000_000)  # real clock: long expired
    sql.all(
        "UPDATE approved_action_recovery_controls SET status = 'manual', manual_at_ms = 1,"
        " manual_reason = 'conflict' WHERE dispatch_id = %s",
        lease.dispatch_id,
    )
    alice, bob = auth(token(signing_key)), auth(token(signing_key, sub="bob"))
    url = f"/v1/dispatches/{lease.dispatch_id}/resolution"
    decision = {
        "decision": "confirm_succeeded",
        "mutation_id": "op-a",
        "expected_execution_version": lease.version,
        "reason_code": "vendor_console_paid",
    }
    first = api.post(url, json=decision, headers=alice)
    assert first.status_code == 202, first.text
    assert first.json()["result"] == "proposed"
    assert first.json()["proposal"]["proposed_by"] == "alice"
    case = api.get(f"/v1/dispatches/{lease.dispatch_id}", headers=bob).json()
    assert case["proposal"]["decision"] == "confirm_succeeded"
    assert case["proposal"]["expected_execution_version"] == lease.version
    queue = api.get("/v1/manual-queue", headers=bob).json()["items"]
    assert [i["proposal"]["proposed_by"] for i in queue] == ["alice"]

    same = api.post(url, json={**decision, "mutation_id": "op-a2"}, headers=alice)
    assert same.status_code == 409 and same.json()["code"] == "second_person_required"
    assert same.headers["content-type"] == "application/problem+json"
    assert sql.execution(lease.dispatch_id)["state"] == "executing"

    second = api.post(url, json={**decision, "mutation_id": "op-b"}, headers=bob)
    assert second.status_code == 200, second.text
    assert second.json() == {
        "dispatch_id": lease.dispatch_id,
        "outcome": "succeeded",
        "result": "committed",
    }
    (entry,) = api.get("/v1/decisions", headers=alice).json()["items"]
    assert (entry["actor_user_id"], entry["confirmed_by"]) == ("alice", "bob")
    case = api.get(f"/v1/dispatches/{lease.dispatch_id}", headers=bob).json()
    assert case["proposal"] is None
    assert sorted((a["user_id"], a["role"]) for a in case["authorizations"]) == [
        ("alice", "proposer"),
        ("bob", "confirmer"),
    ]


def test_over_http_withdraw_reject_and_bulk_items_come_back_proposed(
    api: httpx.Client,
    world: World,
    store: Storage,
    signing_key: rsa.RSAPrivateKey,
    sql: SQL,
) -> None:
    leases = [world.started(PAYMENT, now_ms=1_000_000) for _ in range(2)]
    alice, bob = auth(token(signing_key)), auth(token(signing_key, sub="bob"))
    bulk = api.post(
        "/v1/resolutions/bulk",
        json={
            "decision": "confirm_succeeded",
            "reason_code": "vendor_console_paid",
            "items": [
                {
                    "dispatch_id": lease.dispatch_id,
                    "expected_execution_version": lease.version,
                    "mutation_id": f"bulk-{n}",
                }
                for n, lease in enumerate(leases)
            ],
        },
        headers=alice,
    )
    assert bulk.status_code == 200, bulk.text
    assert [r["result"] for r in bulk.json()["results"]] == ["proposed", "proposed"]
    # Inspected once (still missing), they wait for evidence: the waiting list shows the proposal.
    reconciler(store, ScriptedProvider(fixed(FindingKind.MISSING)), action_type=PAYMENT).run_cycle()
    waiting = api.get("/v1/waiting", headers=bob).json()["items"]
    assert [(i["dispatch_id"], i["proposal"]["proposed_by"]) for i in waiting] == [
        (lease.dispatch_id, "alice") for lease in leases
    ]
    first, second = (f"/v1/dispatches/{lease.dispatch_id}/proposal" for lease in leases)
    body = {"mutation_id": "w-1", "reason_code": "wrong_case"}
    refused = api.post(f"{first}/withdraw", json=body, headers=bob)
    assert refused.status_code == 409 and refused.json()["code"] == "not_proposer"
    withdrawn = api.post(f"{first}/withdraw", json=body, headers=alice)
    assert withdrawn.json() == {"dispatch_id": leases[0].dispatch_id, "result": "withdrawn"}
    rejected = api.post(f"{second}/reject", json={**body, "mutation_id": "r-1"}, headers=bob)
    assert rejected.json() == {"dispatch_id": leases[1].dispatch_id, "result": "rejected"}
    weak = auth(token(signing_key, sub="bob", amr=["pwd"]))
    step_up = api.post(f"{second}/reject", json={**body, "mutation_id": "r-2"}, headers=weak)
    assert step_up.status_code == 401 and step_up.json()["code"] == "step_up_required"
    bad = api.post(f"{second}/reject", json={"mutation_id": "r-3"}, headers=bob)
    assert bad.status_code == 422
    for lease in leases:
        assert sql.execution(lease.dispatch_id)["state"] == "executing"


# -- retention --------------------------------------------------------------------------------


def test_retention_exports_both_people_in_one_line_and_prunes_the_proposals(
    world: World, store: Storage, policy: SQL, database_url: str, tmp_path: Any
) -> None:
    day = 86_400_000
    old = int(policy.one("SELECT resolver_now_ms(NULL) AS ms")["ms"]) - 40 * day
    lease = world.started(PAYMENT, now_ms=old)
    at = old + EXEC_LEASE_MS + 60_000
    service = ManualResolutionService(store, proposal_ttl_ms=TTL_MS, signer=TEST_SIGNER)
    alice, bob = (
        Principal(u, at - 1_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid")
        for u in ("alice", "bob")
    )
    service.at(at).decide(alice, _decision(lease, "op-w"))
    service.at(at).close_proposal(alice, lease.dispatch_id, ProposalAction.WITHDRAW, "w", "x")
    service.at(at + 1).decide(alice, _decision(lease, "op-a"))
    assert service.at(at + 2).decide(bob, _decision(lease, "op-b")) is ManualResult.COMMITTED
    path = tmp_path / "audit.jsonl"
    with PostgresRetention(database_url) as retention, pruning.open_export(str(path)) as stream:
        options = pruning.PruneOptions(older_than_ms=30 * day, include_audit=True, export=stream)
        pruning.prune(retention, options)
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    (line,) = [entry for entry in lines if entry["dispatch"]["dispatch_id"] == lease.dispatch_id]
    assert [a["user_id"] for a in line["authorizations"]] == ["alice", "bob"]
    assert line["authorization"]["user_id"] == "alice"  # the deciding person, as before
    assert policy.all("SELECT * FROM recovery_proposals") == []
    assert policy.all("SELECT * FROM recovery_authorizations") == []
    # An --include-audit run takes the decision's link too: the export carries it, and the
    # chain verifies through it (both people's facts in its content).
    assert line["audit_link"]["mutation_id"] == "op-b"
    assert [a["user_id"] for a in json.loads(line["audit_link"]["content"])["authorizations"]] == [
        "alice",
        "bob",
    ]
    # The withdrawal is a link of its own, exported beside the decision's.
    (withdrawal,) = line["close_links"]
    assert withdrawal["mutation_id"] == "w"
    assert json.loads(withdrawal["content"])["event"] == "withdraw"
    report = verify_chain(store, exported=exported_links([path]))
    assert (report.broken, report.pruned) == (None, 2)
    assert verify_chain(store).broken is not None  # without the export the link is missing


def test_a_withdrawal_s_link_outlives_a_default_prune_and_goes_with_its_export(
    world: World, store: Storage, policy: SQL, database_url: str, tmp_path: Any
) -> None:
    """A case its executor settled after a withdrawn proposal has no decision, but the
    withdrawal is a link of the chain: a default prune keeps the identity and the proposal it
    rebuilds from; an --include-audit prune exports the link, then removes both, and the chain
    still verifies through the export."""
    day = 86_400_000
    old = int(policy.one("SELECT resolver_now_ms(NULL) AS ms")["ms"]) - 40 * day
    lease = world.started(PAYMENT, now_ms=old)
    at = old + EXEC_LEASE_MS + 60_000
    service = ManualResolutionService(store, proposal_ttl_ms=TTL_MS, signer=TEST_SIGNER)
    alice = Principal("alice", at - 1_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid")
    assert service.at(at).decide(alice, _decision(lease, "op-w")) is ManualResult.PROPOSED
    service.at(at).close_proposal(alice, lease.dispatch_id, ProposalAction.WITHDRAW, "w", "x")
    late = Completion(Outcome.SUCCEEDED, "ok", "done-late")
    world.executor.at(at + 5).complete(lease, late)
    with PostgresRetention(database_url) as retention:
        pruning.prune(retention, pruning.PruneOptions(older_than_ms=30 * day))
    assert policy.all(
        "SELECT dispatch_id FROM approved_action_dispatches WHERE dispatch_id = %s",
        lease.dispatch_id,
    )
    assert [r["closed_as"] for r in policy.all("SELECT closed_as FROM recovery_proposals")] == [
        "withdrawn"
    ]
    assert policy.all("SELECT * FROM approved_action_executions") == []
    assert verify_chain(store).broken is None
    path = tmp_path / "audit.jsonl"
    with PostgresRetention(database_url) as retention, pruning.open_export(str(path)) as stream:
        options = pruning.PruneOptions(older_than_ms=30 * day, include_audit=True, export=stream)
        report = pruning.prune(retention, options)
    assert report.audited_candidates == 1
    (line,) = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert (line["dispatch"]["dispatch_id"], line["resolution"]) == (lease.dispatch_id, None)
    assert [link["mutation_id"] for link in line["close_links"]] == ["w"]
    assert policy.all("SELECT * FROM approved_action_dispatches") == []
    assert policy.all("SELECT * FROM recovery_proposals") == []
    assert policy.all("SELECT * FROM recovery_audit_chain") == []
    verified = verify_chain(store, exported=exported_links([path]))
    assert (verified.broken, verified.pruned, verified.links) == (None, 1, 1)
    assert verify_chain(store).broken is not None  # without the export the link is missing


def test_audit_verify_catches_a_tampered_second_authorization(
    world: World,
    store: Storage,
    policy: SQL,
    service: ManualResolutionService,
    database_url: str,
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    service.at(NOW).decide(ALICE, _decision(lease, "op-a"))
    service.at(NOW + 1).decide(BOB, _decision(lease, "op-b"))
    assert verify_chain(store).broken is None
    # What the table owner could do: rewrite the confirmer's fact with the triggers off.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("UPDATE recovery_authorizations SET amr = '{pwd}' WHERE user_id = 'bob'")
    broken = verify_chain(store).broken
    assert broken is not None and broken.mutation_id == "op-b"
    assert "facts" in broken.describe()


@pytest.mark.parametrize(
    ("pattern", "action_type", "outcome", "needs_two"),
    [
        ("payments.*", "payments.charge", "succeeded", True),
        ("payments.*", "payments", "succeeded", False),  # the prefix includes its dot
        ("payments.*", "payments.charge", "failed", False),  # another decision
        ("payments.charge", "payments.charge", "succeeded", True),
        ("payments.charge", "payments.charge2", "succeeded", False),
        ("*", "shell.exec", "succeeded", True),
        ("pay*", "payments.charge", "succeeded", True),
    ],
)
def test_the_rule_reads_exact_types_prefixes_and_star(
    sql: SQL, pattern: str, action_type: str, outcome: str, needs_two: bool
) -> None:
    sql.all("INSERT INTO recovery_two_person_rules VALUES (%s, 'confirm_succeeded')", pattern)
    row = sql.one("SELECT resolver_needs_two_people(%s, %s) AS two", action_type, outcome)
    assert row["two"] is needs_two


@pytest.mark.parametrize("pattern", ["Payments.*", "payments.**", "*.charge", "", "a" * 70])
def test_a_malformed_rule_is_refused(sql: SQL, pattern: str) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        sql.all("INSERT INTO recovery_two_person_rules VALUES (%s, 'confirm_succeeded')", pattern)
