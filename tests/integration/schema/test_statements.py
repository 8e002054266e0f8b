"""Every named statement in queries.sql parses and plans against the migrated schema."""

from __future__ import annotations

import psycopg
import pytest

from resolver.db.statements import all_statements

DUMMY = {
    "now_ms": 1,
    "dispatch_id": "d",
    "idempotency_key": "k",
    "approval_request_id": "a",
    "project_id": "p",
    "action_type": "t",
    "action_digest": "0" * 64,
    "schema_version": 1,
    "supersedes_dispatch_id": None,
    "owner": "o",
    "lease_ms": 1,
    "page_size": 1,
    "token": "00000000-0000-0000-0000-000000000000",
    "version": 1,
    "outcome": "succeeded",
    "result_code": "ok",
    "mutation_id": "m",
    "evidence_digest": None,
    "dispatch_ids": ["d"],
    "recovery_tokens": ["00000000-0000-0000-0000-000000000000"],
    "recovery_versions": [1],
    "items": "[]",
    "user_id": "u",
    "amr": ["mfa"],
    "issuer": "https://issuer.test",
    "token_kid": "k",
    "signing_kid": "s",
    "signature": "ab" * 64,
    "auth_time_ms": 1,
    "expected_execution_version": 1,
    "max_auth_age_ms": 1,
    "project_version": 1,
    "reason_code": "r",
    "role_binding_version": 1,
    "after_dispatch_id": "",
    "after_since_ms": 0,
    "after_seq": 0,
    "min_age_ms": 0,
    "last_finding": None,
    "overridden_finding": None,
    "q": None,
    "summary": None,
    "open_proposal": False,
    "sort": "age",
    "after_key": "",
    "last_reason": None,
    "action_summary": None,
    "actor_user_id": None,
    "since_ms": 0,
    "until_ms": 1,
    "before_ms": 1,
    "before_id": 1,
    "limit": 1,
    "count_cap": 1,
    "run_id": 1,
    "cutoff_ms": 1,
    "include_audit": False,
    "after": "",
    "export_digest": None,
    "actor": "a",
    "lock_timeout": "1s",
    "receipt": "{}",
    "xact_id": "1",
    "proposal_ttl_ms": 60_000,
    "tamper_acknowledged": False,
    "tampering_reasons": ["bad_signature"],
    "act": "withdraw",
    "proposal_id": 1,
    "verified_at_ms": 1,
    "acts_since_ms": None,
    "window_ms": 1,
    "renamed": "{}",
    "revision": "r",
    "stamp": "s",
    "cursor": "",
    "consumer": "c",
    "past_consumers": False,
}


@pytest.mark.parametrize("name", sorted(all_statements()))
def test_statement_parses_and_plans(database_url: str, name: str) -> None:
    text = all_statements()[name]
    with psycopg.connect(database_url) as conn:
        plan = conn.execute(f"EXPLAIN {text}", DUMMY).fetchall()  # type: ignore[arg-type]
    assert plan, name


@pytest.mark.parametrize("name", ["execution_lease_start", "execution_start_identity"])
def test_composed_protocol_calls_plan_as_the_one_row_they_answer(
    database_url: str, name: str
) -> None:
    """Each protocol function declares its one row (ROWS 1): calls composed LATERAL in one
    statement are planned as one row, far below the cost at which PostgreSQL would compile
    the plan (JIT) at every call, where a thousand rows per call multiplied past it."""
    text = all_statements()[name]
    with psycopg.connect(database_url) as conn:
        row = conn.execute(f"EXPLAIN (FORMAT JSON) {text}", DUMMY).fetchone()
        jit_above_cost = float(conn.execute("SHOW jit_above_cost").fetchone()[0])  # type: ignore[index]
    assert row is not None
    plan = row[0][0]["Plan"]
    assert plan["Plan Rows"] == 1
    assert plan["Total Cost"] < jit_above_cost / 1000


def test_every_statement_is_used_by_the_repository() -> None:
    from pathlib import Path

    import resolver.db.migrate as migrate
    import resolver.db.mutation as mutation
    import resolver.db.retention as prune_repo
    import resolver.db.statements as statements
    import resolver.db.store as store

    # The port stores run them all but the schema's revision, which migrate reads; the
    # retention statements run in resolver/db/retention.py; the claim is rendered with its
    # page size by resolver/db/statements.py.
    source = "".join(
        Path(module.__file__).read_text()
        for module in (statements, migrate, prune_repo, mutation)
        if module.__file__ is not None
    ) + "".join(p.read_text() for p in Path(store.__file__ or "").parent.glob("*.py"))
    unused = [name for name in all_statements() if f'"{name}"' not in source]
    assert unused == []


def test_the_claim_returns_the_columns_the_repository_reads_by_position(
    database_url: str,
) -> None:
    from resolver.db.statements import claim_statement
    from resolver.db.store.rows import CLAIM_COLUMNS

    with psycopg.connect(database_url) as conn:
        cur = conn.execute(claim_statement(4), DUMMY)  # type: ignore[arg-type]
        names = tuple(column.name for column in cur.description or ())
    assert names == CLAIM_COLUMNS


def test_every_list_spells_the_lookup_once_through_its_fragment() -> None:
    """The open lists and the decisions take the same `q`: one fragment, included (through
    case_filter or decision_filter) by each page and each count, spelled nowhere else."""
    from resolver.db.statements import QUERIES_FILE, fragment

    lookup = fragment("dispatch_lookup")
    lists = [
        "manual_queue_page",
        "manual_queue_total",
        "waiting_page",
        "waiting_total",
        "decisions_page",
        "decisions_total",
    ]
    assert [name for name in lists if lookup not in all_statements()[name]] == []
    assert QUERIES_FILE.read_text().count("d.idempotency_key = %(q)s") == 1


def test_every_open_list_sorts_through_one_expression_of_each_sort() -> None:
    """The manual queue and the waiting list group by a column named in CaseSort: one
    fragment answers the sort key, orders the page and bounds its keyset, spelled nowhere
    else, and it knows every sort but age (which groups nothing)."""
    from resolver.core.domain import CaseSort
    from resolver.db.statements import QUERIES_FILE, fragment

    sort_key = fragment("case_sort_key")
    named = {sort.value for sort in CaseSort if f"WHEN '{sort.value}' THEN" in sort_key}
    assert named == {sort.value for sort in CaseSort} - {CaseSort.AGE.value}
    for name in ("manual_queue_page", "waiting_page"):
        assert all_statements()[name].count(sort_key) == 3, name
    assert QUERIES_FILE.read_text().count("WHEN 'last_finding' THEN") == 1


def test_both_open_lists_count_through_one_closing_select() -> None:
    """The manual queue's and the waiting list's triage counts differ only in which cases
    they match: the dimensions and their order are one fragment."""
    from resolver.db.statements import QUERIES_FILE, fragment

    counts = fragment("case_counts")
    for name in ("manual_queue_counts", "waiting_counts"):
        assert all_statements()[name].endswith(f"({counts})"), name
    assert QUERIES_FILE.read_text().count("SELECT 'owner', owner, count(*)") == 1
