"""Manual resolution: a human's explicit, authorized, version-fenced terminal decision.

There is no retry, reset-to-pending, clear-start-barrier or dispatch edit. Doing the action
again means a new dispatch that references this one (`supersedes_dispatch_id`).
"""

from __future__ import annotations

from resolver.core.domain import (
    ExecutionState,
    Grant,
    ManualContext,
    ManualDecision,
    ManualResult,
    Principal,
    ResolutionSource,
)
from resolver.core.errors import FenceConflict, NotFound, PermissionDenied, StrongAuthRequired
from resolver.core.ports import ManualStore

PERMISSION = "approval.recover"
MAX_AUTH_AGE_MS = 5 * 60 * 1000
STRONG_AMR = frozenset({"mfa", "hwk", "swk", "otp", "fido"})


class ManualResolutionService:
    """Checks what can be checked early, then lets one fenced statement decide."""

    def __init__(
        self,
        store: ManualStore,
        *,
        max_auth_age_ms: int = MAX_AUTH_AGE_MS,
        strong_amr: frozenset[str] = STRONG_AMR,
        clock_leeway_ms: int = 30_000,
    ) -> None:
        self._store = store
        self._max_auth_age_ms = max_auth_age_ms
        self._strong_amr = strong_amr
        self._clock_leeway_ms = clock_leeway_ms

    def decide(
        self, principal: Principal, decision: ManualDecision, *, now_ms: int | None = None
    ) -> ManualResult:
        if not self._strong_amr.intersection(principal.amr):
            raise StrongAuthRequired(
                f"a recovery decision needs strong authentication (amr one of "
                f"{sorted(self._strong_amr)}); sign in again with a second factor"
            )
        context = self._context(decision, now_ms)
        grant = self._store.find_grant(context.project_id, principal.user_id)
        if grant is None:
            raise PermissionDenied(f"{PERMISSION} is not granted on project {context.project_id!r}")
        committed = self._store.commit_manual(
            principal,
            decision,
            context.project_id,
            grant,
            max_auth_age_ms=self._max_auth_age_ms,
            clock_leeway_ms=self._clock_leeway_ms,
            now_ms=now_ms,
        )
        if committed:
            return ManualResult.COMMITTED
        return self._explain(principal, decision, grant, now_ms)

    def _context(self, decision: ManualDecision, now_ms: int | None) -> ManualContext:
        context = self._store.manual_context(decision.dispatch_id, decision.mutation_id, now_ms)
        if context is None:
            raise NotFound(f"dispatch {decision.dispatch_id!r} has no execution")
        return context

    def _explain(
        self, principal: Principal, decision: ManualDecision, grant: Grant, now_ms: int | None
    ) -> ManualResult:
        """The fenced commit wrote nothing: say exactly which fence held, or accept a replay."""
        ctx = self._context(decision, now_ms)
        if _is_replay(ctx, principal, decision):
            return ManualResult.REPLAYED
        as_now: dict[str, object] = {
            "state": ctx.state.value,
            "version": ctx.version,
            "control_status": ctx.control_status.value if ctx.control_status else None,
        }
        if ctx.mutation_dispatch_id is not None:
            raise FenceConflict(
                f"mutation id {decision.mutation_id!r} was already used", current=as_now
            )
        if ctx.state is not ExecutionState.EXECUTING:
            raise FenceConflict(
                f"dispatch {decision.dispatch_id!r} is already {ctx.state.value}", current=as_now
            )
        if ctx.version != decision.expected_execution_version:
            raise FenceConflict(
                f"dispatch {decision.dispatch_id!r} is at version {ctx.version}, "
                f"not {decision.expected_execution_version}: reload and decide again",
                current=as_now,
            )
        if ctx.lease_expires_at_ms > ctx.db_now_ms:
            raise FenceConflict(
                f"dispatch {decision.dispatch_id!r} has a live execution lease: its executor is "
                "still running, so there is nothing to recover",
                current=as_now,
            )
        if not _auth_fresh(principal, ctx.db_now_ms, self._max_auth_age_ms, self._clock_leeway_ms):
            raise StrongAuthRequired(
                "authentication is older than "
                f"{self._max_auth_age_ms // 60_000} minutes; sign in again with a second factor"
            )
        current = self._store.find_grant(ctx.project_id, principal.user_id)
        if current != grant:
            raise PermissionDenied(f"{PERMISSION} on project {ctx.project_id!r} changed; retry")
        raise FenceConflict(
            f"decision on {decision.dispatch_id!r} lost a concurrent update; retry",
            current=as_now,
        )


def _auth_fresh(principal: Principal, now_ms: int, max_age_ms: int, leeway_ms: int) -> bool:
    return now_ms - max_age_ms <= principal.auth_time_ms <= now_ms + leeway_ms


def _is_replay(ctx: ManualContext, principal: Principal, decision: ManualDecision) -> bool:
    # A mutation id is idempotent only when every semantic field is the same.
    return (
        ctx.resolution_mutation_id == decision.mutation_id
        and ctx.resolution_source is ResolutionSource.MANUAL
        and ctx.resolution_outcome is decision.decision.terminal_state
        and ctx.resolution_actor == principal.user_id
        and ctx.resolution_reason_code == decision.reason_code
        and ctx.resolution_evidence_digest == decision.evidence_digest
        and ctx.resolution_expected_version == decision.expected_execution_version
    )
