"""The core tables' digest and code checks (migration 0017_check_char_classes) accept exactly the strings
the regular expressions they replaced accepted, and the database still refuses the rest."""

from __future__ import annotations

import re

import psycopg
import pytest

from tests.helpers.database import SQL

HEX64 = re.compile(r"[0-9a-f]{64}")
CODE = re.compile(r"[a-z0-9_.-]{1,64}")

# The constraints 0017 rewrote: (table, constraint, column, the pattern it used to spell).
REWRITTEN = (
    ("approved_action_dispatches", "action_digest_hex", "action_digest", HEX64),
    ("approved_action_executions", "evidence_digest_hex", "evidence_digest", HEX64),
    ("approved_action_executions", "result_code_shape", "result_code", CODE),
    (
        "approved_action_recovery_controls",
        "last_evidence_digest_hex",
        "last_evidence_digest",
        HEX64,
    ),
    ("approved_action_recovery_controls", "manual_reason_shape", "manual_reason", CODE),
    ("approved_action_recovery_resolutions", "evidence_digest_hex", "evidence_digest", HEX64),
    ("approved_action_recovery_resolutions", "result_code_shape", "result_code", CODE),
    ("approved_action_recovery_resolutions", "reason_code_shape", "reason_code", CODE),
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
)


def _check_expression(sql: SQL, table: str, name: str) -> str:
    row = sql.one(
        "SELECT pg_get_expr(c.conbin, c.conrelid) AS expr FROM pg_constraint AS c"
        " WHERE c.conrelid = %s::regclass AND c.conname = %s",
        table,
        f"ck_{table}_{name}",
    )
    return str(row["expr"])


@pytest.mark.parametrize(("table", "name", "column", "pattern"), REWRITTEN)
def test_each_rewritten_check_accepts_exactly_what_its_pattern_did(
    sql: SQL, table: str, name: str, column: str, pattern: re.Pattern[str]
) -> None:
    expression = _check_expression(sql, table, name)
    assert "{" not in expression, expression  # no bounded repetition left
    for value in CANDIDATES:
        # The stored expression itself, over a one-column row named like the table's column.
        row = sql.one(f"SELECT ({expression}) AS ok FROM (SELECT %s::text AS {column}) AS t", value)
        assert row["ok"] is bool(pattern.fullmatch(value)), (name, value)
    # NULL passes where the column may be NULL, as before.
    row = sql.one(
        f"SELECT ({expression}) IS NOT FALSE AS ok FROM (SELECT NULL::text AS {column}) t"
    )
    assert row["ok"] is True


def test_the_tables_still_refuse_a_malformed_digest_and_code(database_url: str) -> None:
    bad = (
        ("action_digest", DIGEST.upper(), "ck_approved_action_dispatches_action_digest_hex"),
        ("action_digest", DIGEST + "0", "ck_approved_action_dispatches_action_digest_hex"),
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
        assert (
            refused.value.diag.constraint_name
            == "ck_approved_action_recovery_resolutions_result_code_shape"
        )
