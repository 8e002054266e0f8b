"""A person's signed fact is one act, consumed once, within bounds the database sets: every
replay of stored facts, tried as each documented login would, on real PostgreSQL.

The facts are real: the API's own service, logged in as `resolver_api` and signing with the
test key, proposes, withdraws, rejects, confirms and decides. Each case then passes stored
facts (exactly as stored) or freshly signed ones to the act functions in a way the act does not
allow, as every role. The API's role and the owner get the documented SQLSTATE (RS005 a looser
bound or an unsigned fact, RS007 a fact already recorded or verified outside the clock
leeway, RS008 an act that is not the function's or the case's); every other role is refused
the function itself; nothing is ever written. The last test forges a signature, which the
database cannot check and `resolver audit verify --public-keys` names.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors, sql

from resolver.core.domain import (
    Act,
    Decision,
    ExecutionLease,
    ManualDecision,
    ManualResult,
    Principal,
    ProposalAction,
    ProposalResult,
)
from resolver.human.manual import ManualResolutionService
from resolver.human.signing import ActFacts, DecisionFacts, PersonFacts
from tests.helpers.roles import ROLES, RoleDatabase, crash, resolver_cli
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER, write_public_keys
from tests.helpers.stores import Storage

DAY_MS = 86_400_000
ACT_ROLES = ("resolver_api", "resolver_migrator")  # may call the act functions
COMMIT = (
    "SELECT * FROM resolver_commit_manual(p_dispatch_id => %(dispatch_id)s,"
    " p_mutation_id => %(mutation_id)s, p_act => %(act)s, p_proposal_id => %(proposal_id)s,"
    " p_outcome => %(outcome)s, p_evidence_digest => %(evidence_digest)s,"
    " p_reason_code => 'replayed', p_expected_execution_version => %(expected_execution_version)s,"
    " p_user_id => %(user_id)s, p_project_id => 'proj-1', p_project_version => %(project_version)s,"
    " p_role_binding_version => %(role_binding_version)s, p_auth_time_ms => %(auth_time_ms)s,"
    " p_amr => %(amr)s, p_issuer => %(issuer)s, p_token_kid => %(token_kid)s,"
    " p_signing_kid => %(signing_kid)s, p_signature => %(signature)s,"
    " p_verified_at_ms => %(verified_at_ms)s, p_max_auth_age_ms => %(max_auth_age_ms)s,"
    " p_proposal_ttl_ms => %(proposal_ttl_ms)s)"
)
CLOSE = (
    "SELECT * FROM resolver_proposal_close(p_dispatch_id => %(dispatch_id)s,"
    " p_mutation_id => %(mutation_id)s, p_act => %(act)s, p_proposal_id => %(proposal_id)s,"
    " p_reason_code => 'replayed', p_user_id => %(user_id)s, p_project_id => 'proj-1',"
    " p_project_version => %(project_version)s, p_role_binding_version => %(role_binding_version)s,"
    " p_auth_time_ms => %(auth_time_ms)s, p_amr => %(amr)s, p_issuer => %(issuer)s,"
    " p_token_kid => %(token_kid)s, p_signing_kid => %(signing_kid)s,"
    " p_signature => %(signature)s, p_verified_at_ms => %(verified_at_ms)s,"
    " p_max_auth_age_ms => %(max_auth_age_ms)s)"
)
# The stored facts, as the API's role reads them: each as the parameters of its act.
PROPOSER_FACT = """
SELECT p.dispatch_id, p.mutation_id, 'propose' AS act, NULL::bigint AS proposal_id, p.outcome,
       p.evidence_digest, p.expected_execution_version, p.proposed_by AS user_id,
       p.project_version, p.role_binding_version, p.auth_time_ms, p.amr, p.issuer, p.token_kid,
       p.signing_kid, p.signature, p.verified_at_ms, p.proposal_id AS own_proposal_id
FROM recovery_proposals AS p WHERE p.mutation_id = %s
"""
CLOSER_FACT = """
SELECT p.dispatch_id, p.closed_mutation_id AS mutation_id,
       CASE p.closed_as WHEN 'rejected' THEN 'reject' ELSE 'withdraw' END AS act, p.proposal_id,
       p.outcome, p.evidence_digest, p.expected_execution_version, p.closed_by AS user_id,
       p.closed_project_version AS project_version,
       p.closed_role_binding_version AS role_binding_version,
       p.closed_auth_time_ms AS auth_time_ms, p.closed_amr AS amr, p.closed_issuer AS issuer,
       p.closed_token_kid AS token_kid, p.closed_signing_kid AS signing_kid,
       p.closed_signature AS signature, p.closed_verified_at_ms AS verified_at_ms
FROM recovery_proposals AS p WHERE p.closed_mutation_id = %s
"""
DECISION_FACT = """
SELECT r.dispatch_id, a.act_mutation_id AS mutation_id, a.act, a.proposal_id, r.outcome,
       r.evidence_digest, r.expected_execution_version, a.user_id, a.project_version,
       a.role_binding_version, a.auth_time_ms, a.amr, a.issuer, a.token_kid, a.signing_kid,
       a.signature, a.verified_at_ms
FROM recovery_authorizations AS a
JOIN approved_action_recovery_resolutions AS r USING (mutation_id)
WHERE a.act_mutation_id = %s
"""
WRITTEN = """
SELECT (SELECT count(*) FROM approved_action_recovery_resolutions) AS resolutions,
       (SELECT count(*) FROM recovery_authorizations) AS facts,
       (SELECT count(*) FROM recovery_proposals) AS proposals,
       (SELECT count(*) FROM recovery_proposals WHERE closed_as IS NOT NULL) AS closed,
       (SELECT count(*) FROM recovery_audit_chain) AS links
"""


@dataclass(frozen=True)
class History:
    """What the API recorded, by name, and the dispatches it happened on."""

    dispatches: dict[str, ExecutionLease]
    facts: dict[str, dict[str, Any]]
    open_proposal: int
    expired_proposal: int


def _db_now(role_db: RoleDatabase) -> int:
    with role_db.connect("resolver_api") as conn:
        (row,) = conn.execute("SELECT resolver_now_ms(NULL) AS now").fetchall()
    return int(row["now"])


def _person(user: str, role_db: RoleDatabase) -> Principal:
    return Principal(user, _db_now(role_db) - 1_000, ("mfa",), TEST_ISSUER, "test-kid")


def _decision(
    lease: ExecutionLease, mutation_id: str, decision: Decision = Decision.CONFIRM_SUCCEEDED
) -> ManualDecision:
    return ManualDecision(lease.dispatch_id, decision, mutation_id, lease.version, "checked")


@contextmanager
def _policy(role_db: RoleDatabase, **bounds: int) -> Iterator[None]:
    """The decision policy set by its writer for a while, then put back."""
    update = sql.SQL("UPDATE recovery_decision_policy SET {}").format(
        sql.SQL(", ").join(
            sql.SQL("{} = {}").format(sql.Identifier(column), sql.Placeholder(column))
            for column in bounds
        )
    )
    with role_db.connect("resolver_policy_writer") as writer:
        (before,) = writer.execute("SELECT * FROM recovery_decision_policy").fetchall()
        writer.execute(update, bounds)
        try:
            yield
        finally:
            writer.execute(update, {column: before[column] for column in bounds})


def _fact(role_db: RoleDatabase, query: str, mutation_id: str) -> dict[str, Any]:
    with role_db.connect("resolver_api") as conn:
        (row,) = conn.execute(query, (mutation_id,)).fetchall()
    return dict(row)


@pytest.fixture(scope="module")
def history(role_db: RoleDatabase) -> History:
    """Real acts through the API's service, logged in as resolver_api: a withdrawn, a rejected,
    a confirmed, an expired and an open proposal, and a decision one person settled."""
    with role_db.connect("resolver_policy_writer") as platform:
        platform.execute("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
        for user in ("alice", "bob", "carol"):
            platform.execute(
                "INSERT INTO recovery_role_bindings VALUES ('proj-1', %s, 'approval.recover', 1)",
                (user,),
            )
        platform.execute("INSERT INTO recovery_two_person_rules VALUES ('*', 'confirm_succeeded')")
    names = ["withdrawn", "rejected", "confirmed", "decided", "open", "expired", "fresh", "other"]
    with Storage(role_db.urls["resolver_migrator"]) as owner:
        leases = dict(zip(names, crash(owner, len(names), _db_now(role_db) - DAY_MS), strict=True))
    with Storage(role_db.urls["resolver_api"]) as api:
        service = ManualResolutionService(api, signer=TEST_SIGNER)
        alice, bob, carol = (_person(u, role_db) for u in ("alice", "bob", "carol"))

        def decide(who: Principal, lease: str, mutation_id: str, **kw: Any) -> ManualResult:
            return service.decide(who, _decision(leases[lease], mutation_id, **kw))

        def close(who: Principal, lease: str, action: ProposalAction, m: str) -> ProposalResult:
            return service.close_proposal(who, leases[lease].dispatch_id, action, m, "changed")

        assert decide(alice, "withdrawn", "w-prop") is ManualResult.PROPOSED
        assert close(alice, "withdrawn", ProposalAction.WITHDRAW, "w-close").value == "withdrawn"
        assert decide(bob, "rejected", "r-prop") is ManualResult.PROPOSED
        assert close(carol, "rejected", ProposalAction.REJECT, "r-close").value == "rejected"
        assert decide(alice, "confirmed", "c-prop") is ManualResult.PROPOSED
        assert decide(bob, "confirmed", "c-conf") is ManualResult.COMMITTED
        decided = decide(alice, "decided", "d-dec", decision=Decision.ABANDON_UNKNOWN)
        assert decided is ManualResult.COMMITTED
        assert decide(alice, "open", "o-prop") is ManualResult.PROPOSED
        with _policy(role_db, proposal_ttl_ms=1_000):
            assert decide(carol, "expired", "x-prop") is ManualResult.PROPOSED
    facts = {
        name: _fact(role_db, query, mutation_id)
        for name, query, mutation_id in [
            ("withdrawn_propose", PROPOSER_FACT, "w-prop"),
            ("withdraw", CLOSER_FACT, "w-close"),
            ("rejected_propose", PROPOSER_FACT, "r-prop"),
            ("reject", CLOSER_FACT, "r-close"),
            ("confirmed_propose", DECISION_FACT, "c-prop"),
            ("confirm", DECISION_FACT, "c-conf"),
            ("decide", DECISION_FACT, "d-dec"),
            ("open_propose", PROPOSER_FACT, "o-prop"),
            ("expired_propose", PROPOSER_FACT, "x-prop"),
        ]
    }
    expired = facts["expired_propose"]
    with role_db.connect("resolver_api") as conn:  # the database's clock past its expiry
        # One wait, as long as the database's own clock says the proposal has left to live.
        conn.execute(
            "SELECT pg_sleep(greatest(0, p.expires_at_ms - resolver_now_ms(NULL) + 20) / 1000.0)"
            " FROM recovery_proposals AS p WHERE p.mutation_id = 'x-prop'"
        )
        (row,) = conn.execute(
            "SELECT resolver_now_ms(NULL) > p.expires_at_ms AS past FROM recovery_proposals"
            " AS p WHERE p.mutation_id = 'x-prop'"
        ).fetchall()
        assert row["past"]
    return History(
        leases, facts, facts["open_propose"]["own_proposal_id"], expired["own_proposal_id"]
    )


def _signed(
    role_db: RoleDatabase,
    history: History,
    user: str,
    act: Act,
    dispatch: str,
    *,
    proposal_id: int | None = None,
    verified_at_ms: int | None = None,
) -> dict[str, Any]:
    """A fact the API's key really signed now: `user`'s `act` on `dispatch`, for confirm
    succeeded at the dispatch's version (as the API would sign it, were it misrouted)."""
    lease = history.dispatches[dispatch]
    now = _db_now(role_db)
    mutation_id = f"s-{uuid.uuid4().hex[:10]}"
    person = PersonFacts(user, TEST_ISSUER, "test-kid", now - 1_000, ("mfa",), "proj-1", 1, 1)
    decision = DecisionFacts(lease.dispatch_id, "succeeded", lease.version, None)
    at = now if verified_at_ms is None else verified_at_ms
    fact = TEST_SIGNER.sign(person, decision, ActFacts(act, mutation_id, proposal_id, at))
    return {
        "dispatch_id": lease.dispatch_id,
        "mutation_id": mutation_id,
        "act": act.value,
        "proposal_id": proposal_id,
        "outcome": "succeeded",
        "evidence_digest": None,
        "expected_execution_version": lease.version,
        "user_id": user,
        "project_version": 1,
        "role_binding_version": 1,
        "auth_time_ms": person.auth_time_ms,
        "amr": list(person.amr),
        "issuer": TEST_ISSUER,
        "token_kid": "test-kid",
        "signing_kid": fact.signing_kid,
        "signature": fact.signature,
        "verified_at_ms": at,
    }


def _at(history: History, fact: str, dispatch: str, **changes: Any) -> dict[str, Any]:
    """A stored fact passed for another dispatch (at that dispatch's version)."""
    lease = history.dispatches[dispatch]
    moved = {"dispatch_id": lease.dispatch_id, "expected_execution_version": lease.version}
    return {**history.facts[fact], **moved, **changes}


Case = Callable[[RoleDatabase, History], tuple[str, dict[str, Any]]]
# What each case passes (the function and its arguments) and the SQLSTATE the API's role and
# the owner get. `fresh` is a dispatch with nothing on it; `open` has alice's open proposal.
CASES: dict[str, tuple[Case, str]] = {
    "withdrawn proposal re-opened with its own fact": (
        lambda db, h: (COMMIT, h.facts["withdrawn_propose"]),
        "RS007",
    ),
    "withdrawn proposal's fact proposed on another dispatch": (
        lambda db, h: (COMMIT, _at(h, "withdrawn_propose", "fresh", mutation_id="w-again")),
        "RS007",
    ),
    "rejected proposal's fact as the confirm of an open proposal": (
        lambda db, h: (
            COMMIT,
            _at(h, "rejected_propose", "open", act="confirm", proposal_id=h.open_proposal),
        ),
        "RS007",
    ),
    "rejected proposal re-opened with its own fact": (
        lambda db, h: (COMMIT, h.facts["rejected_propose"]),
        "RS007",
    ),
    "expired proposal re-proposed with its own fact": (
        lambda db, h: (COMMIT, h.facts["expired_propose"]),
        "RS007",
    ),
    "a fresh confirm of an expired proposal": (
        lambda db, h: (
            COMMIT,
            _signed(db, h, "bob", Act.CONFIRM, "expired", proposal_id=h.expired_proposal),
        ),
        "RS008",
    ),
    "a fresh confirm of a withdrawn proposal": (
        lambda db, h: (
            COMMIT,
            _signed(
                db,
                h,
                "bob",
                Act.CONFIRM,
                "withdrawn",
                proposal_id=h.facts["withdraw"]["proposal_id"],
            ),
        ),
        "RS008",
    ),
    "confirmed proposal's confirm, again, on its settled dispatch": (
        lambda db, h: (COMMIT, h.facts["confirm"]),
        "RS007",
    ),
    "confirmed proposal's confirm on another open proposal": (
        lambda db, h: (COMMIT, _at(h, "confirm", "open", proposal_id=h.open_proposal)),
        "RS007",
    ),
    "confirmed proposal's propose fact proposed again": (
        lambda db, h: (COMMIT, _at(h, "confirmed_propose", "fresh")),
        "RS007",
    ),
    "a propose fact used as the confirm of an open proposal": (
        lambda db, h: (COMMIT, _signed(db, h, "bob", Act.PROPOSE, "open")),
        "RS008",
    ),
    "a second propose where one is open": (
        lambda db, h: (COMMIT, _signed(db, h, "carol", Act.PROPOSE, "open")),
        "RS008",
    ),
    "a decide fact on another dispatch": (
        lambda db, h: (COMMIT, _at(h, "decide", "fresh")),
        "RS007",
    ),
    "a decide fact on another version": (
        lambda db, h: (COMMIT, {**h.facts["decide"], "expected_execution_version": 99}),
        "RS007",
    ),
    "a decide fact where two people are needed": (
        lambda db, h: (COMMIT, _signed(db, h, "alice", Act.DECIDE, "fresh")),
        "RS008",
    ),
    "a withdraw fact passed to the manual commit": (
        lambda db, h: (COMMIT, h.facts["withdraw"]),
        "RS008",
    ),
    "a decide fact passed to the proposal close": (
        lambda db, h: (CLOSE, h.facts["decide"]),
        "RS008",
    ),
    "a withdraw fact replayed": (
        lambda db, h: (CLOSE, h.facts["withdraw"]),
        "RS007",
    ),
    "a reject fact replayed on an open proposal": (
        lambda db, h: (CLOSE, _at(h, "reject", "open", proposal_id=h.open_proposal)),
        "RS007",
    ),
    "a withdraw in another person's name": (
        lambda db, h: (
            CLOSE,
            _signed(db, h, "bob", Act.WITHDRAW, "open", proposal_id=h.open_proposal),
        ),
        "RS008",
    ),
    "a reject of one's own proposal": (
        lambda db, h: (
            CLOSE,
            _signed(db, h, "alice", Act.REJECT, "open", proposal_id=h.open_proposal),
        ),
        "RS008",
    ),
    "a close of a proposal that is not the open one": (
        lambda db, h: (
            CLOSE,
            _signed(db, h, "alice", Act.WITHDRAW, "open", proposal_id=h.expired_proposal),
        ),
        "RS008",
    ),
    "an unsigned close": (
        lambda db, h: (
            CLOSE,
            {
                **_signed(db, h, "carol", Act.REJECT, "open", proposal_id=h.open_proposal),
                "signature": None,
                "signing_kid": None,
            },
        ),
        "RS005",
    ),
    "a fact the API verified ten minutes ago": (
        lambda db, h: (
            COMMIT,
            _signed(
                db,
                h,
                "bob",
                Act.CONFIRM,
                "open",
                proposal_id=h.open_proposal,
                verified_at_ms=_db_now(db) - 600_000,
            ),
        ),
        "RS007",
    ),
    "a looser strong-authentication age": (
        lambda db, h: (
            COMMIT,
            {
                **_signed(db, h, "bob", Act.CONFIRM, "open", proposal_id=h.open_proposal),
                "max_auth_age_ms": 10**12,
            },
        ),
        "RS005",
    ),
    "a looser proposal lifetime": (
        lambda db, h: (
            COMMIT,
            {**_signed(db, h, "carol", Act.PROPOSE, "fresh"), "proposal_ttl_ms": 10**9},
        ),
        "RS005",
    ),
    "a looser strong-authentication age on a close": (
        lambda db, h: (
            CLOSE,
            {
                **_signed(db, h, "carol", Act.REJECT, "open", proposal_id=h.open_proposal),
                "max_auth_age_ms": 10**12,
            },
        ),
        "RS005",
    ),
}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("case", CASES)
def test_a_replayed_misused_or_unbounded_fact_is_refused_for_every_role(
    role_db: RoleDatabase, history: History, role: str, case: str
) -> None:
    build, sqlstate = CASES[case]
    statement, fact = build(role_db, history)
    params = {"max_auth_age_ms": None, "proposal_ttl_ms": None, **fact}
    (before,) = role_db.admin_rows(WRITTEN)
    with role_db.connect(role) as conn:
        conn.execute("SET search_path = resolver")
        with pytest.raises(psycopg.Error) as refused:
            conn.execute(statement, params)
    expected = sqlstate if role in ACT_ROLES else "42501"  # only the API's role may call them
    assert refused.value.sqlstate == expected, refused.value
    assert role_db.admin_rows(WRITTEN) == [before]


def test_a_closed_proposal_is_never_reopened_and_a_new_one_is_a_new_act(
    role_db: RoleDatabase, history: History
) -> None:
    """After alice withdrew, bob's same decision is not a confirmation of hers: it is a new
    proposal, which a second person's own act then confirms."""
    lease = history.dispatches["withdrawn"]
    with Storage(role_db.urls["resolver_api"]) as api:
        service = ManualResolutionService(api, signer=TEST_SIGNER)
        bob = _person("bob", role_db)
        assert service.decide(bob, _decision(lease, "w-bob")) is ManualResult.PROPOSED
        (state,) = role_db.admin_rows(
            f"SELECT state FROM approved_action_executions WHERE dispatch_id = '{lease.dispatch_id}'"
        )
        assert state["state"] == "executing"
        alice = _person("alice", role_db)
        assert service.decide(alice, _decision(lease, "w-alice")) is ManualResult.COMMITTED
    facts = role_db.admin_rows(
        "SELECT a.user_id, a.act, a.act_mutation_id FROM recovery_authorizations AS a"
        " WHERE a.mutation_id = 'w-alice' ORDER BY a.user_id"
    )
    assert [(f["user_id"], f["act"], f["act_mutation_id"]) for f in facts] == [
        ("alice", "confirm", "w-alice"),
        ("bob", "propose", "w-bob"),
    ]


def test_the_bounds_are_the_policy_writer_s_and_the_api_asks_for_no_more(
    role_db: RoleDatabase, history: History
) -> None:
    """Only the policy writer sets the bounds (within sane limits); the API reads them and its
    proposals expire at the policy's lifetime when that is shorter than its own setting."""
    for role in ("resolver_api", "resolver_runtime", "resolver_executor"):
        with role_db.connect(role) as conn, pytest.raises(errors.InsufficientPrivilege):
            conn.execute("UPDATE recovery_decision_policy SET max_auth_age_ms = 3600000")
    with role_db.connect("resolver_api") as conn:
        (policy,) = conn.execute("SELECT * FROM recovery_decision_policy").fetchall()
    assert (policy["max_auth_age_ms"], policy["proposal_ttl_ms"]) == (300_000, 3_600_000)
    with role_db.connect("resolver_policy_writer") as writer, pytest.raises(errors.CheckViolation):
        writer.execute("UPDATE recovery_decision_policy SET max_auth_age_ms = 86400000")
    lease = history.dispatches["other"]
    with _policy(role_db, proposal_ttl_ms=120_000), Storage(role_db.urls["resolver_api"]) as api:
        service = ManualResolutionService(api, signer=TEST_SIGNER)
        assert service.decide(_person("carol", role_db), _decision(lease, "t-prop")) is (
            ManualResult.PROPOSED
        )
    (proposal,) = role_db.admin_rows(
        "SELECT expires_at_ms - proposed_at_ms AS ttl FROM recovery_proposals"
        " WHERE mutation_id = 't-prop'"
    )
    assert proposal["ttl"] == 120_000


def test_an_authentication_older_than_the_policy_allows_decides_nothing(
    role_db: RoleDatabase, history: History
) -> None:
    """No bound passed: the policy's five minutes hold, whatever the caller would like."""
    fact = _signed(role_db, history, "bob", Act.CONFIRM, "open", proposal_id=history.open_proposal)
    stale = _db_now(role_db) - 600_000
    (before,) = role_db.admin_rows(WRITTEN)
    with role_db.connect("resolver_api") as conn:
        rows = conn.execute(
            COMMIT,
            {**fact, "auth_time_ms": stale, "max_auth_age_ms": None, "proposal_ttl_ms": None},
        ).fetchall()
    assert rows == []
    assert role_db.admin_rows(WRITTEN) == [before]


def test_nothing_replayed_was_recorded_and_the_chain_of_acts_verifies(
    role_db: RoleDatabase, history: History, tmp_path: Path
) -> None:
    """Every act above is a link (the withdrawals and rejects too), each verifies against the
    API's key, and no refusal left a trace."""
    keys = write_public_keys(tmp_path / "audit-keys")
    verified = resolver_cli(
        role_db.urls["resolver_runtime"], "audit", "verify", "--public-keys", str(keys)
    )
    assert verified.returncode == 0, verified.stderr
    assert "signatures verified" in verified.stdout
    events = [
        row["event"]
        for row in role_db.admin_rows(
            "SELECT content::json ->> 'event' AS event FROM recovery_audit_chain ORDER BY seq"
        )
    ]
    # The history's four acts, then the new proposal's confirm when the test of a re-opened
    # proposal ran before this one on the module's database (the order the workers pick).
    assert events[:4] == ["withdraw", "reject", "confirm", "decide"]
    assert events[4:] in ([], ["confirm"])


def test_a_close_in_a_colleague_s_name_with_a_forged_signature_is_named_by_verify(
    role_db: RoleDatabase, history: History, tmp_path: Path
) -> None:
    """The API's role withdraws alice's open proposal in her name with a signature the API's
    key never made. A signature is the one thing the database cannot check: the close is
    recorded, and `resolver audit verify --public-keys` names its link. (Run last: it breaks
    the chain of this module's database.)"""
    fact = _signed(
        role_db, history, "alice", Act.WITHDRAW, "open", proposal_id=history.open_proposal
    )
    forged = {**fact, "signature": "0" * 127 + "1", "max_auth_age_ms": None}
    with role_db.connect("resolver_api") as conn:
        (row,) = conn.execute(CLOSE, forged).fetchall()
    assert row["result"] == "withdrawn"
    keys = write_public_keys(tmp_path / "audit-keys")
    verify = resolver_cli(
        role_db.urls["resolver_runtime"], "audit", "verify", "--public-keys", str(keys)
    )
    assert verify.returncode == 1, verify.stdout
    assert f"(mutation {fact['mutation_id']}): bad_signature: the fact of 'alice'" in (
        verify.stderr
    )
