"""The history checker: every invariant of docs/design.md over the recorded operations and final rows."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resolver.core.domain import Outcome

from .workload import Kind, Plan

Event = dict[str, Any]
Row = dict[str, Any]

VERIFIED = {"verified_succeeded", "verified_failed"}
NEEDS_HUMAN = {"conflict", "unsupported"}

SNAPSHOT_SQL = """
SELECT d.dispatch_id, d.action_type, e.state, e.version, e.completion_mutation_id,
       e.evidence_digest AS exec_digest,
       c.status, c.closed_by, c.recovery_token::text AS recovery_token, c.last_finding,
       c.manual_reason, c.manual_at_ms, c.first_inspected_at_ms,
       r.source, r.outcome, r.finding, r.evidence_digest AS res_digest,
       r.mutation_id AS res_mutation_id,
       (SELECT count(*) FROM approved_action_recovery_resolutions AS r2
         WHERE r2.dispatch_id = d.dispatch_id) AS resolutions,
       -- People as the database's own rule counts them: signed facts of users still bound
       -- at the versions the fact names.
       (SELECT count(DISTINCT a.user_id) FROM recovery_authorizations AS a
         JOIN recovery_role_bindings AS b
           ON b.project_id = a.project_id AND b.user_id = a.user_id
          AND b.permission = 'approval.recover' AND b.version = a.role_binding_version
         WHERE a.mutation_id = r.mutation_id AND a.signature IS NOT NULL) AS people,
       (SELECT count(*) FROM recovery_proposals AS p
         WHERE p.dispatch_id = d.dispatch_id AND p.closed_as IS NULL) AS open_proposals
FROM approved_action_dispatches AS d
LEFT JOIN approved_action_executions AS e USING (dispatch_id)
LEFT JOIN approved_action_recovery_controls AS c USING (dispatch_id)
LEFT JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
"""

# Late evidence after a manual decision (one row per recorded fact), beside the decision and
# the execution it must never move.
LATE_SNAPSHOT_SQL = """
SELECT l.dispatch_id, l.observation_id, l.finding, l.agrees, l.observer,
       r.source, r.outcome AS decided_outcome, e.state
FROM recovery_late_evidence AS l
JOIN approved_action_recovery_resolutions AS r USING (dispatch_id)
LEFT JOIN approved_action_executions AS e USING (dispatch_id)
"""


def read_histories(paths: Iterable[Path]) -> list[Event]:
    """All events, ordered by wall-clock time (one host, one clock); a torn last line
    left by kill -9 is skipped."""
    events: list[Event] = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    events.sort(key=lambda e: e["t"])
    return events


# A decision's terminal state, for reading the two-person rules (the checker's own copy).
DECISION_OF = {
    "succeeded": "confirm_succeeded",
    "failed": "confirm_failed",
    "blocked": "abandon_unknown",
}


@dataclass(frozen=True, slots=True)
class HumanPolicy:
    """What the run configured for people: which decisions need two of them (pattern,
    decision) and, per action type, how long each non-final finding may last (ms) before the
    case escalates to the manual queue. The checker judges the final rows against it."""

    two_person: Sequence[tuple[str, str]] = ()
    escalate_after_ms: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def needs_two(self, action_type: str, outcome: str) -> bool:
        decision = DECISION_OF.get(outcome)
        return any(
            rule == decision and _matches(pattern, action_type) for pattern, rule in self.two_person
        )


def _matches(pattern: str, action_type: str) -> bool:
    if pattern in ("*", action_type):
        return True
    return pattern.endswith("*") and action_type.startswith(pattern[:-1])


@dataclass(frozen=True, slots=True)
class LossPoint:
    """An instant (host wall clock, ns: the histories' clock) after which the database may no
    longer hold what it acknowledged last: an immediate stop, or a failover to a standby.

    Claims commit asynchronously by design (a lost claim only makes its page claimable
    again), so any loss point may take those. With `acknowledged` (a failover under
    asynchronous replication) it may take any acknowledged commit: the standby never
    received it. What was lost is a suffix of the old primary's history, never a hole."""

    t_ns: int
    acknowledged: bool


def _maybe_lost(
    t_ack: int, losses: Sequence[LossPoint], *, durable: bool, before: int | None = None
) -> bool:
    """Whether an operation acknowledged at `t_ack` may have been lost at a loss point (one
    that came before `before`, when given). `durable`: the operation committed durably."""
    return any(
        t_ack <= loss.t_ns
        and (before is None or loss.t_ns < before)
        and (loss.acknowledged or not durable)
        for loss in losses
    )


@dataclass(frozen=True, slots=True)
class Claim:
    t: int
    process: str
    dispatch_id: str
    token: str
    recovery_version: int
    execution_version: int
    claimed_at_ms: int


@dataclass(frozen=True, slots=True)
class CommitItem:
    t_invoke: int
    t_done: int
    process: str
    dispatch_id: str
    token: str
    recovery_version: int
    execution_version: int
    finding: str
    evidence_digest: str | None
    status: str  # accepted | rejected | unknown
    mutation_id: str | None = None


@dataclass
class Verdict:
    violations: list[str] = field(default_factory=list)
    operations: Counter[str] = field(default_factory=Counter)
    """Per-dispatch operations: each claimed item, inspect, committed item, executor call."""
    completions: Counter[str] = field(default_factory=Counter)
    """How operations ended: ok, fail or info (outcome unknown)."""
    fence_rejections: int = 0
    claim_pages: int = 0
    history_lines: int = 0
    claim_latency_ms: list[float] = field(default_factory=list)
    """Each answered claim's time from invoke to ok, as its replica measured it."""
    lost: Counter[str] = field(default_factory=Counter)
    """Acknowledged writes the surviving database does not hold, each acknowledged before a
    failover under asynchronous replication (elsewhere that is a violation)."""

    def add(self, rule: str, dispatch_id: str, detail: str) -> None:
        self.violations.append(f"[{rule}] {dispatch_id}: {detail}")


def check(
    events: list[Event],
    rows: list[Row],
    plans: Mapping[str, Plan],
    losses: Sequence[LossPoint] = (),
    *,
    # Keyword-only: both are optional extras a positional call could swap unnoticed.
    policy: HumanPolicy = HumanPolicy(),
    late_rows: Sequence[Row] = (),
) -> Verdict:
    verdict = Verdict(history_lines=len(events))
    claims, commits, inspects, execs = _index(events, verdict)
    by_token = {c.token: c for cs in claims.values() for c in cs}
    leases = _executor_leases(execs)
    db = {r["dispatch_id"]: r for r in rows}
    _check_inspects(inspects, verdict)
    _check_live_leases(claims, leases, verdict)
    _check_stale_writes(commits, claims, by_token, execs, losses, verdict)
    survived = _check_acknowledged_survive(commits, execs, db, losses, verdict)
    _check_terminal_counts(commits, execs, db, survived, verdict)
    _check_final_rows(db, plans, commits, verdict)
    _check_people(db, policy, verdict)
    _check_forgeries(events, verdict)
    _check_late_evidence(events, late_rows, losses, verdict)
    return verdict


# -- indexing -------------------------------------------------------------------------------


def _index(
    events: list[Event], verdict: Verdict
) -> tuple[
    dict[str, list[Claim]],
    dict[str, list[CommitItem]],
    Counter[tuple[str, str]],
    dict[str, list[Event]],
]:
    claims: dict[str, list[Claim]] = defaultdict(list)
    commits: dict[str, list[CommitItem]] = defaultdict(list)
    inspects: Counter[tuple[str, str]] = Counter()
    execs: dict[str, list[Event]] = defaultdict(list)
    pending_commit: dict[str, Event] = {}
    pending_claim: dict[str, int] = {}
    for e in events:
        f, kind, process = e["f"], e["type"], e["process"]
        if kind != "invoke":
            verdict.completions[kind] += 1
        if kind == "invoke" and f != "claim":
            verdict.operations[f] += len(e["items"]) if f == "commit" else 1
        if f == "claim" and kind == "invoke":
            pending_claim[process] = e["t"]
        if f == "claim" and kind != "invoke" and process in pending_claim:
            invoked = pending_claim.pop(process)
            if kind == "ok":
                verdict.claim_latency_ms.append((e["t"] - invoked) / 1e6)
        if f == "claim" and kind == "ok":
            verdict.operations["claim"] += len(e["items"])
            verdict.claim_pages += 1
            for item in e["items"]:
                claims[item["dispatch_id"]].append(Claim(e["t"], process, **item))
        elif f == "inspect" and kind == "invoke":
            inspects[(e["dispatch_id"], e["token"])] += 1
        elif f == "commit" and kind == "invoke":
            pending_commit[process] = e
        elif f == "commit" and process in pending_commit:
            invoke = pending_commit.pop(process)
            accepted = set(e.get("accepted", ()))
            verdict.fence_rejections += len(e.get("rejected", ()))
            for item in invoke["items"]:
                status = (
                    "unknown"
                    if kind == "info"
                    else ("accepted" if item["dispatch_id"] in accepted else "rejected")
                )
                commits[item["dispatch_id"]].append(
                    CommitItem(invoke["t"], e["t"], process, status=status, **item)
                )
        elif f in ("create", "start", "renew", "complete") and "dispatch_id" in e:
            execs[e["dispatch_id"]].append(e)
    # A replica killed mid-commit never answered: that commit's outcome is unknown.
    for process, invoke in pending_commit.items():
        for item in invoke["items"]:
            commits[item["dispatch_id"]].append(
                CommitItem(invoke["t"], invoke["t"], process, status="unknown", **item)
            )
    return claims, commits, inspects, execs


def _executor_leases(execs: Mapping[str, list[Event]]) -> dict[tuple[str, int], int]:
    """(dispatch, execution version) -> lease expiry (database clock) the executor was given."""
    return {
        (d, e["version"]): e["lease_expires_at_ms"]
        for d, es in execs.items()
        for e in es
        if e["type"] == "ok" and e["f"] in ("start", "renew")
    }


# -- rules ----------------------------------------------------------------------------------


def _check_inspects(inspects: Counter[tuple[str, str]], verdict: Verdict) -> None:
    for (dispatch_id, token), n in inspects.items():
        if n > 1:
            verdict.add("one_inspect_per_lease", dispatch_id, f"{n} inspects under token {token}")


def _check_live_leases(
    claims: Mapping[str, list[Claim]], leases: Mapping[tuple[str, int], int], verdict: Verdict
) -> None:
    for dispatch_id, cs in claims.items():
        for c in cs:
            expiry = leases.get((dispatch_id, c.execution_version))
            if expiry is not None and c.claimed_at_ms < expiry:
                verdict.add(
                    "no_live_lease_claimed",
                    dispatch_id,
                    f"{c.process} claimed at {c.claimed_at_ms} the execution lease of version "
                    f"{c.execution_version} that ran until {expiry}",
                )


def _check_stale_writes(
    commits: Mapping[str, list[CommitItem]],
    claims: Mapping[str, list[Claim]],
    by_token: Mapping[str, Claim],
    execs: Mapping[str, list[Event]],
    losses: Sequence[LossPoint],
    verdict: Verdict,
) -> None:
    for dispatch_id, items in commits.items():
        for item in items:
            if item.status != "accepted":
                continue
            own = by_token.get(item.token)
            if own is None or own.process != item.process:
                verdict.add(
                    "stale_write", dispatch_id, f"{item.process} committed an unclaimed token"
                )
                continue
            # A later claim known to have happened before this commit began revoked it.
            # A claim or executor write lost at a loss point in between revoked nothing.
            for other in claims.get(dispatch_id, ()):
                if _maybe_lost(other.t, losses, durable=False, before=item.t_invoke):
                    continue
                if other.recovery_version > item.recovery_version and other.t < item.t_invoke:
                    verdict.add(
                        "stale_write",
                        dispatch_id,
                        f"{item.process} committed under recovery version {item.recovery_version} "
                        f"after {other.process} had claimed version {other.recovery_version}",
                    )
            # So did an executor renew or completion that moved the execution version first.
            for e in execs.get(dispatch_id, ()):
                moved = e["type"] == "ok" and (
                    (e["f"] == "renew" and e["version"] > item.execution_version)
                    or (e["f"] == "complete" and e.get("result") == "committed")
                )
                lost = _maybe_lost(e["t"], losses, durable=True, before=item.t_invoke)
                if moved and e["t"] < item.t_invoke and not lost:
                    verdict.add(
                        "stale_write",
                        dispatch_id,
                        f"{item.process} committed execution version {item.execution_version} "
                        f"after the executor's {e['f']} had moved it",
                    )


def _check_terminal_counts(
    commits: Mapping[str, list[CommitItem]],
    execs: Mapping[str, list[Event]],
    db: Mapping[str, Row],
    survived: Mapping[int, bool],
    verdict: Verdict,
) -> None:
    """At most one terminal transition per dispatch among those the database still holds
    (one lost with the old primary was, for the survivors, never made)."""
    for dispatch_id in set(commits) | set(execs):
        resolved = [
            c
            for c in commits.get(dispatch_id, ())
            if c.status == "accepted" and c.finding in VERIFIED and survived.get(id(c), True)
        ]
        completed = [
            e
            for e in execs.get(dispatch_id, ())
            if _committed_completion(e) and survived.get(id(e), True)
        ]
        if len(resolved) + len(completed) > 1:
            verdict.add(
                "one_terminal_transition",
                dispatch_id,
                f"{len(resolved)} accepted resolutions and {len(completed)} committed completions",
            )
        for c in commits.get(dispatch_id, ()):
            if c.status == "accepted" and c.finding in NEEDS_HUMAN:
                row = db.get(dispatch_id, {})
                if row.get("source") == "automatic" and row.get("finding") in NEEDS_HUMAN:
                    verdict.add(
                        "needs_human", dispatch_id, "a conflict/unsupported finding settled it"
                    )


def _committed_completion(e: Event) -> bool:
    return e["f"] == "complete" and e["type"] == "ok" and e.get("result") == "committed"


def _check_acknowledged_survive(
    commits: Mapping[str, list[CommitItem]],
    execs: Mapping[str, list[Event]],
    db: Mapping[str, Row],
    losses: Sequence[LossPoint],
    verdict: Verdict,
) -> dict[int, bool]:
    """Every acknowledged durable write is in the final database, unless it was acknowledged
    before a failover under asynchronous replication: then it is counted as lost. Answers,
    by `id()` of the operation, False for each write lost that way (other rules ignore it)."""
    survived: dict[int, bool] = {}

    def judge(op: object, dispatch_id: str, what: str, held: bool, t_ack: int) -> None:
        if held:
            return
        if _maybe_lost(t_ack, losses, durable=True):
            survived[id(op)] = False
            verdict.lost[what] += 1
        else:
            verdict.add("acknowledged_survives", dispatch_id, f"an acknowledged {what} is gone")

    for dispatch_id in set(commits) | set(execs):
        row = db.get(dispatch_id)
        for c in commits.get(dispatch_id, ()):
            if c.status == "accepted" and c.finding in VERIFIED:
                held = row is not None and row["res_mutation_id"] == c.mutation_id
                # From its invocation: the old primary may have committed it and been killed
                # before the replica's process recorded the reply (a reply on its way, a
                # process descheduled), which then reads as acknowledged after the kill.
                judge(c, dispatch_id, "resolution", held, c.t_invoke)
        # An executor's write, as a resolution, from when it was sent (its invocation).
        sent: dict[tuple[str, str], int] = {}
        for e in execs.get(dispatch_id, ()):
            if e["type"] == "invoke":
                sent[(e["process"], e["f"])] = e["t"]
            if e["type"] != "ok":
                continue
            t_sent = sent.get((e["process"], e["f"]), e["t"])
            if e["f"] == "create":
                judge(e, dispatch_id, "create", row is not None, t_sent)
            elif e["f"] in ("start", "renew"):
                held = (
                    row is not None and row["status"] is not None and row["version"] >= e["version"]
                )
                judge(e, dispatch_id, e["f"], held, t_sent)
            elif _committed_completion(e):
                held = row is not None and (row["closed_by"], row["state"]) == (
                    "completion",
                    e.get("outcome"),
                )
                judge(e, dispatch_id, "completion", held, t_sent)
    return survived


def _check_final_rows(
    db: Mapping[str, Row],
    plans: Mapping[str, Plan],
    commits: Mapping[str, list[CommitItem]],
    verdict: Verdict,
) -> None:
    for dispatch_id, row in db.items():
        plan = plans.get(dispatch_id)
        _check_row_consistency(dispatch_id, row, verdict)
        if row["source"] == "automatic":
            _check_automatic(dispatch_id, row, plan, commits.get(dispatch_id, []), verdict)
        if row["status"] is None:
            continue  # never crossed the barrier: not recovery's business
        if row["status"] == "armed":
            verdict.add("settles", dispatch_id, f"still armed (last finding {row['last_finding']})")
        if plan is None:
            continue
        if plan.kind is Kind.CRASHED_VERIFIED and row["closed_by"] != "automatic":
            verdict.add(
                "settles", dispatch_id, f"provable, but ended {row['status']}/{row['closed_by']}"
            )
        # Evidence cannot settle it: it waits for a person, or a person settled it.
        if (
            plan.kind is Kind.CRASHED_MANUAL
            and (row["status"], row["state"]) != ("manual", "executing")
            and row["closed_by"] != "manual"
        ):
            verdict.add(
                "needs_human",
                dispatch_id,
                f"no provable evidence, but ended {row['status']}/{row['state']}",
            )
        escalated = row["manual_reason"] == "evidence_window_elapsed"
        if plan.kind is Kind.CRASHED_ESCALATED and not (
            (row["status"] == "manual" and escalated) or row["closed_by"] == "manual"
        ):
            verdict.add(
                "escalation_window",
                dispatch_id,
                f"evidence stayed missing, but ended {row['status']}/{row['closed_by']} "
                f"({row['manual_reason']})",
            )
        if plan.kind in (Kind.LIVE_REPLAY, Kind.LIVE_DRIFT) and row["status"] != "resolved":
            verdict.add("settles", dispatch_id, f"live execution ended {row['status']}")


def _check_people(db: Mapping[str, Row], policy: HumanPolicy, verdict: Verdict) -> None:
    """Escalations and two-person decisions, over the final rows."""
    for dispatch_id, row in db.items():
        if row.get("manual_reason") == "evidence_window_elapsed" and row.get("manual_at_ms"):
            window = policy.escalate_after_ms.get(row["action_type"], {}).get(row["last_finding"])
            waited = row["manual_at_ms"] - (row["first_inspected_at_ms"] or row["manual_at_ms"])
            if window is None:
                verdict.add(
                    "escalation_window",
                    dispatch_id,
                    f"escalated on {row['last_finding']}, which has no window for "
                    f"{row['action_type']}",
                )
            elif waited < window:
                verdict.add(
                    "escalation_window",
                    dispatch_id,
                    f"escalated {waited} ms after its first inspection, window {window} ms",
                )
        two = row.get("source") == "manual" and policy.needs_two(row["action_type"], row["outcome"])
        if two and (row.get("people") or 0) < 2:
            verdict.add(
                "two_people",
                dispatch_id,
                f"settled {row['outcome']} with {row.get('people')} distinct authorizations",
            )
        terminal = row["state"] in ("succeeded", "failed", "blocked")
        if terminal and (row.get("open_proposals") or 0) > 0:
            verdict.add("two_people", dispatch_id, "settled, yet a proposal on it is still open")


def _check_forgeries(events: list[Event], verdict: Verdict) -> None:
    """Direct SQL attempts at a decision (tests/contention/forgery.py), by whatever role the
    history names: a two-person case is settled by the manual commit or not at all, so no
    attempt may ever commit."""
    for e in events:
        if e["f"] == "forge" and e["type"] == "ok":
            verdict.add(
                "two_people",
                e["dispatch_id"],
                f"a direct SQL write as {e['role']} committed a decision naming {e['user']}",
            )


def _check_row_consistency(dispatch_id: str, row: Row, verdict: Verdict) -> None:
    terminal = row["state"] in ("succeeded", "failed", "blocked")
    if row["resolutions"] > 1:
        verdict.add("one_resolution", dispatch_id, f"{row['resolutions']} resolutions")
    if row["status"] is not None and terminal != (row["status"] == "resolved"):
        verdict.add(
            "atomic_commit", dispatch_id, f"execution {row['state']} but control {row['status']}"
        )
    if row["closed_by"] == "completion" and row["source"] is not None:
        verdict.add("one_terminal_transition", dispatch_id, "closed by completion yet resolved too")
    if row["closed_by"] == "automatic" and (
        row["source"] != "automatic" or row["exec_digest"] != row["res_digest"]
    ):
        verdict.add("atomic_commit", dispatch_id, "automatic close without its matching resolution")
    if row["status"] != "armed" and row["recovery_token"] is not None:
        verdict.add("atomic_commit", dispatch_id, "a closed control still holds a recovery lease")


def _check_automatic(
    dispatch_id: str, row: Row, plan: Plan | None, commits: list[CommitItem], verdict: Verdict
) -> None:
    proven = plan.provable_outcome if plan else None
    if plan is None or proven is None:
        verdict.add(
            "verified_evidence_only", dispatch_id, "automatically settled without provable evidence"
        )
        return
    # A signed receipt's digest covers its own finish time; the provider verified it, and
    # the commit history must carry the same digest (checked below).
    digest_ok = plan.script is None or row["res_digest"] == plan.expected_digest(
        Outcome(row["outcome"])
    )
    if row["outcome"] != proven.value or not digest_ok:
        verdict.add(
            "verified_evidence_only",
            dispatch_id,
            f"settled {row['outcome']} on digest {row['res_digest']}, evidence proves {proven.value}",
        )
    if not any(
        c.finding in VERIFIED and c.status != "rejected" and c.evidence_digest == row["res_digest"]
        for c in commits
    ):
        verdict.add(
            "verified_evidence_only", dispatch_id, "no recorded verified commit explains it"
        )


# -- late evidence after a manual decision ----------------------------------------------------


def _check_late_evidence(
    events: Sequence[Event], late_rows: Sequence[Row], losses: Sequence[LossPoint], verdict: Verdict
) -> None:
    """A late observation is a fact beside a manual decision: it never moves the terminal
    state, there is at most one per dispatch and per observation (in the history of
    acknowledged records and in the database), and an acknowledged one survives.

    History: `late_record` ok events carry `records`, each `{dispatch_id, observation_id,
    recorded, agrees}` for a look whose fence held (`recorded`: it wrote a fact)."""
    recorded: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for e in events:
        if e["f"] == "late_record" and e["type"] == "ok":
            for r in e["records"]:
                if r["recorded"]:
                    recorded[r["dispatch_id"]].append((e["t"], e["process"], r["observation_id"]))
    for dispatch_id, facts in recorded.items():
        if len(facts) > 1:
            who = ", ".join(f"{process} ({obs})" for _t, process, obs in facts)
            verdict.add("one_late_fact", dispatch_id, f"{len(facts)} recorded late facts: {who}")
    rows_by_dispatch: dict[str, list[Row]] = defaultdict(list)
    observations: Counter[str] = Counter()
    for row in late_rows:
        rows_by_dispatch[row["dispatch_id"]].append(row)
        observations[row["observation_id"]] += 1
    for observation_id, n in observations.items():
        if n > 1:
            verdict.add("one_late_fact", observation_id, f"observation recorded {n} times")
    for dispatch_id, rows in rows_by_dispatch.items():
        if len(rows) > 1:
            verdict.add("one_late_fact", dispatch_id, f"{len(rows)} late facts in the database")
        for row in rows:
            _check_late_row(dispatch_id, row, verdict)
    for dispatch_id, facts in recorded.items():
        held = {row["observation_id"] for row in rows_by_dispatch.get(dispatch_id, ())}
        for t, _process, observation_id in facts:
            if observation_id not in held and not _maybe_lost(t, losses, durable=True):
                verdict.add(
                    "acknowledged_survives", dispatch_id, "an acknowledged late fact is gone"
                )


def _check_late_row(dispatch_id: str, row: Row, verdict: Verdict) -> None:
    if row["source"] != "manual":
        verdict.add("late_after_manual", dispatch_id, f"late fact beside a {row['source']} one")
    # The execution still holds the state the decision set (NULL: pruned since).
    if row["state"] is not None and row["state"] != row["decided_outcome"]:
        verdict.add(
            "late_never_moves_terminal",
            dispatch_id,
            f"decided {row['decided_outcome']}, execution now {row['state']}",
        )
    if row["agrees"] != (row["finding"] == f"verified_{row['decided_outcome']}"):
        verdict.add(
            "late_agrees",
            dispatch_id,
            f"{row['finding']} after {row['decided_outcome']} recorded agrees={row['agrees']}",
        )
