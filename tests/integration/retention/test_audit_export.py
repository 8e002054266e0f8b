"""The retention export carries the audit chain: a pruned range verifies from the export, and
a tampered exported or stored link is named by `resolver audit verify`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from resolver.app.cli import main
from resolver.core.domain import Decision, FindingKind, ManualDecision, ManualResult, Principal
from resolver.core.late_evidence import LateEvidenceSettings, LateEvidenceWatcher
from resolver.core.provider import ProviderRegistry
from resolver.db.retention import PostgresRetention
from resolver.human.audit import exported_links, link_hash, recorded_exports, verify_chain
from resolver.human.manual import ManualResolutionService
from resolver.retention import pruning as retention
from tests.helpers.database import EXEC_LEASE_MS, SQL, World
from tests.helpers.providers import ScriptedProvider, fixed
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

DAY_MS = 86_400_000


def _decide(store: Storage, world: World, at_ms: int, n: int) -> str:
    lease = world.started(now_ms=at_ms)
    decided_at = at_ms + EXEC_LEASE_MS + 60_000
    decision = ManualDecision(
        lease.dispatch_id, Decision.CONFIRM_FAILED, f"op-{n}", lease.version, "vendor_says_no"
    )
    principal = Principal(
        "alice", decided_at - 1_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
    )
    result = (
        ManualResolutionService(store, signer=TEST_SIGNER)
        .at(decided_at)
        .decide(principal, decision)
    )
    assert result is ManualResult.COMMITTED
    return lease.dispatch_id


@pytest.fixture
def chain(world: World, store: Storage, sql: SQL) -> list[str]:
    """Five decisions, seq 1..5: three 40 days old (the first contradicted by late evidence),
    two from yesterday."""
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    now = int(sql.one("SELECT resolver_now_ms(NULL) AS ms")["ms"])
    old, recent = now - 40 * DAY_MS, now - DAY_MS
    ids = [_decide(store, world, old + n * 1_000, n) for n in range(3)]
    watcher = LateEvidenceWatcher(
        store,
        ProviderRegistry({"test.action": ScriptedProvider(fixed(FindingKind.VERIFIED_SUCCEEDED))}),
        LateEvidenceSettings(owner="r1", page_size=1, pages_per_cycle=1),
    )
    assert watcher.at(old + EXEC_LEASE_MS + 61_000).run_cycle().records[0].contradicts
    ids += [_decide(store, world, recent + n * 1_000, 3 + n) for n in range(2)]
    return ids


@pytest.fixture
def pruned(chain: list[str], database_url: str, tmp_path: Path) -> Path:
    """`resolver prune --older-than 30d --include-audit --export`: the old three go."""
    path = tmp_path / "audit.jsonl"
    with PostgresRetention(database_url) as store, retention.open_export(str(path)) as stream:
        options = retention.PruneOptions(
            older_than_ms=30 * DAY_MS, include_audit=True, export=stream
        )
        report = retention.prune(store, options)
    assert report.audit == 3
    return path


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _rewrite(path: Path, seq: int, **changes: Any) -> None:
    lines = _lines(path)
    for line in lines:
        if line["audit_link"] and line["audit_link"]["seq"] == seq:
            line["audit_link"].update(changes)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_the_export_carries_each_pruned_decision_link_and_its_late_evidence(
    chain: list[str], pruned: Path, sql: SQL
) -> None:
    lines = {line["dispatch"]["dispatch_id"]: line for line in _lines(pruned)}
    assert set(lines) == set(chain[:3])
    assert [lines[d]["audit_link"]["seq"] for d in chain[:3]] == [1, 2, 3]
    assert lines[chain[0]]["late_evidence"]["agrees"] is False
    assert lines[chain[1]]["late_evidence"] is None
    # The links, late evidence and watches of the pruned decisions are gone with them.
    assert [r["seq"] for r in sql.all("SELECT seq FROM recovery_audit_chain ORDER BY seq")] == [
        4,
        5,
    ]
    assert sql.all("SELECT * FROM recovery_late_evidence") == []
    assert {r["dispatch_id"] for r in sql.all("SELECT * FROM recovery_late_watches")} == set(
        chain[3:]
    )


def test_the_prune_run_records_the_range_of_links_it_removed(
    pruned: Path, store: Storage, sql: SQL
) -> None:
    (run,) = sql.all("SELECT audit_first_seq, audit_last_seq FROM recovery_prune_runs")
    assert (run["audit_first_seq"], run["audit_last_seq"]) == (1, 3)
    exported, problems = recorded_exports(store, [pruned])
    assert (sorted(exported), problems) == ([1, 2, 3], [])
    # A run that removed only seq 1..2 does not vouch for seq 3, whatever its export says.
    sql.all("UPDATE recovery_prune_runs SET audit_last_seq = 2")
    exported, problems = recorded_exports(store, [pruned])
    assert sorted(exported) == [1, 2]
    assert problems == [f"export {pruned}: seq 3 is outside the links prune run 1 removed"]


def test_a_pruned_range_verifies_from_the_export_and_not_without_it(
    pruned: Path, store: Storage
) -> None:
    without = verify_chain(store).broken
    assert without is not None
    assert (without.seq, without.reason) == (4, "seq_gap: expected seq 1")
    report = verify_chain(store, page=1, exported=exported_links([pruned]))
    assert (report.broken, report.links, report.pruned, report.head_seq) == (None, 5, 3, 5)


def test_a_tampered_exported_link_is_named(pruned: Path, store: Storage) -> None:
    _rewrite(pruned, 2, content=_lines(pruned)[1]["audit_link"]["content"].replace("op-", "xx-"))
    broken = verify_chain(store, exported=exported_links([pruned])).broken
    assert broken is not None
    assert (broken.seq, broken.reason.split(":")[0]) == (2, "hash")


def test_a_consistently_rewritten_export_breaks_at_the_first_stored_link(
    pruned: Path, store: Storage
) -> None:
    """Rewriting the last exported link and its hash still cannot fool the stored chain."""
    link = next(line["audit_link"] for line in _lines(pruned) if line["audit_link"]["seq"] == 3)
    content = link["content"].replace("vendor_says_no", "vendor_says_yes")
    _rewrite(pruned, 3, content=content, hash=link_hash(link["prev_hash"], content))
    broken = verify_chain(store, exported=exported_links([pruned])).broken
    assert broken is not None
    assert (broken.seq, broken.reason.split(":")[0]) == (4, "prev_hash")


def test_a_tampered_stored_link_is_named_with_the_export_too(
    pruned: Path, store: Storage, database_url: str
) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("UPDATE recovery_audit_chain SET content = content || ' ' WHERE seq = 5")
    broken = verify_chain(store, exported=exported_links([pruned])).broken
    assert broken is not None
    assert (broken.seq, broken.reason.split(":")[0]) == (5, "hash")


def test_an_export_that_disagrees_with_a_stored_link_is_named(
    pruned: Path, store: Storage, sql: SQL
) -> None:
    stored = sql.one("SELECT * FROM recovery_audit_chain WHERE seq = 4")
    forged = {**stored, "recorded_at_ms": stored["recorded_at_ms"] + 1}
    with pruned.open("a") as out:
        out.write(json.dumps({"dispatch": {}, "audit_link": forged}) + "\n")
    broken = verify_chain(store, exported=exported_links([pruned])).broken
    assert broken is not None
    assert (broken.seq, broken.reason.split(":")[0]) == (4, "export")


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOLVER_DATABASE_URL", database_url)


def test_resolver_audit_verify_takes_the_export(pruned: Path, cli_env: None) -> None:
    alone = CliRunner().invoke(main, ["audit", "verify"])
    assert alone.exit_code == 1
    assert "seq 4 (mutation op-3): seq_gap" in alone.output
    ok = CliRunner().invoke(main, ["audit", "verify", "--export", str(pruned)])
    assert ok.exit_code == 0, ok.output
    assert "audit chain verified: 5 links (3 with pruned facts" in ok.output
    # Links intact, but the file is not the one the prune run recorded (a line reordered):
    # its links are not used, so the pruned range is a gap again.
    lines = pruned.read_text().splitlines(keepends=True)
    pruned.write_text("".join(reversed(lines)))
    edited = CliRunner().invoke(main, ["audit", "verify", "--export", str(pruned)])
    assert edited.exit_code == 1
    assert "seq 4 (mutation op-3): seq_gap" in edited.output
    assert f"export {pruned}: its sha256 is no prune run's export_digest" in edited.output
    pruned.write_text("not json\n")
    bad = CliRunner().invoke(main, ["audit", "verify", "--export", str(pruned)])
    assert bad.exit_code == 2
    assert "not an export record" in bad.output
