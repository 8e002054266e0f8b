"""Approved actions as LangGraph tools (the `langgraph` extra; docs/outcomes.md#langgraph).

A tool declared as an `ApprovedAction` runs through `ApprovedActionNode`, a graph node that,
for each of the model's tool calls:

1. **asks the resolver first**: the dispatch of this thread and tool call (its id is derived
   from them, so a node that runs again after a crash finds it) may already be settled: its
   outcome is the tool's result and nothing runs again;
2. interrupts the graph for approval, with the action's summary (`interrupt`; the run resumes
   with `Command(resume=Approval.granted(...))`);
3. records the dispatch (idempotent), leases it, checks on the database clock that the
   approval has not expired, crosses the start barrier, runs the effect in one transaction with
   its signed receipt (the dispatch's idempotency key goes to the downstream), and completes;
4. after a crash it finds the dispatch where the crash left it: a live lease is waited out (a
   `leased` one is then taken over: it never crossed the barrier), `recovery_required` waits
   on the outcome feed for the resolver or a person, `blocked` goes back to the user, and
   running it again takes a new approval and a new dispatch that supersedes the old one.

The effect never runs twice for one dispatch: it commits with its receipt or not at all, and
every later run of the node reads the outcome instead of acting.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt

from resolver.core.domain import (
    ActionSummary,
    DispatchSpec,
    DispatchState,
    DispatchStatus,
    ExecutionLease,
    Outcome,
    action_digest,
)
from resolver.core.errors import OutcomeTimeout, ResolverError
from resolver.db import mutation
from resolver.db.store.execution import PostgresExecutionStore
from resolver.db.store.handle import PostgresHandle
from resolver.evidence.receipts import KeyRing
from resolver.executor.client import ExecutionClient
from resolver.executor.side_effects import SideEffectRunner
from resolver.outcomes.feed import OutcomeFeed

__all__ = [
    "Approval",
    "ApprovalExpired",
    "ApprovedAction",
    "ApprovedActionNode",
    "EffectCall",
    "EffectResult",
    "Observer",
    "dispatch_ids",
    "unobserved",
]

# The steps of one tool call, in order, for an observer (logs, traces, a test's crash
# injection): approved, leased, barrier_crossed, effect_applied, receipt_committed, completed.
Observer = Callable[[str, str], None]


def unobserved(step: str, dispatch_id: str) -> None:
    """The observer when none is given: every step passes unremarked."""


class ApprovalExpired(ResolverError):
    """The approval ended before the start barrier: nothing ran."""


@dataclass(frozen=True, slots=True)
class EffectResult:
    """What an effect did: its outcome and result code (stored, low-sensitivity), the id of
    the downstream's own record (its digest goes into the receipt) and what the tool answers
    the model."""

    outcome: Outcome
    result_code: str
    receipt_id: str
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EffectCall:
    """What an effect gets besides its connection: the tool's arguments and the dispatch's
    ids; pass `idempotency_key` to the downstream so that it, too, applies the call once."""

    args: Mapping[str, Any]
    dispatch_id: str
    idempotency_key: str


# The effect, inside the transaction its receipt commits in: change the downstream through
# `conn` and answer what happened. It must not commit or roll back itself.
Effect = Callable[[mutation.Connection, EffectCall], EffectResult]


@dataclass(frozen=True, slots=True)
class ApprovedAction:
    """A tool whose calls need a person's approval and run under the executor protocol."""

    name: str
    action_type: str
    project_id: str
    summarize: Callable[[Mapping[str, Any]], ActionSummary]
    effect: Effect
    description: str = ""


class Approval:
    """The resume values a person's answer becomes (`Command(resume=...)`)."""

    @staticmethod
    def granted(approval_request_id: str, expires_at_ms: int) -> dict[str, Any]:
        """Approved, until `expires_at_ms` on the database clock (epoch milliseconds)."""
        return {
            "approved": True,
            "approval_request_id": approval_request_id,
            "expires_at_ms": expires_at_ms,
        }

    @staticmethod
    def declined(reason: str = "declined") -> dict[str, Any]:
        return {"approved": False, "reason": reason}


def dispatch_ids(thread_id: str, tool_call_id: str, generation: int) -> tuple[str, str]:
    """The dispatch id and idempotency key of a tool call's `generation`-th approval: derived,
    so that a node running again after a crash finds the dispatch it created."""
    digest = hashlib.sha256(f"{thread_id}\0{tool_call_id}".encode()).hexdigest()[:40]
    return f"lg-{digest}-{generation}", f"lg-idem-{digest}-{generation}"


@dataclass(frozen=True, slots=True)
class _Answer:
    """The tool's result for one call."""

    dispatch_id: str
    state: str
    status: DispatchStatus | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def content(self) -> str:
        body: dict[str, Any] = {"dispatch_id": self.dispatch_id, "state": self.state}
        if self.status is not None:
            body |= {
                "result_code": self.status.result_code,
                "settled_by": self.status.settled_by and self.status.settled_by.value,
            }
        return json.dumps(body | dict(self.detail), sort_keys=True)


class ApprovedActionNode:
    """The graph node that runs the model's calls of approved actions (see the module doc).

    Use it as a node over a state with a `messages` list (`MessagesState`): it answers each
    tool call of the last AI message with a `ToolMessage` whose content is JSON with the
    dispatch id, its state (`succeeded`, `failed`, `blocked`, `declined`, `approval_expired`),
    the result code and who settled it.
    """

    def __init__(
        self,
        actions: Sequence[ApprovedAction],
        *,
        database_url: str,
        keys: KeyRing,
        owner: str | None = None,
        lease_seconds: float = 30.0,
        recovery_wait_seconds: float = 3600.0,
        feed: OutcomeFeed | None = None,
        observer: Observer | None = None,
    ) -> None:
        self._actions = {a.name: a for a in actions}
        self._url = database_url
        self._keys = keys
        self._owner = owner or f"langgraph:{socket.gethostname()}:{os.getpid()}"
        self._lease_seconds = lease_seconds
        self._recovery_wait = recovery_wait_seconds
        self._feed = feed or OutcomeFeed(database_url)
        self._observe = observer or unobserved
        self._store = PostgresExecutionStore(PostgresHandle(database_url, min_connections=0))
        self._stop = threading.Event()

    def open(self) -> None:
        self._feed.open()
        self._store.handle.open()

    def close(self) -> None:
        self._stop.set()
        self._store.handle.close()
        self._feed.close()

    def __enter__(self) -> ApprovedActionNode:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __call__(self, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        thread_id = str(config["configurable"]["thread_id"])
        last = state["messages"][-1]
        if not isinstance(last, AIMessage):
            return {"messages": []}
        replies = []
        for call in last.tool_calls:
            answer = self._call(thread_id, call["name"], call["args"], str(call["id"]))
            replies.append(
                ToolMessage(content=answer.content(), tool_call_id=call["id"], name=call["name"])
            )
        return {"messages": replies}

    # -- one tool call -----------------------------------------------------------------------

    def _call(self, thread_id: str, name: str, args: Mapping[str, Any], call_id: str) -> _Answer:
        action = self._actions[name]
        generation, previous = 1, None
        while True:
            dispatch_id, key = dispatch_ids(thread_id, call_id, generation)
            status = self._feed.status(dispatch_id)
            if status is not None and status.state in (
                DispatchState.SUCCEEDED,
                DispatchState.FAILED,
            ):
                return _Answer(dispatch_id, status.state.value, status)
            # Every approval of this call, in order: on a run after a crash, interrupt
            # answers each with the resume value it was given before.
            approval = interrupt(self._request(action, args, dispatch_id, previous))
            if not approval.get("approved"):
                state = "declined" if previous is None else DispatchState.BLOCKED.value
                return _Answer(previous or dispatch_id, state, None, {"reason": "declined"})
            if status is None or not status.settled:
                spec = DispatchSpec(
                    dispatch_id=dispatch_id,
                    approval_request_id=str(approval["approval_request_id"]),
                    project_id=action.project_id,
                    action_type=action.action_type,
                    action_digest=action_digest({"tool": name, "args": dict(args)}),
                    idempotency_key=key,
                    supersedes_dispatch_id=previous,
                    action_summary=action.summarize(args),
                )
                try:
                    status, detail = self._run(action, spec, args, approval)
                except ApprovalExpired:
                    return _Answer(dispatch_id, "approval_expired")
                if status.state is not DispatchState.BLOCKED:
                    return _Answer(dispatch_id, status.state.value, status, detail)
            # Blocked: nobody could establish whether it happened. Back to the user: doing
            # it again takes a new approval and a new dispatch that supersedes this one.
            generation, previous = generation + 1, dispatch_id

    def _request(
        self,
        action: ApprovedAction,
        args: Mapping[str, Any],
        dispatch_id: str,
        blocked: str | None,
    ) -> dict[str, Any]:
        summary = action.summarize(args)
        request: dict[str, Any] = {
            "type": "approval_request",
            "tool": action.name,
            "action_type": action.action_type,
            "project_id": action.project_id,
            "dispatch_id": dispatch_id,
            "summary": json.loads(summary.json()),
        }
        if blocked is not None:
            request["blocked_dispatch_id"] = blocked
            request["question"] = "its outcome could not be established; approve doing it again?"
        return request

    def _run(
        self,
        action: ApprovedAction,
        spec: DispatchSpec,
        args: Mapping[str, Any],
        approval: Mapping[str, Any],
    ) -> tuple[DispatchStatus, Mapping[str, Any]]:
        """Take the dispatch from wherever it is to a terminal state (or refuse it)."""
        dispatch_id = spec.dispatch_id
        self._observe("approved", dispatch_id)
        client = ExecutionClient(self._store, owner=self._owner, lease_seconds=self._lease_seconds)
        client.create_dispatch(spec)
        while True:
            status = self._status(dispatch_id)
            if status.settled:
                return status, {}
            if status.state is DispatchState.PENDING or (
                status.state is DispatchState.LEASED and not status.lease_live
            ):
                if int(approval["expires_at_ms"]) <= status.db_now_ms:
                    raise ApprovalExpired(f"the approval of {dispatch_id} has expired")
                detail = self._execute(action, spec, args, approval)
                return self._status(dispatch_id), detail
            if status.lease_live:
                # Someone holds it (this node's previous life, crashed): wait the lease out.
                assert status.lease_expires_at_ms is not None
                left = (status.lease_expires_at_ms - status.db_now_ms) / 1000 + 0.05
                if status.state is DispatchState.LEASED:
                    self._stop.wait(left)
                    continue
                try:
                    return self._feed.wait_for_outcome(dispatch_id, left, stop=self._stop), {}
                except OutcomeTimeout:
                    continue
            # recovery_required: the resolver (from evidence) or a person settles it.
            return self._feed.wait_for_outcome(
                dispatch_id, self._recovery_wait, stop=self._stop
            ), {}

    def _execute(
        self,
        action: ApprovedAction,
        spec: DispatchSpec,
        args: Mapping[str, Any],
        approval: Mapping[str, Any],
    ) -> Mapping[str, Any]:
        dispatch_id = spec.dispatch_id
        expires_at_ms = int(approval["expires_at_ms"])
        lease_ms = int(self._lease_seconds * 1000)

        def still_approved(lease: ExecutionLease) -> None:
            # The database's clock when it granted the lease: the barrier follows at once.
            if expires_at_ms <= lease.lease_expires_at_ms - lease_ms:
                raise ApprovalExpired(f"the approval of {dispatch_id} expired before the barrier")
            self._observe("leased", dispatch_id)

        runner = SideEffectRunner(
            self._store,
            database_url=self._url,
            owner=self._owner,
            keys=self._keys,
            lease_seconds=self._lease_seconds,
        )
        call = EffectCall(args=args, dispatch_id=dispatch_id, idempotency_key=spec.idempotency_key)
        with runner.run(dispatch_id, before_barrier=still_approved) as effect:
            self._observe("barrier_crossed", dispatch_id)
            with effect.transaction() as conn:
                result = action.effect(conn, call)
                self._observe("effect_applied", dispatch_id)
                effect.write_receipt(
                    conn, result.outcome, result.result_code, receipt_id=result.receipt_id
                )
            self._observe("receipt_committed", dispatch_id)
        self._observe("completed", dispatch_id)
        return result.detail

    def _status(self, dispatch_id: str) -> DispatchStatus:
        status = self._feed.status(dispatch_id)
        assert status is not None  # created above; dispatches are never deleted while open
        return status
