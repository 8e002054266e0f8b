"""The live demo's executor: keeps dispatching approved actions, and keeps crashing some.

It plays the platform's executor through the real executor API (`resolver.executor.client`) and
writes signed receipts with the real `internal_mutation` helper, so what the replicas settle is
exactly what they would settle in production. Each dispatch follows one story, written into its
dispatch id (`crash-receipt-…`) so an operator (or the demo's test) can tell them apart.
"""

from __future__ import annotations

import heapq
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from resolver.core.domain import Completion, DispatchSpec, ExecutionLease, Outcome, action_digest
from resolver.core.errors import ResolverError
from resolver.evidence.receipts import KeyRing
from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.executor.receipts import write_receipt

INTERNAL, SHELL = "demo.internal", "demo.shell"
PROJECT = "demo"


class Story(StrEnum):
    """What happens to one dispatch after its executor crosses the start barrier."""

    COMPLETES = "completes"  # mutation, receipt, completion: nothing to recover
    CRASH_RECEIPT = "crash-receipt"  # mutation + signed receipt, then the executor dies
    COMPLETES_LATE = "late"  # stalls past its lease, then completes with the same outcome
    CRASH_BARE = "crash-bare"  # dies before its mutation: no evidence, retried with backoff
    SHELL = "shell"  # a shell action: no query can prove it, a human decides

    @property
    def action_type(self) -> str:
        return SHELL if self is Story.SHELL else INTERNAL


# Mostly healthy traffic, with enough crashes to keep three replicas and a human busy.
STORY_WEIGHTS: dict[Story, int] = {
    Story.COMPLETES: 40,
    Story.CRASH_RECEIPT: 30,
    Story.COMPLETES_LATE: 15,
    Story.CRASH_BARE: 5,
    Story.SHELL: 10,
}


def story_of(dispatch_id: str) -> Story:
    """The story a dispatch id was created with (`<story>-<hex>`)."""
    return Story(dispatch_id.rsplit("-", 1)[0])


Transaction = Callable[[], AbstractContextManager[Any]]


@dataclass(slots=True)
class SimulatorCounts:
    """What the executor did so far, by story and by how late completions ended."""

    dispatched: Counter[Story] = field(default_factory=Counter)
    late_committed: int = 0  # the completion won: the resolver had not settled it yet
    late_replayed: int = 0  # a resolution won first and the completion replayed it exactly
    errors: int = 0


class ExecutorSimulator:
    """Dispatches `rate_per_second` actions until stopped; late completions are due times in
    one heap on the same thread (no timer or thread per dispatch)."""

    def __init__(
        self,
        client: ExecutionClient,
        keys: KeyRing,
        transaction: Transaction,
        *,
        rate_per_second: float,
        late_by_seconds: float,
        rng: random.Random,
    ) -> None:
        self._client = client
        self._keys = keys
        self._transaction = transaction
        self._interval = 1.0 / rate_per_second
        self._late_by = late_by_seconds
        self._rng = rng
        self._late: list[tuple[float, str, ExecutionLease, Completion]] = []
        self._stop = threading.Event()
        self._producing = threading.Event()
        self._producing.set()
        self._lock = threading.Lock()
        self._counts = SimulatorCounts()
        self._thread = threading.Thread(target=self._run, name="demo-executor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop_producing(self) -> None:
        """No new dispatches; stalled executors still come back and complete."""
        self._producing.clear()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    @property
    def pending_late(self) -> int:
        with self._lock:
            return len(self._late)

    def counts(self) -> SimulatorCounts:
        with self._lock:
            return SimulatorCounts(
                Counter(self._counts.dispatched),
                self._counts.late_committed,
                self._counts.late_replayed,
                self._counts.errors,
            )

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._complete_due(time.monotonic())
            if self._producing.is_set() and time.monotonic() >= next_at:
                self._dispatch_one()
                next_at += self._interval
            self._stop.wait(max(0.0, min(next_at, self._next_late()) - time.monotonic()))

    def _next_late(self) -> float:
        with self._lock:
            waiting = self._late[0][0] if self._late else None
        if waiting is not None:
            return waiting
        return time.monotonic() + (self._interval if self._producing.is_set() else 0.2)

    def _dispatch_one(self) -> None:
        story = self._rng.choices(list(STORY_WEIGHTS), weights=list(STORY_WEIGHTS.values()))[0]
        try:
            self._play(story)
        except ResolverError:  # a lost fence or a database hiccup: count it, keep going
            with self._lock:
                self._counts.errors += 1
            return
        with self._lock:
            self._counts.dispatched[story] += 1

    def _play(self, story: Story) -> None:
        lease = self._started(story)
        outcome = Outcome.SUCCEEDED if self._rng.random() < 0.7 else Outcome.FAILED
        if story in (Story.CRASH_BARE, Story.SHELL):
            return  # crashed with nothing to show for it
        completion = Completion(
            outcome,
            _result_code(outcome),
            mutation_id=f"done-{lease.dispatch_id}",
            evidence_digest=self._mutate(lease, outcome),
        )
        if story is Story.COMPLETES:
            self._client.complete(lease, completion)
        elif story is Story.COMPLETES_LATE:
            # Half come back just after their lease ran out, racing the replicas (either may
            # win); half much later, when a resolution has won and they can only replay it.
            lateness = self._rng.uniform(1.0, 1.3) if self._rng.random() < 0.5 else 3.0
            due = time.monotonic() + self._late_by * lateness
            with self._lock:
                heapq.heappush(self._late, (due, lease.dispatch_id, lease, completion))

    def _started(self, story: Story) -> ExecutionLease:
        dispatch_id = f"{story.value}-{uuid.uuid4().hex[:10]}"
        self._client.create_dispatch(
            DispatchSpec(
                dispatch_id=dispatch_id,
                approval_request_id=f"ar-{dispatch_id}",
                project_id=PROJECT,
                action_type=story.action_type,
                action_digest=action_digest({"type": story.action_type, "id": dispatch_id}),
                idempotency_key=f"idem-{dispatch_id}",
            )
        )
        return self._client.start(self._client.lease(dispatch_id))

    def _mutate(self, lease: ExecutionLease, outcome: Outcome) -> str:
        """The internal mutation and its signed receipt commit in one transaction; returns
        the receipt's evidence digest, which a late completion must repeat to replay."""
        with self._transaction() as conn:
            written = write_receipt(
                conn,
                lease,
                outcome=outcome,
                result_code=_result_code(outcome),
                receipt_id=f"mutation-{lease.dispatch_id}",
                keys=self._keys,
            )
        return written.evidence_digest

    def _complete_due(self, now: float) -> None:
        while True:
            with self._lock:
                if not self._late or self._late[0][0] > now:
                    return
                _, _, lease, completion = heapq.heappop(self._late)
            try:
                result = self._client.complete(lease, completion)
            except ResolverError:  # a lost fence or a database hiccup: count it, keep going
                with self._lock:
                    self._counts.errors += 1
                continue
            with self._lock:
                if result is CompletionResult.REPLAYED:
                    self._counts.late_replayed += 1
                else:
                    self._counts.late_committed += 1


def _result_code(outcome: Outcome) -> str:
    return "applied" if outcome is Outcome.SUCCEEDED else "rejected"
