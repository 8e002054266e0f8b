"""The audit chain of manual decisions: written with each decision, verified, tamper found."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from resolver.app.cli import main
from resolver.core.domain import Decision, ManualDecision, ManualResult, Principal
from resolver.human.audit import GENESIS_HASH, link_hash, verify_chain
from resolver.human.manual import ManualResolutionService
from resolver.human.signing import FactSigner
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER, write_public_keys
from tests.helpers.stores import Storage

NOW = T0 + EXEC_LEASE_MS + 60_000
ALICE = Principal(
    "alice", auth_time_ms=NOW - 60_000, amr=("pwd", "mfa"), issuer=TEST_ISSUER, token_kid="test-kid"
)


@pytest.fixture
def decided(world: World, store: Storage, sql: SQL) -> list[str]:
    """Three manual decisions, one after the other."""
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    service = ManualResolutionService(store, signer=TEST_SIGNER)
    ids = []
    for n, lease in enumerate(world.crashed(3)):
        decision = ManualDecision(
            lease.dispatch_id, Decision.CONFIRM_FAILED, f"op-{n}", lease.version, "checked"
        )
        assert service.at(NOW).decide(ALICE, decision) is ManualResult.COMMITTED
        ids.append(lease.dispatch_id)
    return ids


def _tamper(database_url: str, statement: str) -> None:
    """What the table owner (here a superuser) could do: write with the triggers off."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(statement)  # type: ignore[arg-type]


def test_each_decision_links_to_the_previous_one_and_the_chain_verifies(
    decided: list[str], store: Storage, sql: SQL
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
    decided: list[str], store: Storage, database_url: str
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
    decided: list[str], store: Storage, database_url: str
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
    decided: list[str], store: Storage, database_url: str
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
    stores = [Storage(database_url) for _ in range(4)]
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
            results.append(service.at(NOW).decide(ALICE, decision))

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


# -- what verify names: every removal, every fact a database write invented ---------------------


def test_a_middle_decision_deleted_with_its_facts_is_facts_missing(
    decided: list[str], store: Storage, database_url: str, sql: SQL
) -> None:
    # The prune flag a session could once set opens nothing: the guard wants the prune
    # function on the call stack.
    with pytest.raises(psycopg.errors.RestrictViolation, match="insert-only"):
        sql.all(
            "SET resolver.prune_active = 'on';"
            " DELETE FROM recovery_authorizations WHERE mutation_id = 'op-1'"
        )
    _tamper(
        database_url,
        "DELETE FROM recovery_authorizations WHERE mutation_id = 'op-1';"
        " DELETE FROM approved_action_recovery_resolutions WHERE mutation_id = 'op-1'",
    )
    broken = verify_chain(store).broken
    assert broken is not None and (broken.seq, broken.mutation_id) == (2, "op-1")
    assert broken.reason.startswith("facts_missing")


def test_a_link_appended_by_hand_is_named_even_with_the_head_moved(
    decided: list[str], store: Storage, database_url: str, sql: SQL
) -> None:
    (head,) = sql.all("SELECT seq, hash FROM recovery_audit_head")
    content = '{"v":1}'
    forged = link_hash(head["hash"], content)
    append = (
        "INSERT INTO recovery_audit_chain (seq, mutation_id, dispatch_id, content, prev_hash,"
        f" hash, recorded_at_ms) VALUES (4, 'op-x', 'd-x', '{content}', '{head['hash']}',"
        f" '{forged}', 0)"
    )
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="only through"):
        sql.all(append)  # the owner's own statement, triggers on
    _tamper(database_url, append)
    _tamper(database_url, f"UPDATE recovery_audit_head SET seq = 4, hash = '{forged}'")
    broken = verify_chain(store).broken
    assert broken is not None and (broken.seq, broken.mutation_id) == (4, "op-x")
    assert broken.reason.startswith("facts_missing")


def test_a_missing_head_is_named_head(
    decided: list[str], store: Storage, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tamper(database_url, "DELETE FROM recovery_audit_head")
    broken = verify_chain(store).broken
    assert broken is not None and broken.reason.startswith("head: the head row is missing")
    monkeypatch.setenv("RESOLVER_DATABASE_URL", database_url)
    result = CliRunner().invoke(main, ["audit", "verify"])
    assert result.exit_code == 1
    assert "head: the head row is missing" in result.output


def test_signatures_verify_with_the_public_keys_and_a_forged_one_is_named(
    decided: list[str], database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    keys = write_public_keys(tmp_path / "keys")
    monkeypatch.setenv("RESOLVER_DATABASE_URL", database_url)
    ok = CliRunner().invoke(main, ["audit", "verify", "--public-keys", str(keys)])
    assert ok.exit_code == 0, ok.output
    assert "signatures verified" in ok.output
    # Another key's public half: every signature names an unknown key.
    other = FactSigner(Ed25519PrivateKey.generate(), "other-1")
    wrong = write_public_keys(tmp_path / "other", other)
    unknown = CliRunner().invoke(main, ["audit", "verify", "--public-keys", str(wrong)])
    assert unknown.exit_code == 1 and "unknown_signing_key" in unknown.output
    # A fact rewritten, its link's content and every later hash rewritten to match, by the
    # owner with the triggers off: the hashes hold, the signature does not.
    _tamper(
        database_url,
        "UPDATE recovery_authorizations SET user_id = 'mallory' WHERE mutation_id = 'op-2';"
        " UPDATE approved_action_recovery_resolutions SET actor_user_id = 'mallory'"
        " WHERE mutation_id = 'op-2'",
    )
    _rehash_from(database_url, 3, lambda content: content.replace('"alice"', '"mallory"'))
    forged = CliRunner().invoke(main, ["audit", "verify", "--public-keys", str(keys)])
    assert forged.exit_code == 1, forged.output
    assert "seq 3 (mutation op-2): bad_signature: the fact of 'mallory'" in forged.output


def _rehash_from(database_url: str, seq: int, edit: Callable[[str], str]) -> None:
    """Rewrite one link's content and every hash from it on, and the head, consistently."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        links = conn.execute(
            "SELECT seq, content, prev_hash FROM recovery_audit_chain WHERE seq >= %s ORDER BY seq",
            (seq - 1,),
        ).fetchall()
        prev = links[0][2] if links[0][0] == seq else None
        for link_seq, content, prev_hash in links:
            if link_seq < seq:
                prev = conn.execute(
                    "SELECT hash FROM recovery_audit_chain WHERE seq = %s", (link_seq,)
                ).fetchone()[0]  # type: ignore[index]
                continue
            prev = prev if prev is not None else prev_hash
            new_content = edit(content) if link_seq == seq else content
            new_hash = link_hash(prev, new_content)
            conn.execute(
                "UPDATE recovery_audit_chain SET content = %s, prev_hash = %s, hash = %s"
                " WHERE seq = %s",
                (new_content, prev, new_hash, link_seq),
            )
            prev = new_hash
        conn.execute("UPDATE recovery_audit_head SET hash = %s", (prev,))


def test_verify_prints_the_head_line_and_holds_it_as_an_anchor(
    decided: list[str], database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RESOLVER_DATABASE_URL", database_url)
    ok = CliRunner().invoke(main, ["audit", "verify"])
    assert ok.exit_code == 0, ok.output
    line = json.loads(ok.output.strip().splitlines()[-1])
    assert (line["kind"], line["seq"], line["links"]) == ("resolver.audit.head", 3, 3)
    anchor = tmp_path / "anchor"
    anchor.write_text(ok.output.strip().splitlines()[-1] + "\n")
    again = CliRunner().invoke(main, ["audit", "verify", "--anchor", str(anchor)])
    assert again.exit_code == 0, again.output
    # The owner rewrites the tail and the head together: only the anchor notices.
    _rehash_from(database_url, 3, lambda content: content.replace("checked", "changed"))
    _tamper(
        database_url,
        "UPDATE approved_action_recovery_resolutions SET reason_code = 'changed'"
        " WHERE mutation_id = 'op-2'",
    )
    rewritten = CliRunner().invoke(main, ["audit", "verify", "--anchor", str(anchor)])
    assert rewritten.exit_code == 1, rewritten.output
    assert "anchor" in rewritten.output
