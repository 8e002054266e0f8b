"""The executor SDK: run one approved side effect under the protocol, hard to get wrong.

`SideEffectRunner.run(dispatch_id)` is a context manager around `ExecutionClient`:

- it leases and crosses the start barrier before the block runs (a refusal raises before
  anything happens), in one statement with the read of the identity the receipt is signed
  with: the lease, the barrier and the identity cost one round trip and one commit, and the
  mutation's transaction, where the platform's rows stay locked, reads nothing before the
  receipt's write;
- a heartbeat thread renews the lease every `renew_fraction` of it; when the lease is lost
  (fenced out, taken over, or no renewal got through before it ran out) it sets
  `effect.cancelled` and the side effect must stop;
- `effect.transaction()` stops the heartbeat *before* the mutation's own transaction (a renew
  racing the receipt would fence one of them out), renews once in the foreground if less
  than half the lease is left, and yields a connection in an open transaction (from the
  runner's pool: an executor process reuses its connections from one side effect to the
  next); `effect.write_receipt(...)` signs and writes receipt v1 in it, and the block's end
  commits mutation and receipt together; `effect.transaction(complete=True)` completes the
  execution in that same transaction too, so mutation, receipt and terminal state commit
  together (no crash can fall between the receipt and the completion, and the action pays one
  transaction fewer);
- a lost COMMIT reply is unknown, not failed: the transaction that wrote the receipt (named
  by the write's own answer) is ended and waited out, the receipt is re-read, and only a
  receipt with this run's signature counts as committed (`MutationNotCommitted` if it is
  absent, `CommitUnknown` if the re-read fails). Nothing is ever repeated;
- otherwise the run completes on the block's clean exit, with the evidence digest (so a
  completion racing a resolution of the same receipt replays it exactly); on an exception
  nothing completes and recovery settles the execution from evidence.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import structlog

from resolver.core.domain import (
    Completion,
    DispatchIdentity,
    ExecutionLease,
    Outcome,
    StartedExecution,
)
from resolver.core.errors import (
    CommitUnknown,
    FenceConflict,
    LeaseLost,
    MutationNotCommitted,
    NotFound,
    StorageUnavailable,
)
from resolver.core.ports import ExecutionStore
from resolver.db import mutation
from resolver.db.store.execution import (
    PostgresExecutionStore,
    lease_and_start,
    start_with_identity,
)
from resolver.db.store.receipts import receipt_identity
from resolver.evidence.receipts import KeyRing, encode_receipt, sign_receipt
from resolver.executor.client import CompletionResult, ExecutionClient
from resolver.executor.object_receipts import PublishedReceipt, ReceiptPublisher
from resolver.executor.receipts import write_receipt_in

log = structlog.get_logger("resolver.side_effects")

Clock = Callable[[], float]
_COMPLETE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class RunResult:
    dispatch_id: str
    completion: CompletionResult
    evidence_digest: str | None


class _Lease:
    """The current fence and when it surely ends on this host's monotonic clock.

    The deadline is taken *before* the call that granted the lease: the database counted the
    lease from a moment after that, so the real expiry is never earlier than this one.
    """

    def __init__(self, lease: ExecutionLease, lease_seconds: float, granted_at: float) -> None:
        self._lock = threading.Lock()
        self._lease = lease
        self._lease_seconds = lease_seconds
        self._deadline = granted_at + lease_seconds

    def get(self) -> ExecutionLease:
        with self._lock:
            return self._lease

    def renewed(self, lease: ExecutionLease, asked_at: float) -> None:
        with self._lock:
            self._lease = lease
            self._deadline = asked_at + self._lease_seconds

    def remaining(self, now: float) -> float:
        with self._lock:
            return self._deadline - now


class _Signing:
    """The receipt's identity as the start barrier's statement read it, and the database
    clock then: a receipt is signed with them, its finish time that clock read plus the time
    this host's monotonic clock says has passed since (no read of the database clock in the
    mutation's transaction; the receipt's write checks every field of it there)."""

    def __init__(self, started: StartedExecution, read_at: float) -> None:
        self.identity = started.identity
        self._db_now_ms = started.db_now_ms
        self._read_at = read_at

    def finished_at_ms(self, now: float) -> int:
        return self._db_now_ms + max(0, int((now - self._read_at) * 1000))


class SideEffect:
    """What the block of `SideEffectRunner.run` gets: the cancellation signal, the lease,
    and the one transaction in which the mutation and its receipt commit."""

    def __init__(
        self, runner: SideEffectRunner, lease: _Lease, *, signing: _Signing | None = None
    ) -> None:
        self._runner = runner
        self._lease = lease
        self._signing = signing
        self.cancelled = threading.Event()
        """Set when the lease is lost: stop the side effect; nothing may commit any more."""
        self.cancel_reason: str | None = None
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(
            target=self._beat, name=f"lease-heartbeat-{lease.get().dispatch_id}", daemon=True
        )
        self._recorded: Completion | None = None
        # (sig, evidence digest, id of the transaction writing it)
        self._receipt: tuple[str, str, str] | None = None
        self._transaction_used = False
        # In a transaction opened with complete=True: the receipt's write completes too, in
        # its one statement, and says whether it settled the execution.
        self._completing = False
        self._settled: bool | None = None
        self._completed: CompletionResult | None = None
        self.result: RunResult | None = None
        """Set when the run completed."""

    @property
    def lease(self) -> ExecutionLease:
        return self._lease.get()

    def check(self) -> None:
        """Raise `LeaseLost` if the lease is lost: call it between steps of a long effect."""
        if self.cancelled.is_set():
            raise LeaseLost(f"the execution lease was lost: {self.cancel_reason}")

    def record(
        self, outcome: Outcome, result_code: str, *, evidence_digest: str | None = None
    ) -> None:
        """The outcome to complete with, for a side effect whose evidence lives elsewhere
        (an external service's receipt): completion happens when the block ends."""
        self._recorded = Completion(
            outcome, result_code, self._runner.mutation_id(self.lease), evidence_digest
        )

    @contextmanager
    def transaction(
        self, connection: mutation.Connection | None = None, *, complete: bool = False
    ) -> Iterator[mutation.Connection]:
        """The mutation's transaction (on `connection`, or one of the runner's pool).

        The heartbeat stops first; call `write_receipt` inside; the block's end commits. With
        `complete=True` it completes the execution in this transaction first: the terminal
        state commits with the mutation and its receipt, or nothing does.
        """
        if self._transaction_used:
            raise RuntimeError("one side effect has one receipt transaction")
        self._transaction_used = True
        self.stop_heartbeat()
        self.check()
        self._refresh_before_transaction()
        if connection is not None:
            yield from self._in_transaction(connection, complete)
            return
        with self._runner._mutation_connection() as conn:
            yield from self._in_transaction(conn, complete)

    def _in_transaction(
        self, conn: mutation.Connection, complete: bool
    ) -> Iterator[mutation.Connection]:
        mutation.begin(conn)
        self._completing = complete
        try:
            yield conn
        except BaseException:
            mutation.rollback_quietly(conn)
            raise
        finally:
            self._completing = False
        if self._receipt is None:
            mutation.rollback_quietly(conn)
            raise RuntimeError("write_receipt was not called: the mutation was rolled back")
        settled = self._settled if complete else None
        try:
            answered = mutation.commit(conn)
        except FenceConflict as exc:
            # Refused at COMMIT (the lease ended after write_receipt): nothing was written,
            # so there is nothing to complete, and the effect is told its lease is gone.
            self._receipt = None
            self._recorded = None
            self.lose(f"{type(exc).__name__}: {exc}")
            raise
        if not answered:
            self._judge_lost_commit()
        if settled is not None:
            self._completed = CompletionResult.COMMITTED if settled else CompletionResult.REPLAYED

    def write_receipt(
        self, conn: mutation.Connection, outcome: Outcome, result_code: str, *, receipt_id: str
    ) -> str:
        """Sign receipt v1 and write it in `conn`'s open transaction; returns its evidence
        digest. In a transaction opened with `complete=True` the same statement completes the
        execution with it (fenced on the same lease). `FenceConflict`/`LeaseLost`: the lease
        is gone, let the block raise (the mutation rolls back)."""
        signing = self._signing
        signed_as = (
            None
            if signing is None
            else (signing.identity, signing.finished_at_ms(self._runner.clock()))
        )
        # Completing here, the statement completes too: its refusal means the lease is gone.
        mutation_id = self._runner.mutation_id(self.lease) if self._completing else None
        try:
            write = write_receipt_in(
                conn,
                self.lease,
                outcome=outcome,
                result_code=result_code,
                receipt_id=receipt_id,
                keys=self._runner.keys,
                signed_as=signed_as,
                mutation_id=mutation_id,
            )
        except FenceConflict as exc:
            if mutation_id is not None:
                self.lose(f"{type(exc).__name__}: {exc}")
            raise
        self._settled = write.settled
        digest = write.written.evidence_digest
        self._receipt = (write.written.receipt["sig"], digest, write.xact_id)
        self.record(outcome, result_code, evidence_digest=digest)
        return digest

    def identity(self) -> DispatchIdentity:
        """The dispatch's identity, read under the live lease (`FenceConflict`/`LeaseLost`
        if it no longer holds): what a binding token is signed over
        (`resolver.executor.bindings`)."""
        self.check()
        try:
            return _fenced_identity(self._runner, self.lease)[0]
        except (FenceConflict, NotFound) as exc:
            self.lose(f"{type(exc).__name__}: {exc}")
            raise

    def publish_receipt(
        self,
        publisher: ReceiptPublisher,
        outcome: Outcome,
        result_code: str,
        *,
        receipt_id: str,
    ) -> PublishedReceipt:
        """Sign receipt v1 and publish it to object storage, for a side effect outside
        PostgreSQL; the block's end completes with its digest.

        The heartbeat stops first and the lease is renewed once in the foreground, so the
        PUT has the longest window; the identity and the finish time are read fenced on the
        lease (`FenceConflict`/`LeaseLost`: nothing is published). The PUT is sent only while
        the lease surely outlasts it (`resolver.executor.object_receipts`).
        """
        if self._transaction_used:
            raise RuntimeError("one side effect has one receipt")
        self._transaction_used = True
        self.stop_heartbeat()
        self.check()
        runner = self._runner
        try:
            runner._renew(self._lease)
            identity, now_ms = _fenced_identity(runner, self.lease)
        except (FenceConflict, NotFound) as exc:
            self.lose(f"{type(exc).__name__}: {exc}")
            raise
        receipt = sign_receipt(
            identity,
            outcome=outcome,
            result_code=result_code,
            finished_at_ms=now_ms,
            receipt_id=receipt_id,
            keys=runner.keys,
        )
        published = publisher.publish(
            publisher.key_for(identity.project_id, identity.dispatch_id),
            encode_receipt(receipt),
            lease_left=lambda: self._lease.remaining(runner.clock()),
            lease_seconds=runner.lease_seconds,
        )
        self.record(outcome, result_code, evidence_digest=published.evidence_digest)
        return published

    # -- internals ----------------------------------------------------------------------

    def start_heartbeat(self) -> None:
        self._heartbeat.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._heartbeat.is_alive():
            self._heartbeat.join()

    def lose(self, reason: str) -> None:
        if not self.cancelled.is_set():
            self.cancel_reason = reason
            self.cancelled.set()
            log.warning("execution_lease_lost", dispatch_id=self.lease.dispatch_id, reason=reason)

    def _refresh_before_transaction(self) -> None:
        """With the heartbeat stopped, the transaction must fit in what is left of the lease."""
        runner = self._runner
        if self._lease.remaining(runner.clock()) >= runner.lease_seconds / 2:
            return
        try:
            runner._renew(self._lease)
        except (FenceConflict, NotFound) as exc:
            self.lose(f"{type(exc).__name__}: {exc}")
            raise

    def _beat(self) -> None:
        runner = self._runner
        wait = runner.renew_interval
        while not self._stop.wait(wait):
            try:
                runner._renew(self._lease)
                wait = runner.renew_interval
            except (FenceConflict, NotFound) as exc:  # LeaseLost is a FenceConflict
                self.lose(f"{type(exc).__name__}: {exc}")
                return
            except StorageUnavailable:
                remaining = self._lease.remaining(runner.clock())
                if remaining <= 0:
                    self.lose("no renewal reached the database before the lease ran out")
                    return
                # Try again soon, but never hammer a database that is down.
                wait = min(runner.renew_interval, max(remaining / 4, 0.05))
            except Exception as exc:
                # Any other refusal will not heal by waiting: stop the side effect now rather
                # than let the lease run out unnoticed.
                self.lose(f"renewal refused: {type(exc).__name__}: {exc}")
                return

    def _judge_lost_commit(self) -> None:
        assert self._receipt is not None
        sig, digest, xact_id = self._receipt
        runner = self._runner
        verdict = mutation.judge_lost_commit(
            runner.database_url,
            xact_id,
            self.lease.dispatch_id,
            sig,
            timeout_seconds=max(runner.connect_timeout, self._lease.remaining(runner.clock())),
        )
        log.warning("commit_reply_lost", dispatch_id=self.lease.dispatch_id, verdict=verdict)
        if verdict is mutation.CommitVerdict.NOT_COMMITTED:
            self._recorded = None
            raise MutationNotCommitted(
                "the COMMIT reply was lost and the receipt is absent: the mutation rolled back"
            )
        if verdict is mutation.CommitVerdict.UNKNOWN:
            self._recorded = None
            raise CommitUnknown(
                "the COMMIT reply was lost and the receipt could not be re-read: do not repeat "
                "the side effect; recovery settles it from the receipt"
            )
        log.info("commit_confirmed_by_receipt", dispatch_id=self.lease.dispatch_id, digest=digest)

    def recorded(self) -> Completion | None:
        return self._recorded

    def completed(self) -> CompletionResult | None:
        """What the completion in the mutation's transaction did (None: none committed)."""
        return self._completed


def _fenced_identity(
    runner: SideEffectRunner, lease: ExecutionLease
) -> tuple[DispatchIdentity, int]:
    """The receipt's identity and the database clock, read under the live lease."""
    with runner._mutation_connection() as conn:
        try:
            row = dict(receipt_identity(conn, lease))
        finally:
            mutation.rollback_quietly(conn)
    now_ms = row.pop("db_now_ms")
    return DispatchIdentity(**row), now_ms


class SideEffectRunner:
    """Runs side effects of approved actions under the executor protocol (see module doc).

    Long-lived: one per executor process, its mutations on a pool of connections to
    `database_url` (opened on the first `effect.transaction()` without a connection of
    the caller's, at most `max_connections`). Close it when the process is done with it
    (`close()`, or use it as a context manager).
    """

    def __init__(
        self,
        store: ExecutionStore,
        *,
        database_url: str,
        owner: str,
        keys: KeyRing,
        lease_seconds: float = 30.0,
        renew_fraction: float = 1 / 3,
        connect_timeout_seconds: float = 5.0,
        max_connections: int = mutation.POOL_MAX_CONNECTIONS,
        clock: Clock = time.monotonic,
    ) -> None:
        if not 0 < renew_fraction <= 0.5:
            raise ValueError(
                "renew_fraction must be in (0, 0.5]: renewing later than half-way leaves no "
                "time to retry a renewal that failed"
            )
        self.client = ExecutionClient(store, owner=owner, lease_seconds=lease_seconds)
        # The barrier in one statement needs the protocol's own database; another store
        # crosses it call by call, and the receipt reads its identity in the mutation's
        # transaction.
        self._composing = store if isinstance(store, PostgresExecutionStore) else None
        self._owner = owner
        self.database_url = database_url
        self.keys = keys
        self.lease_seconds = lease_seconds
        self.renew_interval = lease_seconds * renew_fraction
        self.connect_timeout = connect_timeout_seconds
        self.clock = clock
        self._pool = mutation.MutationPool(
            database_url,
            connect_timeout_seconds=connect_timeout_seconds,
            max_connections=max_connections,
        )

    def __enter__(self) -> SideEffectRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pool of mutation connections (a later run opens it again)."""
        self._pool.close()

    def _mutation_connection(self) -> AbstractContextManager[mutation.Connection]:
        """A pooled connection for a mutation's transaction (autocommit off)."""
        return self._pool.connection()

    @contextmanager
    def run(
        self,
        dispatch_id: str,
        *,
        before_barrier: Callable[[ExecutionLease], None] | None = None,
    ) -> Iterator[SideEffect]:
        """Lease, cross the barrier, heartbeat, and complete what the block recorded.

        `before_barrier(lease)` runs between the lease and the barrier: the last moment a run
        may still be refused with nothing done (an approval that has expired meanwhile); what
        it raises propagates, and the lease is left to expire (never started, it may be
        leased again).
        """
        effect = self._cross_barrier(dispatch_id, before_barrier)
        effect.start_heartbeat()
        try:
            yield effect
        finally:
            effect.stop_heartbeat()
        completion = effect.recorded()
        if completion is None:
            raise RuntimeError(
                "the block recorded no outcome (write_receipt or record): nothing was "
                "completed; recovery settles the execution from evidence"
            )
        completed = effect.completed() or self.complete(effect.lease, completion)
        effect.result = RunResult(dispatch_id, completed, completion.evidence_digest)

    def _cross_barrier(
        self, dispatch_id: str, before_barrier: Callable[[ExecutionLease], None] | None
    ) -> SideEffect:
        lease_ms = int(self.lease_seconds * 1000)
        store = self._composing
        if store is not None and before_barrier is None:
            asked = self.clock()
            started = lease_and_start(store, dispatch_id, self._owner, lease_ms)
        else:
            lease = self.client.lease(dispatch_id)
            if before_barrier is not None:
                before_barrier(lease)
            asked = self.clock()
            if store is None:
                return SideEffect(self, _Lease(self.client.start(lease), self.lease_seconds, asked))
            started = start_with_identity(store, lease, lease_ms)
        signing = _Signing(started, self.clock())
        return SideEffect(self, _Lease(started.lease, self.lease_seconds, asked), signing=signing)

    def run_once(self, dispatch_id: str, body: Callable[[SideEffect], None]) -> RunResult:
        """`run` as a call: `body(effect)` performs the side effect and records it."""
        with self.run(dispatch_id) as effect:
            body(effect)
        assert effect.result is not None  # run raised otherwise
        return effect.result

    def mutation_id(self, lease: ExecutionLease) -> str:
        # One completion per execution attempt; the token is unique to that lease.
        return f"c-{lease.token}"

    def _renew(self, lease: _Lease) -> None:
        """One renewal; the new deadline counts from before the call."""
        asked = self.clock()
        lease.renewed(self.client.renew(lease.get()), asked)

    def complete(self, lease: ExecutionLease, completion: Completion) -> CompletionResult:
        """Complete; a lost reply is retried (an exact replay is idempotent, unlike the
        mutation)."""
        for attempt in range(1, _COMPLETE_ATTEMPTS + 1):
            try:
                return self.client.complete(lease, completion)
            except StorageUnavailable:
                if attempt == _COMPLETE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover
