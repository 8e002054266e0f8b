"""Test-side model of the operator's manual decision (no manual-resolution API exists yet).

One transaction, fenced like DESIGN.md's manual resolution: the expected execution version,
an execution that is recovery_required, an open control; the authorization fact, the
resolution and the terminal state commit together. Strong authentication and permission
checks belong to the future API and are represented by a fixed authorization row.
"""

from __future__ import annotations

from enum import StrEnum

import psycopg


class Decision(StrEnum):
    CONFIRM_SUCCEEDED = "confirm_succeeded"
    CONFIRM_FAILED = "confirm_failed"
    ABANDON_UNKNOWN = "abandon_unknown"

    @property
    def outcome(self) -> str:
        return {"confirm_succeeded": "succeeded", "confirm_failed": "failed"}.get(
            self.value, "blocked"
        )


def manual_decision(
    url: str, dispatch_id: str, decision: Decision, expected_version: int, *, now_ms: int
) -> bool:
    """True when the decision committed; False when a fence refused it (nothing written)."""
    mutation_id = f"manual-{dispatch_id}-{expected_version}"
    with psycopg.connect(url) as conn, conn.transaction():
        # Lock order: execution row, then control row, then inserts.
        execution = conn.execute(
            "SELECT 1 FROM approved_action_executions WHERE dispatch_id = %s AND version = %s"
            " AND state = 'executing' AND lease_expires_at_ms <= %s FOR UPDATE",
            (dispatch_id, expected_version, now_ms),
        ).fetchone()
        control = conn.execute(
            "SELECT 1 FROM approved_action_recovery_controls WHERE dispatch_id = %s"
            " AND status IN ('armed', 'manual') FOR UPDATE",
            (dispatch_id,),
        ).fetchone()
        if execution is None or control is None:
            return False
        conn.execute(
            "INSERT INTO approved_action_recovery_resolutions (dispatch_id, mutation_id, source,"
            " outcome, expected_execution_version, actor_user_id, reason_code, resolved_at_ms)"
            " VALUES (%s, %s, 'manual', %s, %s, 'user-1', %s, %s)",
            (dispatch_id, mutation_id, decision.outcome, expected_version, decision.value, now_ms),
        )
        conn.execute(
            "INSERT INTO recovery_authorizations (mutation_id, user_id, permission, project_id,"
            " project_version, role_binding_version, auth_time_ms, amr, authorized_at_ms)"
            " VALUES (%s, 'user-1', 'approval.recover', 'proj-1', 1, 1, %s, ARRAY['mfa'], %s)",
            (mutation_id, now_ms, now_ms),
        )
        conn.execute(
            "UPDATE approved_action_executions SET state = %s, version = version + 1,"
            " finished_at_ms = %s WHERE dispatch_id = %s",
            (decision.outcome, now_ms, dispatch_id),
        )
        conn.execute(
            "UPDATE approved_action_recovery_controls SET status = 'resolved',"
            " closed_by = 'manual', closed_at_ms = %s, manual_at_ms = NULL,"
            " execution_version = execution_version + 1, recovery_version = recovery_version + 1,"
            " recovery_owner = NULL, recovery_token = NULL, recovery_lease_expires_at_ms = NULL"
            " WHERE dispatch_id = %s",
            (now_ms, dispatch_id),
        )
    return True
