"""The read routes (case, lists, decisions) over real HTTP, real tokens, real PostgreSQL."""

from __future__ import annotations

import base64
import random
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from resolver.core.domain import CaseSort, Finding, FindingKind
from resolver.core.provider import build_registry
from resolver.core.reconciler import Reconciler, ReconcilerSettings
from resolver.core.runtime import Runtime
from tests.helpers.api import auth, body
from tests.helpers.database import EXEC_LEASE_MS, SQL, T0, World, new_spec
from tests.helpers.oidc import token
from tests.helpers.providers import ScriptedProvider, fixed, reconciler, scripted_as
from tests.helpers.stores import Storage


@pytest.fixture
def reader(sql: SQL) -> str:
    """bob may read proj-1 (approval.recover.read) but not decide."""
    sql.all(
        "INSERT INTO recovery_role_bindings VALUES ('proj-1', 'bob', 'approval.recover.read', 1)"
    )
    return "bob"


def get(
    api: httpx.Client, key: rsa.RSAPrivateKey, path: str, user: str = "alice"
) -> httpx.Response:
    return api.get(path, headers=auth(token(key, sub=user)))


def test_case_shows_identity_execution_control_and_then_the_resolution(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey, sql: SQL
) -> None:
    dispatch_id, version = manual_item
    case = get(api, signing_key, f"/v1/dispatches/{dispatch_id}")
    assert case.status_code == 200, case.text
    assert case.headers["cache-control"] == "no-store"
    doc = case.json()
    stored = sql.one("SELECT * FROM approved_action_dispatches WHERE dispatch_id = %s", dispatch_id)
    assert doc["identity"] == {
        "dispatch_id": dispatch_id,
        "approval_request_id": stored["approval_request_id"],
        "project_id": "proj-1",
        "action_type": stored["action_type"],
        "action_digest": stored["action_digest"],
        "idempotency_key": stored["idempotency_key"],
        "schema_version": 1,
        "supersedes_dispatch_id": None,
        "superseded_by": [],
        "created_at_ms": stored["created_at_ms"],
        "action_summary": None,  # this executor gave none: it is optional
    }
    assert doc["execution"]["state"] == "executing"
    assert doc["execution"]["recovery_required"] is True
    assert doc["execution"]["version"] == version
    control = doc["control"]
    assert (control["status"], control["manual_reason"], control["last_finding"]) == (
        "manual",
        "conflict",
        "conflict",
    )
    assert control["finding_counts"] == {"conflict": 1}
    assert control["first_inspected_at_ms"] == control["last_inspected_at_ms"] is not None
    assert (doc["proposal"], doc["resolution"], doc["authorizations"]) == (None, None, [])
    assert doc["late_evidence"] == []

    url = f"/v1/dispatches/{dispatch_id}/resolution"
    decided = api.post(url, json=body(version), headers=auth(token(signing_key)))
    assert decided.status_code == 200, decided.text
    settled = get(api, signing_key, f"/v1/dispatches/{dispatch_id}").json()
    assert settled["execution"]["state"] == "failed"
    assert settled["execution"]["recovery_required"] is False
    assert settled["control"]["closed_by"] == "manual"
    # The closed case keeps when it reached the queue: its history, not cleared at close.
    assert settled["control"]["manual_at_ms"] == control["manual_at_ms"] is not None
    resolution = settled["resolution"]
    assert (resolution["source"], resolution["decision"], resolution["outcome"]) == (
        "manual",
        "confirm_failed",
        "failed",
    )
    assert (resolution["actor_user_id"], resolution["mutation_id"]) == ("alice", "op-7")
    (authorization,) = settled["authorizations"]
    assert (authorization["user_id"], authorization["role"]) == ("alice", "decider")
    assert "mfa" in authorization["amr"]


def test_unknown_and_forbidden_cases_answer_alike(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey
) -> None:
    dispatch_id, _ = manual_item
    unknown = get(api, signing_key, "/v1/dispatches/no-such-dispatch")
    forbidden = get(api, signing_key, f"/v1/dispatches/{dispatch_id}", user="mallory")
    assert unknown.status_code == forbidden.status_code == 404
    assert unknown.json() == forbidden.json()
    assert forbidden.json()["code"] == "not_found"


def test_a_reader_sees_the_case_and_the_queue_but_cannot_decide(
    api: httpx.Client,
    manual_item: tuple[str, int],
    signing_key: rsa.RSAPrivateKey,
    reader: str,
    sql: SQL,
) -> None:
    dispatch_id, version = manual_item
    assert get(api, signing_key, f"/v1/dispatches/{dispatch_id}", user=reader).status_code == 200
    queue = get(api, signing_key, "/v1/manual-queue", user=reader).json()
    assert [i["dispatch_id"] for i in queue["items"]] == [dispatch_id]
    url = f"/v1/dispatches/{dispatch_id}/resolution"
    refused = api.post(url, json=body(version), headers=auth(token(signing_key, sub=reader)))
    # A write answers a dispatch the caller may not decide like an unknown one.
    assert refused.status_code == 404
    assert sql.execution(dispatch_id)["state"] == "executing"


def test_supersession_is_shown_both_ways(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey, world: World
) -> None:
    dispatch_id, _ = manual_item
    again = new_spec(project_id="proj-1", supersedes_dispatch_id=dispatch_id)
    world.store.create_dispatch(again)
    old = get(api, signing_key, f"/v1/dispatches/{dispatch_id}").json()
    assert old["identity"]["superseded_by"] == [again.dispatch_id]
    new = get(api, signing_key, f"/v1/dispatches/{again.dispatch_id}").json()
    assert new["identity"]["supersedes_dispatch_id"] == dispatch_id
    assert new["execution"] is None  # never leased yet


def test_supersession_across_projects_names_only_what_the_caller_may_read(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey, world: World
) -> None:
    dispatch_id, _ = manual_item
    elsewhere = new_spec(project_id="proj-other", supersedes_dispatch_id=dispatch_id)
    world.store.create_dispatch(elsewhere)
    old = get(api, signing_key, f"/v1/dispatches/{dispatch_id}").json()
    assert old["identity"]["superseded_by"] == []
    hidden = new_spec(project_id="proj-other")
    world.store.create_dispatch(hidden)
    mine = new_spec(project_id="proj-1", supersedes_dispatch_id=hidden.dispatch_id)
    world.store.create_dispatch(mine)
    new = get(api, signing_key, f"/v1/dispatches/{mine.dispatch_id}").json()
    assert new["identity"]["supersedes_dispatch_id"] is None


def test_queue_items_carry_lookup_fields_and_filters_narrow_them(
    api: httpx.Client, world: World, store: Storage, signing_key: rsa.RSAPrivateKey
) -> None:
    leases = [world.started(now_ms=1_000_000) for _ in range(3)]
    reconciler(store, ScriptedProvider(fixed(FindingKind.CONFLICT))).run_cycle()
    specs = [world.specs[lease.dispatch_id] for lease in leases]
    page = get(api, signing_key, "/v1/manual-queue").json()
    assert page["total"] == 3 and page["next_cursor"] is None
    first = page["items"][0]
    assert first["approval_request_id"] == specs[0].approval_request_id
    assert first["idempotency_key"] == specs[0].idempotency_key
    assert first["action_digest"] == specs[0].action_digest
    assert (first["manual_reason"], first["proposal"]) == ("conflict", None)

    for q in (specs[1].dispatch_id, specs[1].idempotency_key, specs[1].approval_request_id):
        found = get(api, signing_key, f"/v1/manual-queue?q={q}").json()
        assert [i["dispatch_id"] for i in found["items"]] == [specs[1].dispatch_id], q
        assert found["total"] == 1
    none = get(api, signing_key, "/v1/manual-queue?project_id=proj-2&last_finding=conflict")
    assert none.json() == {"items": [], "next_cursor": None, "total": 0, "total_cap": 1000}
    assert get(api, signing_key, "/v1/manual-queue?last_finding=unsupported").json()["total"] == 0
    # Ages are on the database clock: these entered the queue moments ago.
    young = get(api, signing_key, "/v1/manual-queue?min_age_seconds=3600").json()
    assert young["total"] == 0

    two = get(api, signing_key, "/v1/manual-queue?limit=2").json()
    rest = get(api, signing_key, f"/v1/manual-queue?limit=2&cursor={two['next_cursor']}").json()
    ids = [i["dispatch_id"] for i in two["items"] + rest["items"]]
    assert sorted(ids) == sorted(s.dispatch_id for s in specs) and len(set(ids)) == 3


def test_waiting_lists_armed_cases_inspected_at_least_once(
    api: httpx.Client, world: World, store: Storage, signing_key: rsa.RSAPrivateKey
) -> None:
    never = world.started(now_ms=1_000_000)  # leased and crashed, but not inspected yet
    page = get(api, signing_key, "/v1/waiting").json()
    assert page["items"] == [] and page["total"] == 0
    reconciler(store, ScriptedProvider(fixed(FindingKind.MISSING))).run_cycle()
    page = get(api, signing_key, "/v1/waiting").json()
    (item,) = page["items"]
    assert (item["dispatch_id"], item["last_finding"], item["manual_at_ms"]) == (
        never.dispatch_id,
        "missing",
        None,
    )
    assert item["first_inspected_at_ms"] is not None
    assert get(api, signing_key, "/v1/manual-queue").json()["total"] == 0


# Each list's cases: (action type, project, finding). The manual queue's findings send a
# control there, the waiting list's keep it armed and inspected.
LIST_CASES = {
    "manual-queue": (
        ("shell.exec", "proj-2", FindingKind.CONFLICT),
        ("ledger.post", "proj-1", FindingKind.UNSUPPORTED),
        ("shell.exec", "proj-1", FindingKind.UNSUPPORTED),
        ("mail.send", "proj-2", FindingKind.CONFLICT),
        ("ledger.post", "proj-2", FindingKind.CONFLICT),
    ),
    "waiting": (
        ("shell.exec", "proj-2", FindingKind.MISSING),
        ("ledger.post", "proj-1", FindingKind.STILL_RUNNING),
        ("shell.exec", "proj-1", FindingKind.UNAVAILABLE),
        ("mail.send", "proj-2", FindingKind.MISSING),
        ("ledger.post", "proj-2", FindingKind.STILL_RUNNING),
    ),
}


@pytest.mark.parametrize("which", sorted(LIST_CASES))
def test_every_sort_pages_its_list_in_order_each_case_once(
    api: httpx.Client,
    world: World,
    store: Storage,
    sql: SQL,
    signing_key: rsa.RSAPrivateKey,
    which: str,
) -> None:
    """Every sort the lists offer groups the list by its column, oldest first within, and
    pages of two walk it with their cursors exactly once: the page's order, its keyset and the
    cursor it hands out read one expression of the sort."""
    sql.all("INSERT INTO recovery_projects VALUES ('proj-2', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-2', 'alice', 'approval.recover', 1)")
    findings = {}
    for n, (action_type, project_id, kind) in enumerate(LIST_CASES[which]):
        spec = world.executor.create_dispatch(
            new_spec(action_type, project_id=project_id, dispatch_id=f"sort-{which}-{n}")
        )
        executor = world.executor.at(1_000_000 + n)
        executor.start(executor.lease(spec.dispatch_id))
        findings[spec.dispatch_id] = kind
    types = tuple({action_type for action_type, _, _ in LIST_CASES[which]})
    provider = ScriptedProvider(lambda i: Finding(findings[i.dispatch_id]))
    reconciler(store, provider, action_type=types[0], more_action_types=types[1:]).run_cycle()
    since = "manual_at_ms" if which == "manual-queue" else "first_inspected_at_ms"

    walked = {}
    for sort in CaseSort:
        items: list[dict[str, Any]] = []
        path: str | None = f"/v1/{which}?sort={sort}&limit=2"
        while path is not None:
            page = get(api, signing_key, path)
            assert page.status_code == 200, page.text
            items += page.json()["items"]
            cursor = page.json()["next_cursor"]
            path = None if cursor is None else f"/v1/{which}?sort={sort}&limit=2&cursor={cursor}"
            assert len(items) <= len(findings), "a cursor led back into the list"
        walked[sort] = [item["dispatch_id"] for item in items]

        def order(item: dict[str, Any], sort: CaseSort = sort) -> tuple[str, int, str]:
            group = "" if sort is CaseSort.AGE else item[sort.value]
            return (group, item[since], item["dispatch_id"])

        assert sorted(walked[sort]) == sorted(findings), sort
        assert walked[sort] == [item["dispatch_id"] for item in sorted(items, key=order)], sort
    # The cases are spread so that each grouping orders them differently from the others.
    assert len({tuple(ids) for ids in walked.values()}) == len(CaseSort)


def test_decisions_list_who_how_and_what_was_overridden(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey
) -> None:
    dispatch_id, version = manual_item
    url = f"/v1/dispatches/{dispatch_id}/resolution"
    tok = token(signing_key)
    assert api.post(url, json=body(version), headers=auth(tok)).status_code == 200
    page = get(api, signing_key, "/v1/decisions").json()
    (item,) = page["items"]
    assert item["dispatch_id"] == dispatch_id
    assert (item["decision"], item["outcome"], item["actor_user_id"]) == (
        "confirm_failed",
        "failed",
        "alice",
    )
    assert (item["overridden_finding"], item["reason_code"]) == ("conflict", "vendor_says_declined")
    assert (item["confirmed_by"], item["contradicted"]) == (None, None)
    assert "mfa" in item["amr"] and item["auth_time_ms"] > 0
    assert get(api, signing_key, "/v1/decisions?user_id=bob").json()["items"] == []
    late = item["resolved_at_ms"] + 1
    assert get(api, signing_key, f"/v1/decisions?since_ms={late}").json()["items"] == []
    assert get(api, signing_key, f"/v1/decisions?until_ms={late}").json()["items"] != []
    assert get(api, signing_key, "/v1/decisions", user="mallory").json()["items"] == []


def test_decisions_lookup_filters_and_total_match_the_open_lists(
    api: httpx.Client, world: World, store: Storage, signing_key: rsa.RSAPrivateKey, sql: SQL
) -> None:
    # Three decisions alice may read (two shell.exec cases the provider does not support, one
    # test.action conflict) and one in proj-2, decided by carol, that alice may not read.
    shells = [world.started("shell.exec", now_ms=1_000_000) for _ in range(2)]
    other = world.started(now_ms=1_000_000)
    hidden = world.executor.create_dispatch(new_spec(project_id="proj-2"))
    hidden_lease = world.executor.at(1_000_000).start(
        world.executor.at(1_000_000).lease(hidden.dispatch_id)
    )
    reconciler(store, ScriptedProvider(fixed(FindingKind.CONFLICT))).run_cycle()
    sql.all("INSERT INTO recovery_projects VALUES ('proj-2', 1)")
    sql.all("INSERT INTO recovery_role_bindings VALUES ('proj-2', 'carol', 'approval.recover', 1)")
    for n, (lease, user) in enumerate(
        [(shells[0], "alice"), (shells[1], "alice"), (other, "alice"), (hidden_lease, "carol")]
    ):
        url = f"/v1/dispatches/{lease.dispatch_id}/resolution"
        tok = token(signing_key, sub=user)
        decided = api.post(url, json=body(lease.version, mutation_id=f"op-{n}"), headers=auth(tok))
        assert decided.status_code == 200, decided.text

    def ids(query: str, user: str = "alice") -> tuple[list[str], int]:
        page = get(api, signing_key, f"/v1/decisions?{query}", user=user).json()
        return [i["dispatch_id"] for i in page["items"]], page["total"]

    everything, total = ids("")
    assert total == 3 and set(everything) == {
        shells[0].dispatch_id,
        shells[1].dispatch_id,
        other.dispatch_id,
    }
    # Lookup: the same three identifiers the open lists accept, each finding its one decision.
    spec = world.specs[shells[1].dispatch_id]
    for q in (spec.dispatch_id, spec.idempotency_key, spec.approval_request_id):
        assert ids(f"q={q}") == ([spec.dispatch_id], 1), q
    (item,) = get(api, signing_key, f"/v1/decisions?q={spec.idempotency_key}").json()["items"]
    assert (item["idempotency_key"], item["approval_request_id"]) == (
        spec.idempotency_key,
        spec.approval_request_id,
    )
    assert ids("q=no-such-key") == ([], 0)
    # Unknown and forbidden answer alike: carol's decision is invisible to alice, by any id.
    assert ids(f"q={hidden.idempotency_key}") == ([], 0)
    assert ids(f"q={hidden.idempotency_key}", user="carol") == ([hidden.dispatch_id], 1)
    assert ids("project_id=proj-2") == ([], 0)

    shell_ids, shell_total = ids("action_type=shell.exec")
    assert shell_total == 2
    assert set(shell_ids) == {shells[0].dispatch_id, shells[1].dispatch_id}
    assert ids("overridden_finding=conflict") == ([other.dispatch_id], 1)
    assert ids("overridden_finding=unsupported&action_type=shell.exec")[1] == 2
    assert ids("overridden_finding=conflict&action_type=shell.exec") == ([], 0)
    assert ids("overridden_finding=missing")[1] == 0

    # Keyset paging is unchanged by the filters, and the total counts every page.
    first = get(api, signing_key, "/v1/decisions?action_type=shell.exec&limit=1").json()
    assert first["total"] == 2 and first["next_cursor"] is not None
    cursor = first["next_cursor"]
    rest = get(api, signing_key, f"/v1/decisions?action_type=shell.exec&limit=1&cursor={cursor}")
    paged = [i["dispatch_id"] for i in first["items"] + rest.json()["items"]]
    assert paged == shell_ids and rest.json()["total"] == 2


def test_a_stale_decision_answers_409_with_the_current_state(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey
) -> None:
    dispatch_id, version = manual_item
    url = f"/v1/dispatches/{dispatch_id}/resolution"
    stale = api.post(url, json=body(version + 5), headers=auth(token(signing_key)))
    assert stale.status_code == 409
    assert stale.json()["current"] == {
        "state": "executing",
        "version": version,
        "control_status": "manual",
    }


def test_step_up_answer_follows_rfc_9470(
    api: httpx.Client, manual_item: tuple[str, int], signing_key: rsa.RSAPrivateKey
) -> None:
    dispatch_id, version = manual_item
    url = f"/v1/dispatches/{dispatch_id}/resolution"
    weak = api.post(url, json=body(version), headers=auth(token(signing_key, amr=["pwd"])))
    assert weak.status_code == 401 and weak.json()["code"] == "step_up_required"
    challenge = weak.headers["www-authenticate"]
    for part in ('error="insufficient_user_authentication"', 'acr_values="mfa"', "max_age=300"):
        assert part in challenge


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=101",
        "limit=+7",
        "min_age_seconds=-1",
        "min_age_seconds=1e3",
        "last_finding=bogus",
        "project_id=has space",
        "action_type=Upper",
        "q=" + "x" * 129,
        "cursor=" + base64.urlsafe_b64encode(b"12:bad id").decode(),
        "cursor=%%%",
    ],
)
def test_list_parameters_are_bounded_before_any_sql(
    api: httpx.Client, signing_key: rsa.RSAPrivateKey, query: str
) -> None:
    for path in ("/v1/manual-queue", "/v1/waiting"):
        answer = get(api, signing_key, f"{path}?{query}")
        assert answer.status_code == 422, (path, query, answer.text)
        assert answer.json()["code"] == "invalid_request"


@pytest.mark.parametrize(
    "query",
    [
        "since_ms=-1",
        "until_ms=1.5",
        "user_id=",
        "cursor=" + "A" * 301,
        "limit=1000",
        "overridden_finding=bogus",
        "action_type=Upper",
        "project_id=has space",
        "q=" + "x" * 129,
        "q=a b",
    ],
)
def test_decision_parameters_are_bounded(
    api: httpx.Client, signing_key: rsa.RSAPrivateKey, query: str
) -> None:
    assert get(api, signing_key, f"/v1/decisions?{query}").status_code == 422


def test_a_waiting_case_shows_its_next_look_and_when_it_escalates(
    api: httpx.Client, signing_key: rsa.RSAPrivateKey, world: World, store: Storage, sql: SQL
) -> None:
    """The escalation window lives in the replicas' provider configuration: the commit
    records the time on the control, and the case and the waiting list show it beside the next
    look; a finding that never escalates shows null."""
    (install,) = world.crashed(1, action_type="pkg.install")
    (other,) = world.crashed(1, action_type="run.thing")
    config = {"pkg.install": {"provider": "package_install"}, "run.thing": {"provider": "runs"}}
    answer = fixed(FindingKind.MISSING)
    registry = build_registry(
        config, {n: scripted_as(n, answer) for n in ("package_install", "runs")}
    )
    settings = ReconcilerSettings(owner="r", recovery_lease_ms=30_000, backoff_base_ms=1_000)
    rec = Reconciler(store, registry, settings, Runtime(rng=random.Random(3)))
    first_look = T0 + EXEC_LEASE_MS
    assert rec.at(first_look).run_cycle().accepted == {install.dispatch_id, other.dispatch_id}
    window_ms = 3_600_000  # package_install's declared window for missing evidence

    waiting = {i["dispatch_id"]: i for i in get(api, signing_key, "/v1/waiting").json()["items"]}
    for lease, escalates in ((install, first_look + window_ms), (other, None)):
        control = sql.control(lease.dispatch_id)
        item = waiting[lease.dispatch_id]
        assert item["next_look_at_ms"] == control["next_scan_at_ms"] > first_look
        assert item["escalates_at_ms"] == escalates
        case = get(api, signing_key, f"/v1/dispatches/{lease.dispatch_id}").json()
        assert case["control"]["escalates_at_ms"] == escalates
    # A later look does not move it: the window counts from the first inspection.
    rec.at(first_look + 60_000).run_cycle()
    case = get(api, signing_key, f"/v1/dispatches/{install.dispatch_id}").json()
    assert case["control"]["escalates_at_ms"] == first_look + window_ms
    # Escalated: in the manual queue, with neither time.
    rec.at(first_look + window_ms).run_cycle()
    assert sql.control(install.dispatch_id)["status"] == "manual"
    (queued,) = get(api, signing_key, "/v1/manual-queue").json()["items"]
    assert (queued["dispatch_id"], queued["next_look_at_ms"], queued["escalates_at_ms"]) == (
        install.dispatch_id,
        None,
        None,
    )
    case = get(api, signing_key, f"/v1/dispatches/{install.dispatch_id}").json()
    assert case["control"]["escalates_at_ms"] is None
