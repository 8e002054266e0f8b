"""The digest, code, signature, identifier and key id shapes (the domains resolver_sha256_hex,
resolver_code, resolver_signature_hex, resolver_id and resolver_signing_kid, each checking with its
resolver_is_* function) accept exactly the strings the regular expressions they replaced accepted,
on every column that carries them, and the tables still refuse the rest."""

from __future__ import annotations

import re

import psycopg
import pytest

from tests.helpers.database import SQL

# Each shape's domain: the pattern it stands for, and the function its check calls (if any).
DOMAINS: dict[str, tuple[re.Pattern[str], str | None]] = {
    "resolver_sha256_hex": (re.compile(r"[0-9a-f]{64}"), "resolver_is_sha256_hex"),
    "resolver_code": (re.compile(r"[a-z0-9_.-]{1,64}"), "resolver_is_code"),
    "resolver_signature_hex": (re.compile(r"[0-9a-f]{128}"), "resolver_is_signature_hex"),
    "resolver_id": (re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}"), "resolver_is_id"),
    "resolver_signing_kid": (
        re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}"),
        "resolver_is_signing_kid",
    ),
}

# The columns of each shape: (table, column, its domain).
SHAPED = (
    ("approved_action_dispatches", "action_digest", "resolver_sha256_hex"),
    ("approved_action_executions", "evidence_digest", "resolver_sha256_hex"),
    ("approved_action_executions", "result_code", "resolver_code"),
    ("approved_action_recovery_controls", "last_evidence_digest", "resolver_sha256_hex"),
    ("approved_action_recovery_controls", "manual_reason", "resolver_code"),
    ("approved_action_recovery_resolutions", "evidence_digest", "resolver_sha256_hex"),
    ("approved_action_recovery_resolutions", "result_code", "resolver_code"),
    ("approved_action_recovery_resolutions", "reason_code", "resolver_code"),
    ("recovery_authorizations", "signature", "resolver_signature_hex"),
    ("recovery_audit_chain", "prev_hash", "resolver_sha256_hex"),
    ("recovery_audit_chain", "hash", "resolver_sha256_hex"),
    ("recovery_audit_head", "hash", "resolver_sha256_hex"),
    ("recovery_audit_head", "prev_hash", "resolver_sha256_hex"),
    ("recovery_proposals", "reason_code", "resolver_code"),
    ("recovery_proposals", "evidence_digest", "resolver_sha256_hex"),
    ("recovery_proposals", "close_reason_code", "resolver_code"),
    ("recovery_proposals", "signature", "resolver_signature_hex"),
    ("recovery_proposals", "closed_signature", "resolver_signature_hex"),
    ("recovery_late_evidence", "evidence_digest", "resolver_sha256_hex"),
    ("recovery_late_evidence", "result_code", "resolver_code"),
    ("recovery_prune_runs", "export_digest", "resolver_sha256_hex"),
    ("recovery_pruned_dispatches", "idempotency_key_sha256", "resolver_sha256_hex"),
    ("resolver_provider_migrations", "checksum", "resolver_sha256_hex"),
    ("recovery_authorizations", "signing_kid", "resolver_signing_kid"),
    ("recovery_late_evidence", "observation_id", "resolver_id"),
    ("recovery_outcome_consumers", "consumer", "resolver_id"),
    ("recovery_outcome_reader_scopes", "project_id", "resolver_id"),
)

DIGEST = "0123456789abcdef" * 4
CANDIDATES = (
    DIGEST,
    DIGEST[:-1],
    DIGEST + "0",
    DIGEST.upper(),
    DIGEST[:-1] + "g",
    DIGEST[:-1] + "é",
    "é" * 64,
    DIGEST[:-1] + "\n",
    "\n" + DIGEST[:-1],
    DIGEST[:32] + " " + DIGEST[33:],
    "",
    "ok",
    "a",
    "a" * 64,
    "a" * 65,
    "timeout.http-503_x",
    "Ok",
    "ok\n",
    "o k",
    "ok/",
    "ok:",
    "-",
    "é",
    "ß" * 10,
    DIGEST * 2,
    DIGEST * 2 + "0",
    (DIGEST * 2)[:-1],
    (DIGEST * 2).upper(),
    (DIGEST * 2)[:-1] + "g",
    (DIGEST * 2)[:-1] + "\n",
    # Identifiers and key ids: the first character, the punctuation, the two lengths.
    "A",
    "Zz9",
    "a:b-c.d_e",
    "_a",
    ".a",
    ":a",
    "a" * 63 + "é",
    "a" * 63 + ":",
    "A" * 65,
    "A" * 128,
    "A" * 129,
)


def _passes(sql: SQL, domain: str, value: str | None) -> bool:
    """Whether `value` passes the domain's check (a cast to it raises when it does not)."""
    try:
        with sql.conn.transaction():
            sql.one(f"SELECT %s::{domain} AS v", value)
    except psycopg.errors.CheckViolation:
        return False
    return True


@pytest.mark.parametrize(("table", "column", "domain"), SHAPED)
def test_each_shaped_column_is_its_shapes_domain(
    sql: SQL, table: str, column: str, domain: str
) -> None:
    row = sql.one(
        "SELECT format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute AS a"
        " WHERE a.attrelid = %s::regclass AND a.attname = %s",
        table,
        column,
    )
    assert row["type"] == domain


@pytest.mark.parametrize("domain", DOMAINS)
def test_each_domain_accepts_exactly_what_its_pattern_did(sql: SQL, domain: str) -> None:
    pattern, function = DOMAINS[domain]
    check = sql.one(
        "SELECT pg_get_constraintdef(k.oid) || coalesce(pg_get_functiondef(p.oid), '') AS text"
        " FROM pg_constraint AS k LEFT JOIN pg_proc AS p ON p.oid = %s::regproc"
        " WHERE k.contypid = %s::regtype",
        function,
        domain,
    )
    assert "{" not in check["text"], check  # no bounded repetition
    for value in CANDIDATES:
        assert _passes(sql, domain, value) is bool(pattern.fullmatch(value)), (domain, value)
    # NULL passes where the column may be NULL, as before.
    assert _passes(sql, domain, None)


def test_the_tables_still_refuse_a_malformed_digest_and_code(database_url: str) -> None:
    bad = (
        ("action_digest", DIGEST.upper(), "ck_resolver_sha256_hex"),
        ("action_digest", DIGEST + "0", "ck_resolver_sha256_hex"),
    )
    with psycopg.connect(database_url) as conn:
        for column, value, constraint in bad:
            with pytest.raises(psycopg.errors.CheckViolation) as refused, conn.transaction():
                conn.execute(
                    "INSERT INTO approved_action_dispatches (dispatch_id, approval_request_id,"
                    " project_id, action_type, action_digest, idempotency_key, schema_version)"
                    " VALUES ('d-1', 'ar-1', 'p-1', 'test.x', %(v)s, 'i-1', 1)",
                    {"v": value},
                )
            assert refused.value.diag.constraint_name == constraint, column
        with pytest.raises(psycopg.errors.CheckViolation) as refused, conn.transaction():
            conn.execute(
                "INSERT INTO approved_action_recovery_resolutions (dispatch_id, mutation_id,"
                " source, outcome, finding, evidence_digest, result_code,"
                " expected_execution_version, resolved_at_ms)"
                " VALUES ('d-1', 'm-1', 'automatic', 'succeeded', 'verified_succeeded',"
                " %(d)s, 'OK', 2, 1)",
                {"d": DIGEST},
            )
        assert refused.value.diag.constraint_name == "ck_resolver_code"
