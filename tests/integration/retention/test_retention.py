"""Retention on real PostgreSQL: exactly the right rows go, audit facts stay or are exported
first, a dry run writes nothing, and a killed run leaves no half-deleted dispatch."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from resolver.core.domain import (
    Completion,
    Decision,
    DispatchIdentity,
    Finding,
    FindingKind,
    ManualDecision,
    Outcome,
    Principal,
)
from resolver.core.errors import RetentionRefused
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from resolver.db.retention import PostgresRetention
from resolver.executor.client import ExecutionClient
from resolver.human.manual import ManualResolutionService
from resolver.outcomes import OutcomeFeed, OutcomeRecord
from resolver.retention import pruning as retention
from tests.helpers.cli import RESOLVER
from tests.helpers.database import EXEC_LEASE_MS, SQL, new_spec
from tests.helpers.harnesses import CONTENT, insert_run_fact, plant_install
from tests.helpers.providers import ScriptedProvider, fixed, registry
from tests.helpers.signing import TEST_ISSUER, TEST_SIGNER
from tests.helpers.stores import Storage
from tests.helpers.telemetry import wait_for

DAY_MS = 86_400_000

# Every table a prune may touch, with the key that names a row's dispatch.
TABLES = {
    "approved_action_dispatches": "dispatch_id",
    "approved_action_executions": "dispatch_id",
    "approved_action_recovery_controls": "dispatch_id",
    "approved_action_recovery_resolutions": "dispatch_id",
    "recovery_authorizations": "mutation_id",
    "action_receipts": "dispatch_id",
    "run_origin_facts": "dispatch_id",
    "package_install_records": "dispatch_id",
    "package_install_targets": "dispatch_id",
    "package_commit_markers": "dispatch_id",
    "recovery_outcomes": "dispatch_id",
    "recovery_prune_runs": "run_id",
}
EVIDENCE = (
    "action_receipts",
    "run_origin_facts",
    "package_install_records",
    "package_install_targets",
    "package_commit_markers",
)


def snapshot(sql: SQL) -> dict[str, dict[str, Any]]:
    """Every row of every table the prune touches, as JSON, keyed per table."""
    return {
        table: {
            str(r["k"]): r["row"]
            for r in sql.all(f"SELECT {key} AS k, to_jsonb(t) AS row FROM {table} AS t")
        }
        for table, key in TABLES.items()
    }


def present(sql: SQL, dispatch_id: str) -> dict[str, bool]:
    """Which tables still hold a row of this dispatch (authorizations through the resolution
    they belong to)."""
    found = {
        table: bool(sql.all(f"SELECT 1 FROM {table} WHERE dispatch_id = %s", dispatch_id))
        for table, key in TABLES.items()
        if key == "dispatch_id"
    }
    found["recovery_authorizations"] = bool(
        sql.all(
            "SELECT 1 FROM recovery_authorizations AS a JOIN approved_action_recovery_resolutions"
            " AS r USING (mutation_id) WHERE r.dispatch_id = %s",
            dispatch_id,
        )
    )
    return found


@dataclass
class Population:
    """Dispatches by kind, built through the executor API, the reconciler and the manual
    service at chosen database-clock instants."""

    store: Storage
    sql: SQL
    now_ms: int
    executor: ExecutionClient = field(init=False)
    ids: dict[str, str] = field(default_factory=dict)
    script: dict[str, FindingKind] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.executor = ExecutionClient(
            self.store, owner="exec", lease_seconds=EXEC_LEASE_MS / 1000
        )

    def started(self, name: str, at_ms: int, **spec: Any) -> Any:
        created = self.executor.create_dispatch(new_spec(**spec))
        self.ids[name] = created.dispatch_id
        lease = self.executor.at(at_ms).lease(created.dispatch_id)
        return self.executor.at(at_ms).start(lease)

    def completed(self, name: str, at_ms: int, receipt: bool = False, **spec: Any) -> None:
        lease = self.started(name, at_ms, **spec)
        completion = Completion(Outcome.SUCCEEDED, "done", f"m-{lease.dispatch_id}")
        self.executor.at(at_ms + 100).complete(lease, completion)
        if receipt:
            self.receipt(name)

    def crashed(self, name: str, at_ms: int, finding: FindingKind | None = None) -> None:
        self.started(name, at_ms)
        if finding is not None:
            self.script[self.ids[name]] = finding

    def receipt(self, name: str) -> None:
        self.sql.all(
            "INSERT INTO action_receipts (dispatch_id, receipt) VALUES (%s, %s)",
            self.ids[name],
            json.dumps({"v": 1, "dispatch_id": self.ids[name]}),
        )

    def run_fact_and_install(self, name: str) -> None:
        dispatch_id = self.ids[name]
        row = self.sql.one(
            "SELECT * FROM approved_action_dispatches WHERE dispatch_id = %s", dispatch_id
        )
        insert_run_fact(
            self.sql.conn,
            {
                "run_id": f"run-{dispatch_id}",
                "dispatch_id": dispatch_id,
                "idempotency_key": f"run-{row['idempotency_key']}",
                "project_id": row["project_id"],
                "action_digest": row["action_digest"],
                "attempt": 1,
                "state": "succeeded",
                "result_code": "ok",
                "finished_at_ms": self.now_ms,
            },
        )
        identity = DispatchIdentity(
            schema_version=1,
            dispatch_id=dispatch_id,
            approval_request_id=row["approval_request_id"],
            project_id=row["project_id"],
            action_type=row["action_type"],
            action_digest=row["action_digest"],
            attempt=1,
            started_at_ms=0,
            idempotency_key=row["idempotency_key"],
        )
        plant_install(self.sql.conn, identity, marker=CONTENT)

    def reconcile(self, at_ms: int) -> None:
        def answer(identity: DispatchIdentity) -> Finding:
            return fixed(self.script.get(identity.dispatch_id, FindingKind.MISSING))(identity)

        reconciler = Reconciler(
            self.store,
            registry("test.action", ScriptedProvider(answer)),
            ReconcilerSettings(owner="replica", page_size=64, recovery_lease_ms=30_000),
            Runtime(rng=random.Random(5)),
        )
        try:
            reconciler.at(at_ms).run_cycle()
        finally:
            reconciler.close()

    def decide(self, name: str, at_ms: int) -> None:
        dispatch_id = self.ids[name]
        version = self.sql.execution(dispatch_id)["version"]
        decision = ManualDecision(
            dispatch_id, Decision.CONFIRM_FAILED, f"op-{dispatch_id}", version, "vendor_says_no"
        )
        principal = Principal(
            "alice", at_ms - 1_000, ("mfa",), issuer=TEST_ISSUER, token_kid="test-kid"
        )
        ManualResolutionService(self.store, signer=TEST_SIGNER).at(at_ms).decide(
            principal, decision
        )


def db_now(sql: SQL) -> int:
    return int(sql.one("SELECT resolver_now_ms(NULL) AS ms")["ms"])


@pytest.fixture
def population(store: Storage, sql: SQL) -> Population:
    """Ten kinds of dispatch around a 30-day cut-off (old = 40 days, recent = 1 day ago)."""
    sql.all("INSERT INTO recovery_projects VALUES ('proj-1', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-1', 'alice', 'approval.recover', 1)")
    now = db_now(sql)
    old, recent = now - 40 * DAY_MS, now - DAY_MS
    pop = Population(store, sql, now)
    pop.crashed("open_old", old)  # armed, never settled: stays whatever its age
    pop.crashed("manual_old", old, FindingKind.UNSUPPORTED)  # waits for a human: stays
    pop.crashed("auto_old", old, FindingKind.VERIFIED_SUCCEEDED)
    pop.crashed("auto_old_bare", old, FindingKind.VERIFIED_FAILED)
    pop.crashed("decided_old", old, FindingKind.CONFLICT)
    leased = pop.executor.create_dispatch(new_spec())  # leased, never started: stays
    pop.ids["leased_old"] = leased.dispatch_id
    pop.executor.at(old).lease(leased.dispatch_id)
    never = pop.executor.create_dispatch(new_spec())  # identity only: stays
    pop.ids["identity_only"] = never.dispatch_id
    pop.completed("completed_old", old, receipt=True)
    pop.completed("completed_old_bare", old)
    pop.completed("completed_old_superseded", old)
    pop.completed("completed_recent", recent, receipt=True)
    pop.crashed("auto_recent", recent, FindingKind.VERIFIED_SUCCEEDED)
    pop.reconcile(old + EXEC_LEASE_MS)
    pop.reconcile(recent + EXEC_LEASE_MS)
    pop.decide("decided_old", old + EXEC_LEASE_MS + 60_000)
    pop.receipt("auto_old")
    pop.run_fact_and_install("auto_old")
    pop.run_fact_and_install("completed_old")
    pop.receipt("auto_recent")
    # A newer dispatch (still open) supersedes a settled one: the old identity must stay.
    newer = new_spec(supersedes_dispatch_id=pop.ids["completed_old_superseded"])
    pop.ids["superseding_open"] = pop.executor.create_dispatch(newer).dispatch_id
    controls = {
        c["dispatch_id"]: c for c in sql.all("SELECT * FROM approved_action_recovery_controls")
    }
    kinds = {name: controls.get(i, {}).get("status") for name, i in pop.ids.items()}
    assert kinds == {
        "open_old": "armed",
        "manual_old": "manual",
        "auto_old": "resolved",
        "auto_old_bare": "resolved",
        "decided_old": "resolved",
        "leased_old": None,
        "identity_only": None,
        "completed_old": "resolved",
        "completed_old_bare": "resolved",
        "completed_old_superseded": "resolved",
        "completed_recent": "resolved",
        "auto_recent": "resolved",
        "superseding_open": None,
    }
    return pop


@pytest.fixture
def retention_store(database_url: str) -> Iterator[PostgresRetention]:
    with PostgresRetention(database_url) as s:
        yield s


def prune(store: PostgresRetention, **options: Any) -> retention.PruneReport:
    options.setdefault("older_than_ms", 30 * DAY_MS)
    return retention.prune(store, retention.PruneOptions(**options))


WHOLE = dict.fromkeys(TABLES, True)
ALL_TABLES = [t for t in TABLES if t != "recovery_prune_runs"]


def _expect(**kept: bool) -> dict[str, bool]:
    return {t: kept.get(t, False) for t in ALL_TABLES}


AUDIT_KEPT = _expect(
    approved_action_dispatches=True,
    approved_action_recovery_resolutions=True,
    recovery_authorizations=True,
)


def test_default_prune_takes_exactly_the_old_settled_and_keeps_audit_facts(
    population: Population, retention_store: PostgresRetention, sql: SQL
) -> None:
    before = snapshot(sql)
    report = prune(retention_store, batch=2)
    ids = population.ids
    gone = {"auto_old", "auto_old_bare", "decided_old", "completed_old", "completed_old_bare",
            "completed_old_superseded"}  # fmt: skip
    assert (report.dispatches, report.audit) == (len(gone), 0)
    assert report.evidence == 5 + 5  # auto_old, completed_old: receipt, run fact, 3 install facts
    # Each settled record with its dispatch, and the superseded one's second record.
    assert (report.outcomes, report.outcomes_unread) == (len(gone) + 1, 0)
    for name, dispatch_id in ids.items():
        where = present(sql, dispatch_id)
        if name not in gone:
            # Untouched: every row of the dispatch still there, byte for byte.
            for table, key in TABLES.items():
                if key == "dispatch_id":
                    assert before[table].get(dispatch_id) == snapshot(sql)[table].get(dispatch_id)
            continue
        if name in ("auto_old", "auto_old_bare", "decided_old"):
            has_auth = name == "decided_old"
            assert where == {**AUDIT_KEPT, "recovery_authorizations": has_auth}, name
        elif name == "completed_old_superseded":
            assert where == _expect(approved_action_dispatches=True), name
        else:
            assert where == _expect(), name
    # The audit facts left behind are unchanged.
    after = snapshot(sql)
    assert (
        after["approved_action_recovery_resolutions"]
        == before["approved_action_recovery_resolutions"]
    )
    assert after["recovery_authorizations"] == before["recovery_authorizations"]
    (run,) = after["recovery_prune_runs"].values()
    assert run["finished_at_ms"] is not None and run["include_audit"] is False
    assert (run["dispatches_pruned"], run["audit_pruned"], run["evidence_pruned"]) == (
        len(gone),
        0,
        report.evidence,
    )
    assert run["cutoff_ms"] == report.cutoff_ms
    assert run["db_user"] == sql.one("SELECT session_user AS u")["u"]
    # A second run finds nothing more to take.
    again = prune(retention_store)
    assert (again.dispatches, again.audit, again.evidence) == (0, 0, 0)


def test_dry_run_counts_and_writes_nothing(
    population: Population, retention_store: PostgresRetention, sql: SQL
) -> None:
    before = snapshot(sql)
    report = prune(retention_store, dry_run=True)
    assert (report.candidates, report.audited_candidates) == (6, 3)
    assert report.run_id is None
    assert snapshot(sql) == before
    # After a default run, an audit dry run counts the remnants it would take with them.
    prune(retention_store)
    before = snapshot(sql)
    audit = prune(retention_store, dry_run=True, include_audit=True)
    assert (audit.candidates, audit.audited_candidates) == (3, 3)
    assert snapshot(sql) == before


def test_include_audit_exports_then_deletes_exactly_the_exported_audit_rows(
    population: Population, retention_store: PostgresRetention, sql: SQL, tmp_path: Path
) -> None:
    # First the default prune leaves audit remnants; the audit run then takes them too.
    prune(retention_store)
    population.completed("completed_between", population.now_ms - 35 * DAY_MS)
    before = snapshot(sql)
    path = tmp_path / "audit.jsonl"
    with retention.open_export(str(path)) as stream:
        report = prune(retention_store, include_audit=True, export=stream, batch=2)
    after = snapshot(sql)
    data = path.read_bytes()
    assert report.export_digest == hashlib.sha256(data).hexdigest()
    lines = [json.loads(line) for line in data.splitlines()]
    assert report.export_lines == len(lines) == 4

    def deleted(table: str) -> dict[str, Any]:
        return {k: v for k, v in before[table].items() if k not in after[table]}

    assert {line["dispatch"]["dispatch_id"]: line["dispatch"] for line in lines} == deleted(
        "approved_action_dispatches"
    )
    assert {
        line["resolution"]["dispatch_id"]: line["resolution"]
        for line in lines
        if line["resolution"]
    } == deleted("approved_action_recovery_resolutions")
    assert {
        line["authorization"]["mutation_id"]: line["authorization"]
        for line in lines
        if line["authorization"]
    } == deleted("recovery_authorizations")
    ids = population.ids
    assert {line["dispatch"]["dispatch_id"] for line in lines} == {
        ids["auto_old"], ids["auto_old_bare"], ids["decided_old"], ids["completed_between"]
    }  # fmt: skip
    assert (report.dispatches, report.remnants, report.audit, report.skipped) == (1, 3, 3, 0)
    run = after["recovery_prune_runs"][str(report.run_id)]
    assert run["export_digest"] == report.export_digest and run["include_audit"] is True
    assert run["audit_pruned"] == 3
    # Open, manual, recent and superseded identities are all still there.
    for name in ("open_old", "manual_old", "leased_old", "identity_only", "completed_recent",
                 "auto_recent", "superseding_open", "completed_old_superseded"):  # fmt: skip
        assert present(sql, ids[name])["approved_action_dispatches"], name


def test_export_restores_into_a_table_for_an_audit(
    population: Population, retention_store: PostgresRetention, sql: SQL, tmp_path: Path
) -> None:
    """The restore procedure of docs/operations.md: load the lines, query them with SQL."""
    resolutions = {r["dispatch_id"]: r for r in sql.all(
        "SELECT * FROM approved_action_recovery_resolutions")}  # fmt: skip
    path = tmp_path / "audit.jsonl"
    with retention.open_export(str(path)) as stream:
        prune(retention_store, include_audit=True, export=stream)
    sql.all("CREATE TABLE restored_audit (line jsonb NOT NULL)")
    with (
        sql.conn.cursor() as cur,
        cur.copy(
            "COPY restored_audit (line) FROM STDIN WITH (FORMAT csv, QUOTE e'\\x01', DELIMITER e'\\x02')"
        ) as copy,
    ):
        copy.write(path.read_bytes())
    rows = sql.all(
        "SELECT line->'dispatch'->>'dispatch_id' AS dispatch_id,"
        " line->'resolution'->>'actor_user_id' AS actor,"
        " line->'authorization'->'amr' AS amr FROM restored_audit"
        " WHERE line->'resolution'->>'source' = 'manual'"
    )
    decided = population.ids["decided_old"]
    assert rows == [{"dispatch_id": decided, "actor": "alice", "amr": ["mfa"]}]
    assert resolutions[decided]["actor_user_id"] == "alice"


def test_refusals_delete_nothing(
    population: Population, retention_store: PostgresRetention, sql: SQL
) -> None:
    before = snapshot(sql)
    with pytest.raises(ValueError, match="needs --export"):
        retention.PruneOptions(older_than_ms=DAY_MS, include_audit=True)
    future = db_now(sql) + DAY_MS
    with pytest.raises(RetentionRefused, match="in the past"):
        retention_store.begin(future, False, None, "t")
    with pytest.raises(RetentionRefused, match="sha256"):
        retention_store.begin(0, True, None, "t")
    run_id = retention_store.begin(0, True, "a" * 64, "t")
    with pytest.raises(RetentionRefused, match="only the dispatches it exported"):
        retention_store.batch(run_id, 10, None, 1_000)
    with pytest.raises(RetentionRefused, match="between 1 and 10000"):
        retention_store.batch(run_id, 0, [], 1_000)
    retention_store.finish(run_id)
    with pytest.raises(RetentionRefused, match="not open"):
        retention_store.batch(run_id, 10, [], 1_000)
    after = snapshot(sql)
    del after["recovery_prune_runs"], before["recovery_prune_runs"]
    assert after == before


def test_fact_triggers_still_refuse_a_direct_delete_even_with_the_flag_set(
    population: Population, sql: SQL, database_url: str
) -> None:
    """Outside the prune function the flag alone opens nothing for a role that is not the
    owner (here: a role granted DELETE, which the deployed roles do not even have)."""
    role = f"forger_{os.getpid()}_{random.randrange(10**6)}"
    sql.all(f"CREATE ROLE {role}")
    try:
        sql.all(f"GRANT DELETE, SELECT ON approved_action_recovery_resolutions TO {role}")
        with psycopg.connect(database_url) as conn:
            conn.execute(f"SET ROLE {role}")
            conn.execute("SET resolver.prune_active = 'on'")
            with pytest.raises(psycopg.errors.RestrictViolation, match="insert-only"):
                conn.execute("DELETE FROM approved_action_recovery_resolutions")
    finally:
        sql.all(f"DROP OWNED BY {role}")
        sql.all(f"DROP ROLE {role}")


def test_late_lease_of_a_pruned_dispatch_is_refused(
    population: Population, retention_store: PostgresRetention, sql: SQL
) -> None:
    """A resolution survives its execution: the identity must never be leased (run) again."""
    prune(retention_store)
    from resolver.core.errors import ConstraintViolation

    with pytest.raises(ConstraintViolation):
        population.executor.lease(population.ids["auto_old"])
    with pytest.raises(psycopg.errors.RestrictViolation, match="never leased again"):
        sql.all(
            "INSERT INTO approved_action_executions (dispatch_id, state, owner, token, version,"
            " attempt, lease_expires_at_ms) VALUES (%s, 'leased', 'o', gen_random_uuid(), 1, 1, 0)",
            population.ids["decided_old"],
        )
    assert not present(sql, population.ids["auto_old"])["approved_action_executions"]


# -- the command, killed in the middle -------------------------------------------------------


def _env(database_url: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RESOLVER_")}
    return {**clean, "RESOLVER_DATABASE_URL": database_url}


def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def test_sigkill_mid_run_leaves_no_half_deleted_dispatch_and_the_next_run_finishes(
    store: Storage, sql: SQL, database_url: str
) -> None:
    now = db_now(sql)
    pop = Population(store, sql, now)
    names = [f"c{i:02d}" for i in range(30)]
    for i, name in enumerate(names):
        pop.completed(name, now - 40 * DAY_MS + i * 1_000, receipt=True)
    ids = [pop.ids[n] for n in names]
    # Batches of 5 in closing order: hold a receipt of the third batch, so that batch deletes
    # its executions and controls, then waits on the receipt: killed there, mid-batch.
    with psycopg.connect(database_url, row_factory=dict_row) as holder:
        holder.execute(
            "SELECT 1 FROM action_receipts WHERE dispatch_id = %s FOR UPDATE", (ids[12],)
        )
        proc = subprocess.Popen(
            [*RESOLVER, "prune", "--older-than", "30d", "--batch", "5", "--lock-timeout", "600000"],
            env=_env(database_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:

            def waiting_in_third_batch() -> bool:
                runs = sql.all("SELECT batches FROM recovery_prune_runs")
                waiting = sql.all(
                    "SELECT 1 FROM pg_stat_activity WHERE application_name = 'resolver-prune'"
                    " AND wait_event_type = 'Lock'"
                )
                return runs == [{"batches": 2}] and bool(waiting)

            _until(waiting_in_third_batch)
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(30) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()
        holder.rollback()
    # The orphaned backend finds its client gone and rolls the third batch back.
    _until(lambda: not sql.all(
        "SELECT 1 FROM pg_stat_activity WHERE application_name = 'resolver-prune'"))  # fmt: skip
    for i, dispatch_id in enumerate(ids):
        where = present(sql, dispatch_id)
        expected_whole = i >= 10
        assert where == {
            **_expect(),
            **(
                {
                    "approved_action_dispatches": True,
                    "approved_action_executions": True,
                    "approved_action_recovery_controls": True,
                    "action_receipts": True,
                    "recovery_outcomes": True,
                }
                if expected_whole
                else {}
            ),
        }, (i, where)
    (killed,) = sql.all("SELECT * FROM recovery_prune_runs")
    assert (killed["batches"], killed["dispatches_pruned"], killed["finished_at_ms"]) == (
        2,
        10,
        None,
    )
    finish = subprocess.run(
        [*RESOLVER, "prune", "--older-than", "30d", "--batch", "5", "--json"],
        env=_env(database_url),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finish.returncode == 0, finish.stderr
    assert json.loads(finish.stdout)["dispatches_pruned"] == 20
    assert all(not any(present(sql, i).values()) for i in ids)


def test_metrics_show_what_the_runs_pruned(
    population: Population, retention_store: PostgresRetention, store: Storage
) -> None:
    from prometheus_client import CollectorRegistry

    from resolver.telemetry.retention_metrics import PruneCollector

    registry = CollectorRegistry()
    registry.register(PruneCollector(store, ttl_seconds=0))
    assert registry.get_sample_value("resolver_pruned_dispatches_total") == 0
    assert registry.get_sample_value("resolver_last_prune_timestamp_seconds") is None
    report = prune(retention_store)
    assert registry.get_sample_value("resolver_pruned_dispatches_total") == report.dispatches == 6
    assert registry.get_sample_value("resolver_pruned_audit_dispatches_total") == 0
    last = registry.get_sample_value("resolver_last_prune_timestamp_seconds")
    assert last is not None and abs(last * 1000 - population.now_ms) < 600_000


def test_duty_cycle_rests_in_proportion_to_each_batch(
    population: Population, retention_store: PostgresRetention
) -> None:
    ticks = iter(range(1_000))
    rests: list[float] = []
    options = retention.PruneOptions(older_than_ms=30 * DAY_MS, batch=2, duty_cycle=0.25)
    report = retention.prune(
        retention_store, options, pause=rests.append, clock=lambda: float(next(ticks))
    )
    # Each batch "took" one tick; a quarter duty cycle rests three times that after it.
    assert report.batches == 4 and rests == [3.0] * 3


def test_a_batch_that_keeps_hitting_its_lock_timeout_stops_the_run_whole(
    population: Population, retention_store: PostgresRetention, sql: SQL, database_url: str
) -> None:
    from resolver.core.errors import LockTimeout

    before = snapshot(sql)
    rests: list[float] = []
    with psycopg.connect(database_url) as holder:
        holder.execute(
            "SELECT 1 FROM action_receipts WHERE dispatch_id = %s FOR UPDATE",
            (population.ids["completed_old"],),
        )
        options = retention.PruneOptions(
            older_than_ms=30 * DAY_MS, batch=100, lock_timeout_ms=50, lock_retries=2
        )
        with pytest.raises(LockTimeout):
            retention.prune(retention_store, options, pause=rests.append)
        holder.rollback()
    assert rests == [0.1, 0.2]
    after = snapshot(sql)
    (run,) = after.pop("recovery_prune_runs").values()
    before.pop("recovery_prune_runs")
    assert after == before and (run["batches"], run["finished_at_ms"]) == (0, None)


def _prune_cli(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RESOLVER, "prune", *args],
        env=_env(database_url),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--older-than", "ninety days"], 2, "is not a duration"),
        (["--older-than", "0d"], 2, "not a positive duration"),
        (["--older-than", "30d", "--include-audit"], 2, "needs --export"),
        (["--older-than", "30d", "--batch", "0"], 2, "--batch"),
        (["--older-than", "30d", "--dry-run", "--export", "-"], 2, "writes nothing"),
        (["--older-than", "30d", "--duty-cycle", "0"], 2, "--duty-cycle"),
    ],
)
def test_the_command_refuses_bad_input_with_a_clear_error_and_code(
    population: Population, sql: SQL, database_url: str, args: list[str], code: int, message: str
) -> None:
    before = snapshot(sql)
    result = _prune_cli(database_url, *args)
    assert (result.returncode, message in result.stderr) == (code, True), result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(sql) == before


def test_the_command_exports_to_stdout_and_keeps_an_existing_export(
    population: Population, sql: SQL, database_url: str, tmp_path: Path
) -> None:
    result = subprocess.run(
        [*RESOLVER, "prune", "--older-than", "30d", "--export", "-", "--include-audit"],
        env=_env(database_url),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 6 and all(json.loads(line)["v"] == 1 for line in lines)
    digest = hashlib.sha256(result.stdout).hexdigest()
    assert f"export sha256 {digest}".encode() in result.stderr
    (run,) = sql.all("SELECT export_digest, audit_pruned FROM recovery_prune_runs")
    assert run == {"export_digest": digest, "audit_pruned": 3}
    existing = tmp_path / "kept.jsonl"
    existing.write_bytes(b"an earlier export\n")
    again = _prune_cli(database_url, "--older-than", "1d", "--export", str(existing))
    assert again.returncode == 5 and "never overwritten" in again.stderr
    assert existing.read_bytes() == b"an earlier export\n"
    into_dir = _prune_cli(database_url, "--older-than", "1d", "--export", str(tmp_path), "--json")
    assert into_dir.returncode == 0, into_dir.stderr
    (written,) = [p for p in tmp_path.iterdir() if p.name.startswith("resolver-prune-")]
    assert (
        json.loads(into_dir.stdout)["export_sha256"]
        == hashlib.sha256(written.read_bytes()).hexdigest()
    )


# -- the outcome feed's consumers -----------------------------------------------------------------

OLD_SETTLED = ("auto_old", "auto_old_bare", "decided_old", "completed_old", "completed_old_bare",
               "completed_old_superseded")  # fmt: skip


def _feed(database_url: str) -> list[OutcomeRecord]:
    """Every record of the population (nine: eight settled, one superseded), once readable."""
    with OutcomeFeed(database_url) as feed:
        return wait_for(
            "the population's records below the horizon",
            lambda: records if len(records := feed.read(limit=1000)) >= 9 else None,
            timeout_seconds=60,
        )


def test_a_registered_consumer_holds_back_what_it_has_not_read_and_the_run_says_so(
    population: Population, retention_store: PostgresRetention, sql: SQL, database_url: str
) -> None:
    records = _feed(database_url)
    names = {i: n for n, i in population.ids.items()}
    with OutcomeFeed(database_url) as feed:
        feed.save_cursor("billing", "")
        # A consumer that read the first four records of old settled dispatches.
        old = [r for r in records if names[r.dispatch_id] in OLD_SETTLED]
        feed.save_cursor("audit-bus", old[3].cursor)
    before = snapshot(sql)
    held = prune(retention_store)
    # `billing` has read nothing: every old settled dispatch stays, whole, and the run says why.
    assert (held.dispatches, held.outcomes) == (0, 0)
    assert snapshot(sql)["recovery_outcomes"] == before["recovery_outcomes"]
    assert [(c.consumer, c.cursor, c.holding) for c in held.consumers] == [
        ("billing", "0:0", len(OLD_SETTLED)),
        ("audit-bus", old[3].cursor, len({r.dispatch_id for r in old[4:]})),
    ]
    assert held.held_for_consumers == len(OLD_SETTLED)
    assert held.document()["held_for_consumers"] == len(OLD_SETTLED)
    said = _prune_cli(database_url, "--older-than", "30d")
    assert said.returncode == 0, said.stderr
    assert f"{len(OLD_SETTLED)} settled dispatches stay for outcome consumers" in said.stdout
    assert "billing at 0:0" in said.stdout and "--past-consumers" in said.stdout
    assert prune(retention_store, dry_run=True).candidates == 0

    # Once `billing` is gone, the slower of the two left is `audit-bus`: exactly the dispatches
    # whose every record it has read go (a superseded dispatch has two records).
    with OutcomeFeed(database_url) as feed:
        assert feed.drop_consumer("billing")
    passed = {r.dispatch_id for r in old[:4]} - {r.dispatch_id for r in old[4:]}
    partial = prune(retention_store)
    assert partial.dispatches == len(passed)
    assert {names[d] for d in passed} <= set(OLD_SETTLED)
    remaining = {r["dispatch_id"] for r in sql.all("SELECT dispatch_id FROM recovery_outcomes")}
    assert not passed & remaining
    assert {r.dispatch_id for r in old[4:]} <= remaining
    assert partial.outcomes_unread == 0

    # Read to the end: nothing is held any more.
    with OutcomeFeed(database_url) as feed:
        feed.save_cursor("audit-bus", records[-1].cursor)
    rest = prune(retention_store)
    assert rest.dispatches == len(OLD_SETTLED) - len(passed)
    assert [c.holding for c in rest.consumers] == [0]


def test_a_run_past_consumers_prunes_what_they_have_not_read_and_counts_it(
    population: Population, retention_store: PostgresRetention, sql: SQL, database_url: str
) -> None:
    _feed(database_url)
    with OutcomeFeed(database_url) as feed:
        feed.save_cursor("billing", "")
    report = prune(retention_store, past_consumers=True)
    assert report.dispatches == len(OLD_SETTLED)
    # Named before anything went, with what it was about to lose.
    assert [(c.consumer, c.holding) for c in report.consumers] == [("billing", len(OLD_SETTLED))]
    assert report.outcomes == report.outcomes_unread == len(OLD_SETTLED) + 1
    (run,) = sql.all(
        "SELECT past_consumers, outcomes_pruned, outcomes_unread FROM recovery_prune_runs"
    )
    assert run == {"past_consumers": True, "outcomes_pruned": 7, "outcomes_unread": 7}
    said = _prune_cli(database_url, "--older-than", "1d", "--past-consumers", "--json")
    assert said.returncode == 0, said.stderr
    document = json.loads(said.stdout)
    assert (document["past_consumers"], document["held_for_consumers"]) == (True, 0)
    # The consumer itself is untouched: it reads on from where it was.
    with OutcomeFeed(database_url) as feed:
        assert feed.consumer_cursor("billing") == "0:0"
        left = feed.read(limit=1000)
    assert {population.ids[n] for n in ("completed_recent", "auto_recent")} >= {
        r.dispatch_id for r in left
    }
