"""Direct SQL attempts at a two-person decision, as a compromised pod (or the owner) would
make them: settle a dispatch by hand with a manual resolution, the real proposer's and an
invented or real colleague's authorization facts, a link and the head, in one transaction.

Every attempt is recorded (invoke, then fail or ok) so the checker can hold the two-person
rule over histories that include them: none may ever succeed.
"""

from __future__ import annotations

from typing import Any

import psycopg

from resolver_test_support.history import History

FAKE_SIGNATURE = "ab" * 64

FORGE_STATEMENTS = (
    (
        "UPDATE approved_action_recovery_controls SET status = 'resolved', closed_by = 'manual',"
        " closed_at_ms = 0 WHERE dispatch_id = %(d)s"
    ),
    (
        "UPDATE approved_action_executions SET state = 'succeeded', version = version + 1,"
        " finished_at_ms = 0 WHERE dispatch_id = %(d)s"
    ),
    (
        "INSERT INTO approved_action_recovery_resolutions (dispatch_id, mutation_id, source,"
        " outcome, expected_execution_version, actor_user_id, reason_code, resolved_at_ms)"
        " SELECT %(d)s, %(m)s, 'manual', 'succeeded', e.version - 1, %(proposer)s, 'forged', 0"
        " FROM approved_action_executions AS e WHERE e.dispatch_id = %(d)s"
    ),
    (
        "INSERT INTO recovery_authorizations (mutation_id, user_id, permission, project_id,"
        " project_version, role_binding_version, auth_time_ms, amr, authorized_at_ms, issuer,"
        " token_kid, signing_kid, signature)"
        " SELECT %(m)s, u, 'approval.recover', d.project_id, 1, 1, 0, '{mfa}', 0, 'i', 'k',"
        " 's', %(sig)s FROM approved_action_dispatches AS d,"
        " unnest(ARRAY[%(proposer)s, %(colleague)s]) AS u WHERE d.dispatch_id = %(d)s"
    ),
    (
        "INSERT INTO recovery_audit_chain (seq, mutation_id, dispatch_id, content, prev_hash,"
        " hash, recorded_at_ms) SELECT seq + 1, %(m)s, %(d)s, '{}', hash, repeat('f', 64), 0"
        " FROM recovery_audit_head"
    ),
    "UPDATE recovery_audit_head SET seq = seq + 1, hash = repeat('f', 64)",
)


def forge_two_person(
    conn: psycopg.Connection[Any],
    history: History,
    role: str,
    dispatch_id: str,
    proposer: str,
    colleague: str,
    mutation_id: str,
) -> bool:
    """One attempt in one transaction; True only if it committed (which must never happen)."""
    fields = {"dispatch_id": dispatch_id, "role": role, "user": colleague}
    history.record("invoke", "forge", **fields)
    params = {
        "d": dispatch_id,
        "m": mutation_id,
        "proposer": proposer,
        "colleague": colleague,
        "sig": FAKE_SIGNATURE,
    }
    try:
        with conn.transaction():
            for statement in FORGE_STATEMENTS:
                conn.execute(statement, params)
    except psycopg.Error as exc:
        history.record("fail", "forge", **fields, error=type(exc).__name__)
        return False
    history.record("ok", "forge", **fields)
    return True
