"""What the table owner can write around the act functions, and what catches it.

The owner holds every privilege and may switch the triggers off (here: a superuser's
`session_replication_role = replica`). The once-only indexes still refuse a signature recorded
twice in one table (23505). Everything else it can write, `resolver audit verify
--public-keys` names by kind: a decision assembled from a withdrawn proposal's and a reject's
real facts (`act_mismatch`), a fact that names no act after facts began to (`unbound_fact`), a
reject in a colleague's name without a signature (`unsigned_fact`) or without a link
(`unlinked`), and, in a rewritten tail of the chain passed off as a prune's export, a real act
counted twice (`fact_reused`), a proposal closed again (`proposal_not_open`) and a close by
the wrong person (`wrong_person`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from resolver.app.cli import main
from resolver.core.domain import (
    Act,
    Decision,
    ExecutionLease,
    ManualDecision,
    ManualResult,
    Principal,
    ProposalAction,
)
from resolver.human.audit import link_hash
from resolver.human.manual import ManualResolutionService
from resolver.human.signing import ActFacts, DecisionFacts, PersonFacts, fact_payload
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.signing import TEST_ISSUER, TEST_KEY, TEST_SIGNER, write_public_keys
from tests.helpers.stores import Storage

NOW = T0 + EXEC_LEASE_MS + 60_000
PAYMENT = "payments.charge"


def _person(user: str) -> Principal:
    return Principal(user, NOW - 60_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid")


ALICE, BOB, CAROL = _person("alice"), _person("bob"), _person("carol")


@pytest.fixture
def service(store: Storage, sql: SQL) -> ManualResolutionService:
    """Three people with the permission; `confirm_succeeded` on payments.* needs two."""
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    for user in ("alice", "bob", "carol"):
        sql.all(
            "INSERT INTO recovery_role_bindings VALUES ('proj-1', %s, 'approval.recover', 1)", user
        )
    sql.all("INSERT INTO recovery_two_person_rules VALUES ('payments.*', 'confirm_succeeded')")
    return ManualResolutionService(store, signer=TEST_SIGNER).at(NOW)


def _decision(
    lease: ExecutionLease, mutation_id: str, decision: Decision = Decision.CONFIRM_SUCCEEDED
) -> ManualDecision:
    return ManualDecision(lease.dispatch_id, decision, mutation_id, lease.version, "checked")


def _as_owner(database_url: str, statement: str, params: Any = None) -> list[Any]:
    """The table owner with the triggers off."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        cur = conn.execute(statement, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def _verify(database_url: str, tmp_path: Path, *args: str) -> Result:
    keys = write_public_keys(tmp_path / "audit-keys")
    env = {"RESOLVER_DATABASE_URL": database_url}
    return CliRunner().invoke(main, ["audit", "verify", "--public-keys", str(keys), *args], env=env)


# The stored facts as the decision's authorization facts, in settle's shape.
PROPOSER_AS_FACT = """
SELECT json_build_object(
    'user_id', p.proposed_by, 'project_id', p.project_id, 'project_version', p.project_version,
    'role_binding_version', p.role_binding_version, 'auth_time_ms', p.auth_time_ms,
    'amr', p.amr, 'authorized_at_ms', p.proposed_at_ms, 'issuer', p.issuer,
    'token_kid', p.token_kid, 'signing_kid', p.signing_kid, 'signature', p.signature,
    'act', 'propose', 'act_mutation_id', p.mutation_id, 'verified_at_ms', p.verified_at_ms)
FROM recovery_proposals AS p WHERE p.mutation_id = %s
"""
CLOSER_AS_FACT = """
SELECT json_build_object(
    'user_id', p.closed_by, 'project_id', p.project_id,
    'project_version', p.closed_project_version,
    'role_binding_version', p.closed_role_binding_version,
    'auth_time_ms', p.closed_auth_time_ms, 'amr', p.closed_amr, 'authorized_at_ms', p.closed_at_ms,
    'issuer', p.closed_issuer, 'token_kid', p.closed_token_kid,
    'signing_kid', p.closed_signing_kid, 'signature', p.closed_signature, 'act', 'reject',
    'act_mutation_id', p.closed_mutation_id, 'proposal_id', p.proposal_id,
    'verified_at_ms', p.closed_verified_at_ms)
FROM recovery_proposals AS p WHERE p.closed_mutation_id = %s
"""
SETTLE = (
    "SELECT * FROM resolver_settle_manual(%(d)s, %(m)s, 'succeeded', NULL, 'forged', %(v)s,"
    " %(actor)s, %(now)s, %(facts)s::json)"
)


def _settle_by_hand(database_url: str, lease: ExecutionLease, facts: list[Any], actor: str) -> None:
    """The owner settles a dispatch around resolver_commit_manual: the settle itself, with
    the facts it chooses, its link appended as the commit would."""
    params = {"d": lease.dispatch_id, "m": f"forged-{lease.dispatch_id}", "v": lease.version,
              "actor": actor, "now": NOW + 5, "facts": json.dumps(facts)}  # fmt: skip
    assert _as_owner(database_url, SETTLE, params)


def test_a_decision_assembled_from_a_withdrawn_and_a_rejected_proposal_is_act_mismatch(
    world: World, service: ManualResolutionService, sql: SQL, database_url: str, tmp_path: Path
) -> None:
    """What the API's role did before facts named their act, now done by the owner: alice's
    proposal (withdrawn in another case, here rejected by carol) and carol's reject, both real
    and signed over this very decision, recorded as the two people of a confirmation. Every
    signature verifies; the acts do not make a decision."""
    (lease,) = world.crashed(1, PAYMENT)
    assert service.decide(ALICE, _decision(lease, "p-1")) is ManualResult.PROPOSED
    assert service.close_proposal(CAROL, lease.dispatch_id, ProposalAction.REJECT, "r-1", "no")
    facts = [sql.one(PROPOSER_AS_FACT, "p-1")["json_build_object"]]
    facts.append(sql.one(CLOSER_AS_FACT, "r-1")["json_build_object"])
    _settle_by_hand(database_url, lease, facts, "alice")
    broken = _verify(database_url, tmp_path)
    assert broken.exit_code == 1, broken.output
    assert f"(mutation forged-{lease.dispatch_id}): act_mismatch" in broken.output


def test_the_owner_cannot_record_a_confirmation_s_fact_twice(
    world: World, service: ManualResolutionService, sql: SQL, database_url: str
) -> None:
    """Bob's confirmation of one case, copied as the second person of another: refused by the
    once-only index on signatures (23505), the triggers being off or not."""
    first, second = world.crashed(2, PAYMENT)
    assert service.decide(ALICE, _decision(first, "p-1")) is ManualResult.PROPOSED
    assert service.decide(BOB, _decision(first, "c-1")) is ManualResult.COMMITTED
    (bob,) = sql.all(
        "SELECT to_jsonb(a) - 'authorization_id' - 'mutation_id' - 'permission' AS fact"
        " FROM recovery_authorizations AS a WHERE a.act_mutation_id = 'c-1'"
    )
    with pytest.raises(psycopg.errors.UniqueViolation, match="uq_recovery_authorizations"):
        _settle_by_hand(database_url, second, [bob["fact"]], "bob")
    assert sql.resolutions(second.dispatch_id) == []


def test_a_fact_without_its_act_after_facts_name_theirs_is_unbound_fact(
    world: World, service: ManualResolutionService, database_url: str, tmp_path: Path
) -> None:
    """A v1 fact (signed, naming no act), written by the owner after the first v2 link."""
    first, second = world.crashed(2)
    assert service.decide(ALICE, _decision(first, "d-1", Decision.CONFIRM_FAILED)) is (
        ManualResult.COMMITTED
    )
    person = PersonFacts("alice", TEST_ISSUER, "test-kid", NOW - 60_000, ("mfa",), "proj-1", 1, 1)
    decision = DecisionFacts(second.dispatch_id, "succeeded", second.version, None)
    v1 = TEST_KEY.sign(fact_payload(person, decision, TEST_SIGNER.kid)).hex()
    fact = {"user_id": "alice", "project_id": "proj-1", "project_version": 1,
            "role_binding_version": 1, "auth_time_ms": NOW - 60_000, "amr": ["mfa"],
            "authorized_at_ms": NOW + 5, "issuer": TEST_ISSUER, "token_kid": "test-kid",
            "signing_kid": TEST_SIGNER.kid, "signature": v1}  # fmt: skip
    _settle_by_hand(database_url, second, [fact], "alice")
    broken = _verify(database_url, tmp_path)
    assert broken.exit_code == 1, broken.output
    assert "unbound_fact: an authorization fact names no act" in broken.output


def _reject_in_carol_s_name(database_url: str, lease: ExecutionLease) -> None:
    """The owner closes alice's open proposal as rejected by carol: no fact of carol's."""
    _as_owner(
        database_url,
        "UPDATE recovery_proposals SET closed_as = 'rejected', closed_at_ms = %s,"
        " closed_by = 'carol', closed_mutation_id = 'forged-close', close_reason_code = 'x'"
        " WHERE dispatch_id = %s AND closed_as IS NULL",
        (NOW + 5, lease.dispatch_id),
    )


def test_a_close_in_a_colleague_s_name_is_unsigned_fact_or_unlinked(
    world: World, service: ManualResolutionService, database_url: str, tmp_path: Path
) -> None:
    first, second = world.crashed(2, PAYMENT)
    for lease, mutation_id in ((first, "p-1"), (second, "p-2")):
        assert service.decide(ALICE, _decision(lease, mutation_id)) is ManualResult.PROPOSED
    assert service.close_proposal(BOB, first.dispatch_id, ProposalAction.REJECT, "r-1", "no")
    assert _verify(database_url, tmp_path).exit_code == 0
    # Without a link: the close is named by what it closed.
    _reject_in_carol_s_name(database_url, second)
    unlinked = _verify(database_url, tmp_path)
    assert unlinked.exit_code == 1, unlinked.output
    assert f"forged-close): unlinked: dispatch {second.dispatch_id} has no link" in (
        unlinked.output
    )
    # With its link appended as the close would: the closer's fact carries no signature.
    _as_owner(
        database_url,
        "SELECT resolver_audit_append('forged-close', %s, resolver_audit_close('forged-close'),"
        " %s)",
        (second.dispatch_id, NOW + 5),
    )
    unsigned = _verify(database_url, tmp_path)
    assert unsigned.exit_code == 1, unsigned.output
    assert "(mutation forged-close): unsigned_fact" in unsigned.output


def _pass_off_as_pruned(database_url: str, tmp_path: Path, content: str, mutation_id: str) -> Path:
    """The owner appends a link after the head, hashes and all, and passes it off as what a
    prune removed: the export that carries it, a run that recorded its digest and range, the
    head moved to it."""
    (head,) = _as_owner(database_url, "SELECT seq, hash FROM recovery_audit_head")
    seq, prev = head[0] + 1, head[1]
    dispatch_id = json.loads(content)["dispatch_id"]
    link = {"seq": seq, "mutation_id": mutation_id, "dispatch_id": dispatch_id,
            "content": content, "prev_hash": prev, "hash": link_hash(prev, content),
            "recorded_at_ms": NOW + 10}  # fmt: skip
    export = tmp_path / f"export-{seq}.jsonl"
    export.write_text(json.dumps({"audit_link": link}) + "\n", encoding="utf-8")
    digest = hashlib.sha256(export.read_bytes()).hexdigest()
    _as_owner(
        database_url,
        "INSERT INTO recovery_prune_runs (started_at_ms, finished_at_ms, cutoff_ms,"
        " include_audit, export_digest, db_user, audit_first_seq, audit_last_seq)"
        " VALUES (%(at)s, %(at)s, %(at)s, true, %(digest)s, 'owner', %(seq)s, %(seq)s)",
        {"at": NOW + 10, "digest": digest, "seq": seq},
    )
    _as_owner(
        database_url,
        "UPDATE recovery_audit_head SET seq = %s, prev_hash = %s, hash = %s",
        (seq, prev, link["hash"]),
    )
    return export


def _content(sql: SQL, mutation_id: str) -> str:
    return str(sql.one("SELECT content FROM recovery_audit_chain WHERE mutation_id = %s",
                       mutation_id)["content"])  # fmt: skip


def test_a_real_act_counted_twice_in_a_rewritten_tail_is_fact_reused(
    world: World, service: ManualResolutionService, sql: SQL, database_url: str, tmp_path: Path
) -> None:
    (lease,) = world.crashed(1)
    decided = service.decide(ALICE, _decision(lease, "d-1", Decision.ABANDON_UNKNOWN))
    assert decided is ManualResult.COMMITTED
    export = _pass_off_as_pruned(database_url, tmp_path, _content(sql, "d-1"), "d-1")
    broken = _verify(database_url, tmp_path, "--export", str(export))
    assert broken.exit_code == 1, broken.output
    assert "seq 2 (mutation d-1): fact_reused" in broken.output


def test_a_proposal_ended_twice_in_a_rewritten_tail_is_proposal_not_open(
    world: World, service: ManualResolutionService, sql: SQL, database_url: str, tmp_path: Path
) -> None:
    (lease,) = world.crashed(1, PAYMENT)
    assert service.decide(ALICE, _decision(lease, "p-1")) is ManualResult.PROPOSED
    assert service.close_proposal(ALICE, lease.dispatch_id, ProposalAction.WITHDRAW, "w-1", "x")
    export = _pass_off_as_pruned(database_url, tmp_path, _content(sql, "w-1"), "w-1")
    broken = _verify(database_url, tmp_path, "--export", str(export))
    assert broken.exit_code == 1, broken.output
    assert "seq 2 (mutation w-1): proposal_not_open" in broken.output


def test_a_withdrawal_by_someone_else_is_wrong_person(
    world: World, service: ManualResolutionService, sql: SQL, database_url: str, tmp_path: Path
) -> None:
    """The database refuses bob's withdrawal of alice's proposal (RS008, and a check on the
    row); a link that carries one anyway, signed with the API's key, is named by verify."""
    (lease,) = world.crashed(1, PAYMENT)
    assert service.decide(ALICE, _decision(lease, "p-1")) is ManualResult.PROPOSED
    proposal = sql.one("SELECT * FROM recovery_proposals WHERE mutation_id = 'p-1'")
    with pytest.raises(psycopg.errors.CheckViolation, match="second_person"):
        _as_owner(
            database_url,
            "UPDATE recovery_proposals SET closed_as = 'withdrawn', closed_at_ms = 1,"
            " closed_by = 'bob', closed_mutation_id = 'w-bob', close_reason_code = 'x'"
            " WHERE proposal_id = %s",
            (proposal["proposal_id"],),
        )
    person = PersonFacts("bob", TEST_ISSUER, "test-kid", NOW - 60_000, ("mfa",), "proj-1", 1, 1)
    decision = DecisionFacts(lease.dispatch_id, "succeeded", lease.version, None)
    signed = TEST_SIGNER.sign(
        person, decision, ActFacts(Act.WITHDRAW, "w-bob", proposal["proposal_id"], NOW + 1)
    )
    content = sql.one(
        "SELECT json_build_object('v', 2, 'event', 'withdraw', 'dispatch_id', p.dispatch_id,"
        " 'mutation_id', 'w-bob', 'reason_code', 'x', 'closed_at_ms', %s::bigint,"
        " 'proposal', resolver_audit_proposal(p.proposal_id, p.mutation_id, p.outcome,"
        "     p.expected_execution_version, p.evidence_digest, p.reason_code, p.proposed_by,"
        "     p.proposed_at_ms, p.expires_at_ms),"
        " 'authorizations', json_build_array("
        "     resolver_audit_authorization(p.proposed_by, 'approval.recover', p.project_id,"
        "         p.project_version, p.role_binding_version, p.auth_time_ms, p.amr,"
        "         p.proposed_at_ms, p.issuer, p.token_kid, p.signing_kid, p.signature, 'propose',"
        "         p.mutation_id, NULL, p.verified_at_ms),"
        "     resolver_audit_authorization('bob', 'approval.recover', 'proj-1', 1, 1, %s::bigint,"
        "         '{mfa}', %s::bigint, %s, 'test-kid', %s, %s, 'withdraw', 'w-bob', p.proposal_id,"
        "         %s::bigint)))::text AS content"
        " FROM recovery_proposals AS p WHERE p.mutation_id = 'p-1'",
        NOW + 1, NOW - 60_000, NOW + 1, TEST_ISSUER, TEST_SIGNER.kid, signed.signature, NOW + 1,
    )["content"]  # fmt: skip
    export = _pass_off_as_pruned(database_url, tmp_path, content, "w-bob")
    broken = _verify(database_url, tmp_path, "--export", str(export))
    assert broken.exit_code == 1, broken.output
    assert "(mutation w-bob): wrong_person: a withdraw by someone other than the proposer" in (
        broken.output
    )


def _v1_fact(lease: ExecutionLease, user: str, outcome: str = "succeeded") -> dict[str, Any]:
    """A fact as the API signed it before facts named their act (payload v1)."""
    person = PersonFacts(user, TEST_ISSUER, "test-kid", NOW - 60_000, ("mfa",), "proj-1", 1, 1)
    decision = DecisionFacts(lease.dispatch_id, outcome, lease.version, None)
    signature = TEST_KEY.sign(fact_payload(person, decision, TEST_SIGNER.kid)).hex()
    return {"user_id": user, "project_id": "proj-1", "project_version": 1,
            "role_binding_version": 1, "auth_time_ms": NOW - 60_000, "amr": ["mfa"],
            "authorized_at_ms": NOW + 5, "issuer": TEST_ISSUER, "token_kid": "test-kid",
            "signing_kid": TEST_SIGNER.kid, "signature": signature}  # fmt: skip


def test_v1_facts_recorded_before_facts_named_their_act_still_verify(
    world: World, service: ManualResolutionService, database_url: str, tmp_path: Path
) -> None:
    """A chain that begins with a decision signed as payload v1 (its import stands for a
    database whose API signed before this release) verifies with the public keys beside the
    v2 acts after it; a v1 fact that the key did not sign is still named."""
    old, new = world.crashed(2)
    _settle_by_hand(database_url, old, [_v1_fact(old, "alice")], "alice")
    assert service.decide(ALICE, _decision(new, "d-2", Decision.CONFIRM_FAILED)) is (
        ManualResult.COMMITTED
    )
    verified = _verify(database_url, tmp_path)
    assert verified.exit_code == 0, verified.output
    assert (
        "audit chain verified: 2 links (0 with pruned facts, 0 recorded before facts were "
        "signed, 1 before facts named their act); signatures verified"
    ) in verified.output
    _as_owner(
        database_url,
        "UPDATE recovery_authorizations SET amr = '{otp}' WHERE mutation_id = %s",
        (f"forged-{old.dispatch_id}",),
    )
    content = _content_of(database_url, 1)
    assert '"amr" : ["mfa"]' in content
    _rewrite_first_link(database_url, content.replace('"amr" : ["mfa"]', '"amr" : ["otp"]'))
    broken = _verify(database_url, tmp_path)
    assert broken.exit_code == 1, broken.output
    assert "seq 1" in broken.output and "bad_signature: the fact of 'alice'" in broken.output


def _content_of(database_url: str, seq: int) -> str:
    (row,) = _as_owner(
        database_url, "SELECT content FROM recovery_audit_chain WHERE seq = %s", (seq,)
    )
    return str(row[0])


def _rewrite_first_link(database_url: str, content: str) -> None:
    """The owner rewrites link 1 and every hash after it, and the head: the hashes hold."""
    links = _as_owner(database_url, "SELECT seq, content FROM recovery_audit_chain ORDER BY seq")
    prev = "0" * 64
    for seq, stored in links:
        text = content if seq == 1 else stored
        digest = link_hash(prev, text)
        _as_owner(
            database_url,
            "UPDATE recovery_audit_chain SET content = %s, prev_hash = %s, hash = %s"
            " WHERE seq = %s",
            (text, prev, digest, seq),
        )
        prev = digest
    _as_owner(database_url, "UPDATE recovery_audit_head SET hash = %s", (prev,))
