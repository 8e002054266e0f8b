"""The audit chain of manual decisions: written with each decision, verified, tamper found."""

from __future__ import annotations

import threading

import psycopg
import pytest
from click.testing import CliRunner

from resolver.app.cli import main
from resolver.core.domain import Decision, ManualDecision, ManualResult, Principal
from resolver.db.repository import PostgresStore
from resolver.human.audit import GENESIS_HASH, link_hash, verify_chain
from resolver.human.manual import ManualResolutionService
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER

NOW = T0 + EXEC_LEASE_MS + 60_000
ALICE = Principal(
    "alice", auth_time_ms=NOW - 60_000, amr=("pwd", "mfa"), issuer=TEST_ISSUER, token_kid="test-kid"
)


@pytest.fixture
def decided(world: World, store: PostgresStore, sql: SQL) -> list[str]:
    """Three manual decisions, one after the other."""
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    service = ManualResolutionService(store, signer=TEST_SIGNER)
    ids = []
    for n, lease in enumerate(world.crashed(3)):
        decision = ManualDecision(
            lease.dispatch_id, Decision.CONFIRM_FAILED, f"op-{n}", lease.version, "checked"
        )
        assert service.decide(ALICE, decision, now_ms=NOW) is ManualResult.COMMITTED
        ids.append(lease.dispatch_id)
    return ids


def _tamper(database_url: str, statement: str) -> None:
    """What the table owner (here a superuser) could do: write with the triggers off."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(statement)  # type: ignore[arg-type]


def test_each_decision_links_to_the_previous_one_and_the_chain_verifies(
    decided: list[str], store: PostgresStore, sql: SQL
) -> None:
    links = sql.all("SELECT * FROM recovery_audit_chain ORDER BY seq")
    assert [link["seq"] for link in links] == [1, 2, 3]
    assert [link["dispatch_id"] for link in links] == decided
    assert links[0]["prev_hash"] == GENESIS_HASH
    for before, link in zip([None, *links], links, strict=False):
        assert link["hash"] == link_hash(link["prev_hash"], link["content"])
        if before is not None:
            assert link["prev_hash"] == before["hash"]
    report = verify_chain(store, page=2)  # pages of two: the walk crosses a page boundary
    assert (report.broken, report.links, report.head_seq) == (None, 3, 3)
    assert report.head_hash == links[-1]["hash"]


def test_the_chain_rows_are_insert_only(decided: list[str], sql: SQL) -> None:
    with pytest.raises(psycopg.errors.RestrictViolation, match="insert-only"):
        sql.all("UPDATE recovery_audit_chain SET content = 'x' WHERE seq = 1")


def test_an_edited_decision_is_named_by_verify(
    decided: list[str], store: PostgresStore, database_url: str
) -> None:
    _tamper(
        database_url,
        "UPDATE approved_action_recovery_resolutions SET reason_code = 'nothing_to_see'"
        " WHERE mutation_id = 'op-1'",
    )
    broken = verify_chain(store).broken
    assert broken is not None
    assert (broken.seq, broken.mutation_id) == (2, "op-1")
    assert broken.reason.startswith("facts_changed")


def test_a_rewritten_link_breaks_the_next_one(
    decided: list[str], store: PostgresStore, database_url: str
) -> None:
    # Content and hash rewritten consistently: the link itself checks, its successor does not.
    forged = "{}"
    _tamper(
        database_url,
        f"UPDATE recovery_audit_chain SET content = '{forged}',"
        f" hash = '{link_hash(GENESIS_HASH, forged)}' WHERE seq = 1",
    )
    broken = verify_chain(store).broken
    assert broken is not None and broken.seq == 1 and broken.reason.startswith("facts_changed")
    _tamper(
        database_url,
        "DELETE FROM recovery_audit_chain WHERE seq = 2",
    )
    broken = verify_chain(store).broken
    assert broken is not None and broken.reason.startswith(("facts_changed", "seq_gap"))


def test_a_removed_last_link_and_a_decision_without_link_are_found(
    decided: list[str], store: PostgresStore, database_url: str
) -> None:
    _tamper(database_url, "DELETE FROM recovery_audit_chain WHERE seq = 3")
    broken = verify_chain(store).broken
    assert broken is not None and broken.reason.startswith("head")
    _tamper(
        database_url,
        "UPDATE recovery_audit_head SET seq = 2, hash = (SELECT hash FROM recovery_audit_chain WHERE seq = 2)",
    )
    broken = verify_chain(store).broken
    assert broken is not None and broken.mutation_id == "op-2"
    assert broken.reason.startswith("unlinked")


def test_concurrent_decisions_form_one_unbroken_chain(
    world: World, database_url: str, sql: SQL
) -> None:
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    leases = world.crashed(12)
    stores = [PostgresStore(database_url) for _ in range(4)]
    start = threading.Barrier(len(stores))
    results: list[ManualResult] = []

    def decide(i: int) -> None:
        stores[i].open()
        service = ManualResolutionService(stores[i], signer=TEST_SIGNER)
        start.wait()
        for lease in leases[i::4]:
            decision = ManualDecision(
                lease.dispatch_id,
                Decision.ABANDON_UNKNOWN,
                f"c-{lease.dispatch_id}",
                lease.version,
                "concurrent",
            )
            results.append(service.decide(ALICE, decision, now_ms=NOW))

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(ManualResult.COMMITTED) == 12
    report = verify_chain(stores[0])
    for s in stores:
        s.close()
    assert (report.broken, report.links, report.head_seq) == (None, 12, 12)


def test_resolver_audit_verify_exits_1_naming_the_broken_link(
    decided: list[str], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESOLVER_DATABASE_URL", database_url)
    ok = CliRunner().invoke(main, ["audit", "verify"])
    assert ok.exit_code == 0, ok.output
    assert "audit chain verified: 3 links" in ok.output
    _tamper(
        database_url,
        "UPDATE recovery_authorizations SET amr = '{pwd}' WHERE mutation_id = 'op-2'",
    )
    broken = CliRunner().invoke(main, ["audit", "verify"])
    assert broken.exit_code == 1
    assert "seq 3 (mutation op-2): facts_changed" in broken.output
