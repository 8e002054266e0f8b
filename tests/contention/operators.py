"""People in the run: operators who decide the manual queue while replicas, executors and
faults go on, through the real `ManualResolutionService`, two of them where a rule says so.

Each pass reads the queue as `alice` and decides each case once: a payment is marked
succeeded by two people (alice proposes, sometimes proposes twice, sometimes carol first
rejects with another decision, then bob confirms); anything else alice abandons alone. Every
call and its answer goes to the history; the checker judges the final rows
(`HumanPolicy`: never fewer than two people where a rule applies).
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import psycopg

from resolver.core.domain import CaseList, Decision, ManualDecision, ManualQueueItem, Principal
from resolver.core.errors import ResolverError, StorageUnavailable
from resolver.human.manual import ManualResolutionService
from resolver_test_support.history import History
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage

from .checker import HumanPolicy
from .forgery import forge_two_person
from .workload import (
    ESCALATE_AFTER_SECONDS,
    ESCALATING_TYPE,
    OPERATORS,
    PROJECTS,
    TWO_PERSON_RULE,
)

HUMAN_POLICY = HumanPolicy(
    two_person=[TWO_PERSON_RULE],
    escalate_after_ms={ESCALATING_TYPE: {"missing": ESCALATE_AFTER_SECONDS * 1000}},
)
PASS_PAUSE_SECONDS = 1.0


def grant_operators(conn: psycopg.Connection[Any]) -> None:
    """The policy mirror and the two-person rule the run decides under (idempotent)."""
    for project in PROJECTS:
        conn.execute(
            "INSERT INTO recovery_projects VALUES (%s, 1) ON CONFLICT DO NOTHING", (project,)
        )
        for user in OPERATORS:
            conn.execute(
                "INSERT INTO recovery_role_bindings VALUES (%s, %s, 'approval.recover', 1)"
                " ON CONFLICT DO NOTHING",
                (project, user),
            )
    conn.execute(
        "INSERT INTO recovery_two_person_rules VALUES (%s, %s) ON CONFLICT DO NOTHING",
        TWO_PERSON_RULE,
    )


class Operators:
    """A thread of people deciding the manual queue until stopped."""

    def __init__(
        self,
        store: Storage,
        history: History,
        rng: random.Random,
        forge_url: str | None = None,
    ) -> None:
        self._service = ManualResolutionService(store, proposal_ttl_ms=60_000, signer=TEST_SIGNER)
        self._store = store
        self._history = history
        self._rng = rng
        self._stop = threading.Event()
        self._seen: set[str] = set()
        self._thread = threading.Thread(target=self._loop, name="operators", daemon=True)
        self._calls = 0
        # The schema owner's own URL: between a proposal and its confirmation, now and then a
        # direct SQL attempt at the decision, with a real or an invented colleague.
        self._forge_url = forge_url

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                queue = self._store.list_cases("alice", CaseList.MANUAL, 100)
            except ResolverError:  # storage down or cut off by the fault schedule: next pass
                queue = []
            for item in queue:
                if self._stop.is_set() or item.dispatch_id in self._seen:
                    continue
                self._seen.add(item.dispatch_id)
                self._decide(item)
            self._stop.wait(PASS_PAUSE_SECONDS)  # a person's pace between passes

    def _decide(self, item: ManualQueueItem) -> None:
        if item.action_type.startswith(TWO_PERSON_RULE[0].removesuffix("*")):
            if self._rng.random() < 0.3:
                self._call("alice", item, Decision.CONFIRM_SUCCEEDED)
                self._call("carol", item, Decision.CONFIRM_FAILED)  # rejects the proposal
            self._call("alice", item, Decision.CONFIRM_SUCCEEDED)
            if self._rng.random() < 0.3:
                self._call("alice", item, Decision.CONFIRM_SUCCEEDED)  # twice: still one
            if self._forge_url is not None and self._rng.random() < 0.3:
                self._forge(item, self._rng.choice(["bob", "mallory"]))
            self._call("bob", item, Decision.CONFIRM_SUCCEEDED)
        else:
            self._call("alice", item, Decision.ABANDON_UNKNOWN)

    def _forge(self, item: ManualQueueItem, colleague: str) -> None:
        assert self._forge_url is not None
        self._calls += 1
        try:
            with psycopg.connect(self._forge_url, autocommit=True, connect_timeout=3) as conn:
                forge_two_person(
                    conn, self._history, "owner", item.dispatch_id, "alice", colleague,
                    f"forged-{item.dispatch_id}-{self._calls}",
                )  # fmt: skip
        except psycopg.OperationalError:  # cut off by the fault schedule: not an attempt
            return

    def _call(self, user: str, item: ManualQueueItem, decision: Decision) -> None:
        self._calls += 1
        request = ManualDecision(
            item.dispatch_id,
            decision,
            f"op-{user}-{item.dispatch_id}-{self._calls}",
            item.execution_version,
            "contention_operator",
        )
        # Fresh strong authentication on the host clock (the database's, on one host).
        principal = Principal(
            user, int(time.time() * 1000), ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
        )
        fields = {"dispatch_id": item.dispatch_id, "user": user, "decision": decision.value}
        self._history.record("invoke", "decide", **fields)
        try:
            result = self._service.decide(principal, request).value
        except StorageUnavailable:
            self._history.record("info", "decide", **fields)
            return
        except ResolverError as exc:
            code = getattr(exc, "code", type(exc).__name__)
            self._history.record("fail", "decide", **fields, error=code)
            return
        self._history.record("ok", "decide", **fields, result=result)
