"""`run_create`: the run repository's origin fact, bound to the dispatch that created the run.

A run created by a dispatch records, in the run repository's own transaction, one row in
`run_origin_facts` (unique per dispatch and per idempotency key) and later settles its state
once. Integrity comes from the database: foreign key to the immutable dispatch, unique
constraints, and a trigger that freezes the origin columns.

| evidence                                                  | finding              |
|-----------------------------------------------------------|----------------------|
| no fact for the dispatch or its idempotency key           | missing              |
| fact matches, state running                               | still_running        |
| fact matches, state succeeded / failed                    | verified_succeeded / verified_failed |
| key bound to another dispatch, or project, digest, attempt differ | conflict     |
| database unreachable, timeout, not migrated               | unavailable          |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, LiteralString

from providers._declared import receipt_reason
from providers._sql import SqlPageProvider, SqlSourceSettings
from resolver.evidence import (
    SQL_SOURCE_REASONS,
    DispatchIdentity,
    Finding,
    FindingKind,
    Outcome,
    ProviderSchema,
    Reason,
    RetainedTable,
    Row,
    canonical_json,
    declare,
    parse_provider_settings,
    sha256_hex,
)

NAME = "run_create"
EVIDENCE_KIND = "run_create.origin.v1"

# A fact found by the dispatch id or by the idempotency key: two rows for one identity mean
# the key was used by another dispatch (a collision, never success).
SELECT_RUN_FACTS: LiteralString = """
SELECT i.asked_dispatch_id, f.run_id, f.dispatch_id, f.idempotency_key, f.project_id,
       f.action_digest, f.attempt, f.state, f.result_code, f.created_at_ms, f.finished_at_ms
FROM unnest(%(dispatch_ids)s::text[], %(idempotency_keys)s::text[])
     AS i(asked_dispatch_id, idempotency_key)
JOIN run_origin_facts AS f
  ON f.dispatch_id = i.asked_dispatch_id OR f.idempotency_key = i.idempotency_key
ORDER BY i.asked_dispatch_id, f.run_id
"""

# Each conflict with its reason code, kept on the control and shown to the operator.
_MISSING = Finding(FindingKind.MISSING, cause="no_run")
_AMBIGUOUS = Finding(FindingKind.CONFLICT, cause="several_runs")
_UNBOUND = Finding(FindingKind.CONFLICT, cause="identity_mismatch")
_STILL_RUNNING = Finding(FindingKind.STILL_RUNNING)


class RunCreateSettings(SqlSourceSettings):
    pass


class RunCreateProvider(SqlPageProvider):
    """One READ ONLY query per page over `run_origin_facts`."""

    def inspect_page(self, identities: Sequence[DispatchIdentity]) -> Mapping[str, Finding]:
        params = {
            "dispatch_ids": [i.dispatch_id for i in identities],
            "idempotency_keys": [i.idempotency_key for i in identities],
        }
        rows = self._fetch(SELECT_RUN_FACTS, params)
        if isinstance(rows, Finding):
            return {i.dispatch_id: rows for i in identities}
        facts: dict[str, list[Row]] = {}
        for row in rows:
            facts.setdefault(row.pop("asked_dispatch_id"), []).append(row)
        return {i.dispatch_id: judge(i, facts.get(i.dispatch_id, [])) for i in identities}


def judge(identity: DispatchIdentity, facts: Sequence[Row]) -> Finding:
    """The finding the facts found for one identity prove."""
    if not facts:
        return _MISSING
    if len(facts) > 1:
        return _AMBIGUOUS
    (fact,) = facts
    bound = (
        fact["dispatch_id"] == identity.dispatch_id
        and fact["idempotency_key"] == identity.idempotency_key
        and fact["project_id"] == identity.project_id
        and fact["action_digest"] == identity.action_digest
        and fact["attempt"] == identity.attempt
    )
    if not bound:
        return _UNBOUND
    if fact["state"] == "running":
        return _STILL_RUNNING
    return Finding.verified(Outcome(fact["state"]), evidence_digest(fact), fact["result_code"])


def evidence_digest(fact: Row) -> str:
    """sha256 of the canonical fact: the same fact always yields the same digest."""
    return sha256_hex(canonical_json({"evidence": EVIDENCE_KIND, **fact}))


@declare(
    reasons=(
        Reason("no_run", "no run was found"),
        Reason("several_runs", "more than one run claims this dispatch"),
        receipt_reason("identity_mismatch"),
        *SQL_SOURCE_REASONS,
    ),
    # Its table: this package's migrations/, definitions.sql and grants.sql.
    schema=ProviderSchema(__name__, retained=(RetainedTable("run_origin_facts"),)),
)
def create(settings: Mapping[str, Any]) -> RunCreateProvider:
    """The `resolver.providers` entry point: settings from the YAML config."""
    parsed = parse_provider_settings(RunCreateSettings, settings, NAME)
    return RunCreateProvider(parsed.open_database(NAME), parsed.timeout_seconds)
