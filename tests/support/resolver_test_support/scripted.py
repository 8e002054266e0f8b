"""The one scripted evidence provider of the tests: deterministic findings, recorded calls.

`ScriptedProvider` answers from a script and records every identity it was asked about. In
one process the script is a function of the identity, asked one item at a time (so a test can
hold one item with a gate). Across processes (the entry point `scripted`, for real `resolver
run` replicas) `TableScriptedProvider` reads the script from PostgreSQL, a page per query:
each dispatch's script is a list of findings with the database-clock instants at which the
next one takes over (e.g. `missing` until t1, then `verified_succeeded`), so replicas in
separate processes see the same answer at the same time. Either way evidence is bound to the
identity: a verified finding carries `evidence_digest` of the identity, and a table script
whose digest or idempotency key differs from the claimed identity answers `conflict`. Table
reads run in read-only transactions.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from resolver.core.domain import (
    DispatchIdentity,
    Finding,
    FindingKind,
    Outcome,
    canonical_json,
    sha256_hex,
)
from resolver.core.errors import ConfigError
from resolver.core.provider import Capability
from resolver.db.connect import Profile, connect, pooler_from_env, transaction

SCRIPT_TABLE_DDL = """
CREATE TABLE IF NOT EXISTS scripted_evidence (
    dispatch_id text PRIMARY KEY,
    action_digest text NOT NULL,
    idempotency_key text NOT NULL,
    kinds text[] NOT NULL,
    until_ms bigint[] NOT NULL,
    result_code text NOT NULL DEFAULT 'ok'
)
"""

_READ = """
SELECT dispatch_id, action_digest, idempotency_key, kinds, until_ms, result_code,
       resolver_now_ms(NULL) AS now_ms
FROM scripted_evidence WHERE dispatch_id = ANY(%(ids)s::text[])
"""

_SETTINGS = {"database_url_env", "timeout_seconds"}


@dataclass(frozen=True, slots=True)
class Script:
    """Findings in order; `until_ms[i]` ends phase i (one fewer than kinds: the last is final)."""

    kinds: tuple[FindingKind, ...]
    until_ms: tuple[int, ...] = ()
    result_code: str = "ok"

    def __post_init__(self) -> None:
        if len(self.until_ms) != len(self.kinds) - 1:
            raise ValueError("a script needs exactly one switch instant between two findings")

    def kind_at(self, now_ms: int) -> FindingKind:
        for kind, until in zip(self.kinds, self.until_ms, strict=False):
            if now_ms < until:
                return kind
        return self.kinds[-1]

    @property
    def final_outcome(self) -> Outcome | None:
        """The outcome a verified phase proves, if the script has one."""
        for kind in self.kinds:
            if kind is FindingKind.VERIFIED_SUCCEEDED:
                return Outcome.SUCCEEDED
            if kind is FindingKind.VERIFIED_FAILED:
                return Outcome.FAILED
        return None


def evidence_digest(
    dispatch_id: str, action_digest: str, idempotency_key: str, outcome: Outcome, result_code: str
) -> str:
    """The digest both the scripted receipt and the executor's completion carry."""
    return sha256_hex(
        canonical_json(
            {
                "dispatch_id": dispatch_id,
                "action_digest": action_digest,
                "idempotency_key": idempotency_key,
                "outcome": outcome.value,
                "result_code": result_code,
            }
        )
    )


def verified(
    identity: DispatchIdentity, outcome: Outcome = Outcome.SUCCEEDED, result_code: str = "ok"
) -> Finding:
    """Evidence that proves `outcome` for exactly this identity."""
    digest = evidence_digest(
        identity.dispatch_id, identity.action_digest, identity.idempotency_key, outcome, result_code
    )
    return Finding.verified(outcome, digest, result_code)


def finding_for(identity: DispatchIdentity, row: Mapping[str, Any]) -> Finding:
    """The answer of one script row at its database-clock instant."""
    if (row["action_digest"], row["idempotency_key"]) != (
        identity.action_digest,
        identity.idempotency_key,
    ):
        return Finding(FindingKind.CONFLICT)  # evidence about another action proves nothing
    script = Script(
        tuple(FindingKind(k) for k in row["kinds"]), tuple(row["until_ms"]), row["result_code"]
    )
    kind = script.kind_at(row["now_ms"])
    if not kind.is_verified:
        return Finding(kind)
    outcome = Outcome.SUCCEEDED if kind is FindingKind.VERIFIED_SUCCEEDED else Outcome.FAILED
    return verified(identity, outcome, script.result_code)


class ScriptedProvider:
    """Answers from a function of the identity, one item at a time; records every call.

    `entered` is set when a call begins and `gate`, when given, holds it until set: a test
    synchronises on these events, never on sleeps.
    """

    capability = Capability.AUTOMATIC

    def __init__(
        self,
        answer: Callable[[DispatchIdentity], Finding],
        *,
        timeout_seconds: float = 2.0,
        gate: threading.Event | None = None,
        entered: threading.Event | None = None,
    ) -> None:
        self._answer = answer
        self.timeout_seconds = timeout_seconds
        self.calls: list[DispatchIdentity] = []
        self._calls_lock = threading.Lock()
        self._gate = gate
        self._entered = entered

    def inspect(self, identity: DispatchIdentity) -> Finding:
        self._record([identity])
        if self._entered is not None:
            self._entered.set()
        if self._gate is not None:
            self._gate.wait(10)
        return self._answer(identity)

    def _record(self, identities: Sequence[DispatchIdentity]) -> None:
        with self._calls_lock:
            self.calls.extend(identities)


class TableScriptedProvider(ScriptedProvider):
    """The entry point `scripted`: the script is the `scripted_evidence` table, read a whole
    page per read-only query, so replicas in separate processes answer alike."""

    def __init__(self, settings: Mapping[str, Any] | None = None) -> None:
        settings = dict(settings or {})
        if unknown := set(settings) - _SETTINGS:
            raise ConfigError(f"scripted: unknown settings {sorted(unknown)}")
        env = str(settings.get("database_url_env", "RESOLVER_DATABASE_URL"))
        url = os.environ.get(env)
        if not url:
            raise ConfigError(f"scripted: {env} names no database URL")
        super().__init__(
            lambda i: self._answer_page([i])[i.dispatch_id],
            timeout_seconds=float(settings.get("timeout_seconds", 1.0)),
        )
        self._url = url
        self._conn: psycopg.Connection[dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        self._record(identities)
        return self._answer_page(identities)

    def _answer_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        with self._lock:
            rows = {r["dispatch_id"]: r for r in self._read([i.dispatch_id for i in identities])}
        missing = Finding(FindingKind.MISSING)
        return {
            i.dispatch_id: finding_for(i, rows[i.dispatch_id]) if i.dispatch_id in rows else missing
            for i in identities
        }

    def _read(self, ids: list[str]) -> list[dict[str, Any]]:
        try:
            conn = self._connection()
            with transaction(conn, self._profile()):
                return conn.execute(_READ, {"ids": ids}).fetchall()
        except psycopg.Error:
            # A dead connection is dropped; the reconciler turns the error into `unavailable`.
            self._drop()
            raise

    def _connection(self) -> psycopg.Connection[dict[str, Any]]:
        if self._conn is None or self._conn.closed:
            conn = connect(self._url, self._profile(), dict_rows=True)
            conn.read_only = True  # the provider can read evidence, never write it
            self._conn = conn
        return self._conn

    def _profile(self) -> Profile:
        # The resolver's own builder: behind a pooler it prepares nothing and sets the
        # timeout per transaction, as the product's providers do.
        return Profile(
            application_name="resolver-evidence:scripted",
            connect_timeout_seconds=self.timeout_seconds,
            settings={"statement_timeout": int(self.timeout_seconds * 1000)},
            pooler=pooler_from_env(),
            read_only=True,
        )

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
